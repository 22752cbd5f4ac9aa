package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/eimhq/eim/fde/luks2"
	"github.com/eimhq/eim/fde/systemdtpm2"
	"github.com/eimhq/eim/fde/tpmseal"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// Full-disk encryption of the installed root (docs/security.md): the
// encrypt-root action turns the root partition the image holds into a LUKS2
// volume in place. Keyslot 0 is opened by a random key sealed to the TPM
// (PCR policy, by default PCR 7: the Secure Boot state) as
// systemd-cryptenroll seals it, kept in the volume's systemd-tpm2 token, so
// that a stock systemd-based initramfs unlocks it as EIM's test OS does;
// keyslot 1 by the recovery key the agent escrowed with EIM first. The
// installed test OS (and later write-file actions) unlock it with
// UnlockRoot.

// TPMTokenType is the type of the LUKS2 token that holds the TPM-sealed key
// of keyslot 0: systemd's (fde/systemdtpm2).
const TPMTokenType = systemdtpm2.TokenType

// LegacyTPMTokenType is the token EIM wrote before, on nodes installed
// then: its data is a v1 tpmseal blob, and the key it unseals is keyslot
// 0's passphrase as it is. EIM still unlocks such volumes; it no longer
// writes the token.
const LegacyTPMTokenType = "eim-tpm2"

// KDFs of the keyslots. Both keys are random, not chosen by a person: the
// TPM's 256 bits, the recovery key's 160. Stretching adds nothing to a
// guess at 2^160, so both get PBKDF2-SHA256 at cryptsetup's minimum (1000
// iterations), which keeps the unlock at boot and the install quick on
// small nodes (argon2id's 64 MiB and 4 passes took some 10 s of the
// install in the emulated VM test).
var (
	tpmKeyKDF      = luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}
	recoveryKeyKDF = luks2.KDF{Type: luks2.KDFPBKDF2, Iterations: 1000}
)

// NewRecoveryKey returns a random recovery key of 160 bits, as an
// administrator types it into cryptsetup: five groups of eight hex digits.
func NewRecoveryKey() (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	h := hex.EncodeToString(b)
	groups := make([]string, 0, 5)
	for i := 0; i < len(h); i += 8 {
		groups = append(groups, h[i:i+8])
	}
	return strings.Join(groups, "-"), nil
}

// newVolumeUUID returns a random (version 4) UUID for a LUKS2 volume.
func newVolumeUUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// ext4Size returns the size in bytes of the ext2/3/4 file system at the
// start of r, or an error when there is none.
func ext4Size(r io.ReaderAt) (int64, error) {
	sb := make([]byte, 1024)
	if _, err := r.ReadAt(sb, 1024); err != nil {
		return 0, fmt.Errorf("read the superblock: %w", err)
	}
	if binary.LittleEndian.Uint16(sb[56:]) != 0xEF53 {
		return 0, errors.New("it holds no ext2/3/4 file system (only those are encrypted in place)")
	}
	blocks := int64(binary.LittleEndian.Uint32(sb[4:]))
	const incompat64bit = 0x80
	if binary.LittleEndian.Uint32(sb[96:])&incompat64bit != 0 {
		blocks |= int64(binary.LittleEndian.Uint32(sb[0x150:])) << 32
	}
	logBlock := binary.LittleEndian.Uint32(sb[24:])
	if logBlock > 6 {
		return 0, fmt.Errorf("superblock: block size 2^%d KiB", logBlock)
	}
	return blocks << (10 + logBlock), nil
}

// installMapping is the device-mapper name of the root while the micro-OS
// encrypts it or writes into it.
const installMapping = "eim-install"

// RootPreflight is an Executor that can tell, before the Provisioner
// escrows a recovery key for an encrypt-root action, that the action would
// be refused anyway. Machine is one.
type RootPreflight interface {
	CheckEncryptRoot(ctx context.Context, e *provisioningv1.EncryptRoot) error
}

var _ RootPreflight = (*Machine)(nil)

// CheckEncryptRoot refuses an encrypt-root action whose partition is
// encrypted already (the action run again: a retry, or a reboot in its
// middle). It runs before the recovery key is escrowed: a new key escrowed
// for a volume it does not open would replace, in EIM, the one that does,
// and the disk's real recovery key would be lost.
func (m *Machine) CheckEncryptRoot(ctx context.Context, e *provisioningv1.EncryptRoot) error {
	dev, err := m.device(e.GetDevice())
	if err != nil {
		return err
	}
	part, err := m.partition(dev, e.GetPartition())
	if err != nil {
		return err
	}
	f, err := os.Open(part)
	if err != nil {
		return fmt.Errorf("encrypt root: %w", err)
	}
	defer f.Close()
	if _, err := luks2.ReadHeader(f); err == nil {
		return errEncryptedAlready(part)
	}
	return nil
}

