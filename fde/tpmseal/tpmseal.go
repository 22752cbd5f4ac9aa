// Package tpmseal seals a secret (a disk's LUKS2 key) to the node's TPM 2.0
// so that only this TPM, with the same PCR values (by default PCR 7, the
// Secure Boot state: the SecureBoot variable, PK, KEK, db, dbx and the
// certificate that verified the boot code), can unseal it. Pure Go over
// github.com/google/go-tpm's tpm2 API, for the micro-OS and the installed
// test OS (no cgo, no tpm2-tools).
//
// The secret is a sealed data object (keyed hash, no user auth, policy
// PolicyPCR over SHA-256 PCRs) under the storage primary key of the owner
// hierarchy made from the TCG's ECC P-256 SRK template: the same key every
// time from the TPM's seed, so nothing is stored in the TPM (no persistent
// handle, no NV). The secret goes to the TPM and back in sessions salted
// with that key and encrypted with AES-128, not in the clear on the bus.
//
// The API:
//
//	Open() (io.ReadWriteCloser, error)        // /dev/tpmrm0, else /dev/tpm0; ErrNoTPM
//	Seal(tpm io.ReadWriter, secret []byte, pcrs []int) (blob []byte, err error)
//	Unseal(tpm io.ReadWriter, blob []byte) ([]byte, error)
//	BlobPCRs(blob []byte) ([]int, error)       // the PCRs a blob is sealed to
//
// The blob (public and private parts of the sealed object and the PCR
// values at sealing) is not secret: only this TPM can load it. Errors to
// branch on (errors.Is): ErrNoTPM, ErrPolicy (a *PolicyError names the PCRs
// that changed), ErrOtherTPM (another TPM's blob, or this TPM was cleared),
// ErrBadBlob.
package tpmseal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"golang.org/x/sys/unix"
)

// DefaultPCRs is what Seal seals to without a list: PCR 7, the Secure Boot
// state.
var DefaultPCRs = []int{7}

// MaxSecret is the most a sealed data object holds (MAX_SYM_DATA).
const MaxSecret = 128

// Errors callers branch on.
var (
	ErrNoTPM    = errors.New("tpmseal: no TPM 2.0 on this node (neither /dev/tpmrm0 nor /dev/tpm0)")
	ErrPolicy   = errors.New("tpmseal: PCR policy does not match")
	ErrOtherTPM = errors.New("tpmseal: the blob was sealed by another TPM, or this TPM was cleared since")
	ErrBadBlob  = errors.New("tpmseal: not a sealed blob")
)

// PolicyError is an unseal refused because PCRs the blob is sealed to no
// longer hold their values. errors.Is(err, ErrPolicy) holds.
type PolicyError struct {
	Changed []int // the PCRs whose value differs from the sealing's
}

func (e *PolicyError) Error() string {
	if len(e.Changed) == 0 {
		return ErrPolicy.Error() + " (PCR 7 changed?)"
	}
	s := make([]string, len(e.Changed))
	for i, p := range e.Changed {
		s[i] = strconv.Itoa(p)
	}
	msg := ErrPolicy.Error() + ": PCR " + strings.Join(s, ", ") + " changed since the secret was sealed"
	for _, p := range e.Changed {
		if p == 7 {
			msg += " (PCR 7: the Secure Boot state or its keys changed)"
		}
	}
	return msg
}

func (e *PolicyError) Is(target error) bool { return target == ErrPolicy }

// Open opens the node's TPM: the kernel's resource manager /dev/tpmrm0, or
// /dev/tpm0. The file is in blocking mode: the kernel then runs a command
// in its write, and the read returns the answer. (os.OpenFile would make
// it non-blocking, for Go's poller: the write returns at once and a read
// before the TPM has answered returns nothing. Seal and Unseal wait for
// the answer on such a file too.)
func Open() (io.ReadWriteCloser, error) {
	for _, p := range []string{"/dev/tpmrm0", "/dev/tpm0"} {
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err == nil {
			return os.NewFile(uintptr(fd), p), nil
		}
		if !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENXIO) {
			return nil, fmt.Errorf("tpmseal: open %s: %w", p, err)
		}
	}
	return nil, ErrNoTPM
}

// Seal seals secret (1 to 128 bytes) to the TPM and the current values of
// its SHA-256 PCRs pcrs (nil: DefaultPCRs), and returns the blob Unseal
// takes.
func Seal(rw io.ReadWriter, secret []byte, pcrs []int) ([]byte, error) {
	if len(secret) == 0 || len(secret) > MaxSecret {
		return nil, fmt.Errorf("tpmseal: secret: %d bytes, want 1 to %d", len(secret), MaxSecret)
	}
	if pcrs == nil {
		pcrs = DefaultPCRs
	}
	pcrs, err := checkPCRs(pcrs)
	if err != nil {
		return nil, err
	}
	tpm := newTransport(rw)
	values, err := readPCRs(tpm, pcrs)
	if err != nil {
		return nil, err
	}
	srk, err := createSRK(tpm)
	if err != nil {
		return nil, err
	}
	defer srk.flush(tpm)

	create, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{
			Handle: srk.handle, Name: srk.name,
			Auth: tpm2.HMAC(tpm2.TPMAlgSHA256, 16, tpm2.Salted(srk.handle, srk.pub), tpm2.AESEncryption(128, tpm2.EncryptIn)),
		},
		InSensitive: tpm2.TPM2BSensitiveCreate{Sensitive: &tpm2.TPMSSensitiveCreate{
			Data: tpm2.NewTPMUSensitiveCreate(&tpm2.TPM2BSensitiveData{Buffer: secret}),
		}},
		InPublic: tpm2.New2B(tpm2.TPMTPublic{
			Type:    tpm2.TPMAlgKeyedHash,
			NameAlg: tpm2.TPMAlgSHA256,
			// No user auth: only the policy opens it. NoDA: a wrong PCR is
			// not a guessed password, and must not lock the TPM out.
			ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, NoDA: true},
			AuthPolicy:       tpm2.TPM2BDigest{Buffer: policyDigest(pcrs, values)},
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgKeyedHash, &tpm2.TPMSKeyedHashParms{
				Scheme: tpm2.TPMTKeyedHashScheme{Scheme: tpm2.TPMAlgNull},
			}),
		}),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the sealed object: %w", err)
	}
	return encodeBlob(pcrs, values, tpm2.Marshal(create.OutPublic), tpm2.Marshal(create.OutPrivate)), nil
}

// Unseal returns the secret sealed in blob, if this TPM sealed it and the
// PCRs it is sealed to hold the values they had then.
func Unseal(rw io.ReadWriter, blob []byte) ([]byte, error) {
	b, err := decodeBlob(blob)
	if err != nil {
		return nil, err
	}
	pub, err := tpm2.Unmarshal[tpm2.TPM2BPublic](b.pub)
	if err != nil {
		return nil, fmt.Errorf("%w: public part: %v", ErrBadBlob, err)
	}
	priv, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](b.priv)
	if err != nil {
		return nil, fmt.Errorf("%w: private part: %v", ErrBadBlob, err)
	}
	tpm := newTransport(rw)
	srk, err := createSRK(tpm)
	if err != nil {
		return nil, err
	}
	defer srk.flush(tpm)

	load, err := tpm2.Load{
		ParentHandle: tpm2.AuthHandle{Handle: srk.handle, Name: srk.name, Auth: tpm2.PasswordAuth(nil)},
		InPrivate:    *priv,
		InPublic:     *pub,
	}.Execute(tpm)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCIntegrity) {
			return nil, ErrOtherTPM
		}
		return nil, fmt.Errorf("tpmseal: load the sealed object: %w", err)
	}
	defer flush(tpm, load.ObjectHandle)

	sess, closeSess, err := tpm2.PolicySession(tpm, tpm2.TPMAlgSHA256, 16,
		tpm2.Salted(srk.handle, srk.pub), tpm2.AESEncryption(128, tpm2.EncryptOut))
	if err != nil {
		return nil, fmt.Errorf("tpmseal: policy session: %w", err)
	}
	defer func() { _ = closeSess() }()
	if _, err := (tpm2.PolicyPCR{PolicySession: sess.Handle(), Pcrs: selection(b.pcrs)}).Execute(tpm); err != nil {
		return nil, fmt.Errorf("tpmseal: PolicyPCR: %w", err)
	}
	out, err := tpm2.Unseal{ItemHandle: tpm2.AuthHandle{Handle: load.ObjectHandle, Name: load.Name, Auth: sess}}.Execute(tpm)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCPolicyFail) {
			return nil, changedPCRs(tpm, b)
		}
		return nil, fmt.Errorf("tpmseal: unseal: %w", err)
	}
	return out.OutData.Buffer, nil
}