func errEncryptedAlready(part string) error {
	return fmt.Errorf("encrypt root: %s is encrypted already (an earlier run of this action): no new recovery key escrowed, the one EIM keeps still opens it; reprovision the instance to write its image again", part)
}

// encryptRoot runs an encrypt-root action: it checks everything it can
// before it writes (the TPM, the file system leaving room for the header,
// the recovery key escrowed), seals the TPM's key, formats the partition
// and writes the file system back through the mapping.
func (m *Machine) encryptRoot(ctx context.Context, e *provisioningv1.EncryptRoot, out io.Writer) error {
	if e.GetRecoveryKey() == "" || e.GetVolumeUuid() == "" {
		return errors.New("encrypt root: no recovery key escrowed (the agent escrows one with EIM before it encrypts)")
	}
	pcrs := make([]int, 0, len(e.GetPcrs()))
	for _, p := range e.GetPcrs() {
		pcrs = append(pcrs, int(p))
	}
	if len(pcrs) == 0 {
		pcrs = tpmseal.DefaultPCRs
	}
	tpm, err := m.openTPM()
	if err != nil {
		return fmt.Errorf("encrypt root: %w: the disk key cannot be sealed, so the disk is not encrypted", err)
	}
	defer tpm.Close()
	dev, err := m.device(e.GetDevice())
	if err != nil {
		return err
	}
	part, err := m.partition(dev, e.GetPartition())
	if err != nil {
		return err
	}
	f, err := os.OpenFile(part, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("encrypt root: %w", err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("encrypt root: size of %s: %w", part, err)
	}
	if _, err := luks2.ReadHeader(f); err == nil {
		return errEncryptedAlready(part)
	}
	fsSize, err := ext4Size(f)
	if err != nil {
		return fmt.Errorf("encrypt root: %s: %w", part, err)
	}
	if room := size - luks2.DataOffset; fsSize > room {
		return fmt.Errorf("encrypt root: the file system on %s takes %d bytes of its %d: the OS image must leave %d bytes (16 MiB) free at the end of its root partition for the LUKS2 header",
			part, fsSize, size, luks2.DataOffset)
	}
	fmt.Fprintf(out, "encrypting %s (%d bytes of file system in a %d-byte partition) with LUKS2, volume %s\n", part, fsSize, size, e.GetVolumeUuid())

	// The head of the file system, where the header goes; the rest moves
	// up by the header's size through the mapping, from the end down, so
	// nothing is overwritten before it is read.
	head := make([]byte, min(fsSize, luks2.DataOffset))
	if _, err := f.ReadAt(head, 0); err != nil {
		return fmt.Errorf("encrypt root: read %s: %w", part, err)
	}
	vk, err := formatRoot(f, size, tpm, pcrs, e)
	if err != nil {
		return err
	}
	defer clear(vk)
	if err := f.Sync(); err != nil {
		return fmt.Errorf("encrypt root: %w", err)
	}
	fmt.Fprintf(out, "LUKS2 header written: keyslot 0 sealed to the TPM (PCR %s, token %s), keyslot 1 the escrowed recovery key\n", joinInts(pcrs), TPMTokenType)
	mapped, err := luks2.Activate(installMapping, part, vk)
	if err != nil {
		return fmt.Errorf("encrypt root: %w", err)
	}
	werr := moveUp(ctx, f, mapped, head, fsSize)
	if err := errors.Join(werr, luks2.Deactivate(installMapping)); err != nil {
		return fmt.Errorf("encrypt root: %w", err)
	}
	// The way the installed OS will open it: unseal, unlock.
	key, err := unsealKey(tpm, f)
	if err != nil {
		return fmt.Errorf("encrypt root: the TPM does not unseal the key it just sealed: %w", err)
	}
	got, err := luks2.Unlock(f, key)
	clear(key)
	if err != nil || !bytes.Equal(got, vk) {
		return fmt.Errorf("encrypt root: the unsealed key does not open the volume: %v", err)
	}
	clear(got)
	fmt.Fprintf(out, "encrypted %d bytes; the key the TPM unseals opens the volume\n", fsSize)
	return nil
}

// formatRoot writes the LUKS2 header of the encrypted root on dev (size
// bytes) and returns its volume key: keyslot 0 opened by a new key sealed
// to the TPM under pcrs, as systemd-cryptenroll seals it (its passphrase
// the secret's base64, the sealed object in keyslot 0's systemd-tpm2
// token), keyslot 1 by the escrowed recovery key. The key is sealed before
// anything is written: a TPM that cannot seal leaves the disk as the image
// wrote it.
func formatRoot(dev luks2.Device, size int64, tpm io.ReadWriter, pcrs []int, e *provisioningv1.EncryptRoot) ([]byte, error) {
	pass, sealed, err := systemdtpm2.NewKey(tpm, pcrs)
	if err != nil {
		return nil, fmt.Errorf("encrypt root: seal the disk key to the TPM (PCR %s): %w", joinInts(pcrs), err)
	}
	defer clear(pass)
	vk, err := luks2.NewVolumeKey()
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]byte, error) {
		clear(vk)
		return nil, fmt.Errorf("encrypt root: %w", err)
	}
	if _, err := luks2.Format(dev, size, pass, luks2.Options{KDF: tpmKeyKDF, VolumeKey: vk, Label: e.GetLabel(), UUID: e.GetVolumeUuid()}); err != nil {
		return fail(err)
	}
	slot, err := luks2.AddKeyVolumeKey(dev, vk, []byte(e.GetRecoveryKey()), recoveryKeyKDF)
	if err != nil {
		return fail(fmt.Errorf("recovery keyslot: %w", err))
	}
	if slot != 1 {
		return fail(fmt.Errorf("recovery keyslot: got keyslot %d, want 1", slot))
	}
	if _, err := systemdtpm2.AddToken(dev, 0, sealed); err != nil {
		return fail(err)
	}
	return vk, nil
}