// BlobPCRs returns the PCRs blob is sealed to.
func BlobPCRs(blob []byte) ([]int, error) {
	b, err := decodeBlob(blob)
	if err != nil {
		return nil, err
	}
	return b.pcrs, nil
}

// changedPCRs is the policy error of b, naming the PCRs whose value now
// differs from the sealing's.
func changedPCRs(tpm transport.TPM, b *blob) error {
	e := &PolicyError{}
	now, err := readPCRs(tpm, b.pcrs)
	if err != nil {
		return e
	}
	for i, p := range b.pcrs {
		if !bytes.Equal(now[i], b.values[i]) {
			e.Changed = append(e.Changed, p)
		}
	}
	return e
}

func checkPCRs(pcrs []int) ([]int, error) {
	if len(pcrs) == 0 {
		return nil, errors.New("tpmseal: pcrs: empty (a secret sealed to no PCR opens on any boot)")
	}
	out := append([]int(nil), pcrs...)
	sort.Ints(out)
	for i, p := range out {
		if p < 0 || p > 23 {
			return nil, fmt.Errorf("tpmseal: pcrs: %d is not a PCR (0 to 23)", p)
		}
		if i > 0 && out[i-1] == p {
			return nil, fmt.Errorf("tpmseal: pcrs: %d twice", p)
		}
	}
	return out, nil
}

func selection(pcrs []int) tpm2.TPMLPCRSelection {
	u := make([]uint, len(pcrs))
	for i, p := range pcrs {
		u[i] = uint(p)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(u...),
	}}}
}

// readPCRs reads the SHA-256 values of pcrs, in order.
func readPCRs(tpm transport.TPM, pcrs []int) ([][]byte, error) {
	out := make([][]byte, len(pcrs))
	for i, p := range pcrs {
		r, err := tpm2.PCRRead{PCRSelectionIn: selection([]int{p})}.Execute(tpm)
		if err != nil {
			return nil, fmt.Errorf("tpmseal: read PCR %d: %w", p, err)
		}
		if len(r.PCRValues.Digests) != 1 || len(r.PCRValues.Digests[0].Buffer) != sha256.Size {
			return nil, fmt.Errorf("tpmseal: read PCR %d: the TPM has no SHA-256 bank for it", p)
		}
		out[i] = r.PCRValues.Digests[0].Buffer
	}
	return out, nil
}

// policyDigest is the policy of TPM2_PolicyPCR(pcrs) with the PCRs holding
// values, from an empty policy: H(0…0 || TPM_CC_PolicyPCR || pcrs ||
// H(values…)) (TPM 2.0 Part 3, 23.7).
func policyDigest(pcrs []int, values [][]byte) []byte {
	pd := sha256.New()
	for _, v := range values {
		pd.Write(v)
	}
	h := sha256.New()
	h.Write(make([]byte, sha256.Size))
	_ = binary.Write(h, binary.BigEndian, uint32(tpm2.TPMCCPolicyPCR))
	h.Write(tpm2.Marshal(selection(pcrs)))
	h.Write(pd.Sum(nil))
	return h.Sum(nil)
}

type srk struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
	pub    tpm2.TPMTPublic
}

// createSRK makes the owner hierarchy's storage primary key from the TCG
// ECC P-256 template: the same key for the same seed, every time.
func createSRK(tpm transport.TPM) (*srk, error) {
	r, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(tpm2.ECCSRKTemplate),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the storage key: %w", err)
	}
	pub, err := r.OutPublic.Contents()
	if err != nil {
		flush(tpm, r.ObjectHandle)
		return nil, fmt.Errorf("tpmseal: storage key: %w", err)
	}
	return &srk{handle: r.ObjectHandle, name: r.Name, pub: *pub}, nil
}

func (s *srk) flush(tpm transport.TPM) { flush(tpm, s.handle) }

func flush(tpm transport.TPM, h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tpm)
}