// moveUp writes the file system (head, then what follows it on raw) into
// the mapping, from the end down, until ctx ends (the action's timeout).
func moveUp(ctx context.Context, raw *os.File, mapped string, head []byte, fsSize int64) error {
	mf, err := os.OpenFile(mapped, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer mf.Close()
	const chunk = 4 << 20
	buf := make([]byte, chunk)
	for end := fsSize; end > int64(len(head)); {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := max(end-chunk, int64(len(head)))
		b := buf[:end-start]
		if _, err := raw.ReadAt(b, start); err != nil {
			return fmt.Errorf("read at %d: %w", start, err)
		}
		if _, err := mf.WriteAt(b, start); err != nil {
			return fmt.Errorf("write at %d: %w", start, err)
		}
		end = start
	}
	if _, err := mf.WriteAt(head, 0); err != nil {
		return fmt.Errorf("write at 0: %w", err)
	}
	return mf.Sync()
}

// unsealKey returns the key of the volume's TPM keyslot, unsealed with the
// TPM: from its systemd-tpm2 token (the passphrase systemd-cryptsetup
// would present), or, on a volume installed before EIM wrote those, from
// its eim-tpm2 token.
func unsealKey(tpm io.ReadWriter, dev io.ReaderAt) ([]byte, error) {
	h, err := luks2.ReadHeader(dev)
	if err != nil {
		return nil, err
	}
	key, err := systemdtpm2.Unlock(tpm, h)
	if !errors.Is(err, systemdtpm2.ErrNoToken) {
		return key, err
	}
	tok, ok := h.Token(LegacyTPMTokenType)
	if !ok || len(tok.Data) == 0 {
		return nil, fmt.Errorf("the volume has neither a %s nor an %s token holding its TPM-sealed key", TPMTokenType, LegacyTPMTokenType)
	}
	return tpmseal.UnsealV1(tpm, tok.Data)
}

// UnlockRoot opens the encrypted root on dev (a LUKS2 volume encrypt-root
// made) with the key its TPM unseals, and maps it as /dev/mapper/name,
// whose path it returns. An error says why it cannot, and what to do.
func UnlockRoot(dev, name string) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", fmt.Errorf("unlock %s: %w", dev, err)
	}
	defer f.Close()
	tpm, err := tpmseal.Open()
	if err != nil {
		return "", fmt.Errorf("unlock %s: %w: its key is sealed to the TPM; open it with the recovery key (eim instance recovery-key)", dev, err)
	}
	key, err := unsealKey(tpm, f)
	tpm.Close()
	if err != nil {
		hint := ""
		if errors.Is(err, tpmseal.ErrPolicy) {
			hint = " (the Secure Boot state or keys changed since the install)"
		}
		return "", fmt.Errorf("unlock %s: the TPM does not unseal its key%s: %w; open it with the recovery key (eim instance recovery-key), or reprovision", dev, hint, err)
	}
	vk, err := luks2.Unlock(f, key)
	clear(key)
	if err != nil {
		return "", fmt.Errorf("unlock %s: %w", dev, err)
	}
	mapped, err := luks2.Activate(name, dev, vk)
	clear(vk)
	if err != nil {
		return "", fmt.Errorf("unlock %s: %w", dev, err)
	}
	return mapped, nil
}

// IsLUKS2 reports whether dev holds a LUKS2 volume.
func IsLUKS2(dev string) bool {
	f, err := os.Open(dev)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = luks2.ReadHeader(f)
	return err == nil
}

func (m *Machine) openTPM() (io.ReadWriteCloser, error) {
	if m.OpenTPM != nil {
		return m.OpenTPM()
	}
	return tpmseal.Open()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
