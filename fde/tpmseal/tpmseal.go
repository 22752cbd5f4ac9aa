// Package tpmseal seals a secret (a disk's LUKS2 key) to the node's TPM 2.0
// so that only this TPM, with the same PCR values (by default PCR 7, the
// Secure Boot state: the SecureBoot variable, PK, KEK, db, dbx and the
// certificate that verified the boot code), can unseal it. Pure Go over
// github.com/google/go-tpm's tpm2 API, for the micro-OS and the installed
// test OS (no cgo, no tpm2-tools).
//
// It seals the way systemd-cryptenroll does (systemd 252, Debian bookworm's;
// later systemd still unseals what 252 sealed), so that systemd-cryptsetup,
// and so any systemd-based initramfs, unseals the same secret: a sealed data
// object (keyed hash, no user auth, policy TPM2_PolicyPCR over SHA-256 PCRs)
// under a primary key of the owner hierarchy made from systemd 252's
// template: ECC NIST P-256, AES-128-CFB, restricted decryption, no unique
// value, empty auth — or, on a TPM that cannot make it, the same template
// with RSA 2048. The same key comes back every time from the TPM's seed, so
// nothing is stored in the TPM (no persistent handle, no NV). The blob is
// the object's TPM2B_PRIVATE then its TPM2B_PUBLIC, marshalled, as
// systemd's token keeps it. The secret goes to the TPM and back in sessions
// salted with the primary key and encrypted with AES-128, not in the clear
// on the bus.
//
// The object differs from systemd's in one attribute: it is noDA, so that
// failed unseals (a changed PCR) never count towards the TPM's dictionary
// attack lockout; systemd loads it all the same (it reads the object's
// public area from the blob).
//
// The API:
//
//	Open() (io.ReadWriteCloser, error)        // /dev/tpmrm0, else /dev/tpm0; ErrNoTPM
//	Seal(tpm io.ReadWriter, secret []byte, pcrs []int) (*Sealed, error)
//	Unseal(tpm io.ReadWriter, s *Sealed) ([]byte, error)
//	UnsealV1(tpm io.ReadWriter, blob []byte) ([]byte, error) // EIM's own blob of before (v1.go)
//
// A Sealed (blob, PCRs, PCR bank, policy hash, primary key algorithm) is
// not secret: only this TPM can load it. Errors to branch on (errors.Is):
// ErrNoTPM, ErrPolicy (a *PolicyError names the PCRs), ErrOtherTPM (another
// TPM's blob, or this TPM was cleared), ErrBadBlob.
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

// PolicyError is an unseal refused because PCRs the secret is sealed to no
// longer hold their values. errors.Is(err, ErrPolicy) holds.
type PolicyError struct {
	PCRs    []int // the PCRs of the policy
	Changed []int // those known to differ from the sealing's (nil: one of PCRs, which is not known)
}

func (e *PolicyError) Error() string {
	if len(e.Changed) == 0 {
		if len(e.PCRs) == 0 {
			return ErrPolicy.Error() + " (PCR 7 changed?)"
		}
		return ErrPolicy.Error() + ": one of PCR " + joinInts(e.PCRs) + " changed since the secret was sealed" + pcr7Note(e.PCRs)
	}
	return ErrPolicy.Error() + ": PCR " + joinInts(e.Changed) + " changed since the secret was sealed" + pcr7Note(e.Changed)
}

func pcr7Note(pcrs []int) string {
	for _, p := range pcrs {
		if p == 7 {
			return " (PCR 7: the Secure Boot state or its keys changed)"
		}
	}
	return ""
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

// Sealed is a secret sealed to a TPM as systemd-cryptenroll seals it; its
// fields are those of systemd's systemd-tpm2 LUKS2 token. Not secret.
type Sealed struct {
	// Blob is the sealed object: its TPM2B_PRIVATE, then its TPM2B_PUBLIC
	// (systemd's tpm2-blob).
	Blob []byte
	// PCRs are the PCRs of the policy, ascending (tpm2-pcrs).
	PCRs []int
	// Bank is their hash, "sha256" or "sha1" (tpm2-pcr-bank). Seal uses
	// SHA-256 only; Unseal reads SHA-1 too, which systemd-cryptenroll
	// chooses on a TPM whose SHA-256 PCRs the firmware does not extend.
	Bank string
	// PrimaryAlg is the algorithm of systemd's primary key template the
	// object is sealed under, "ecc" or "rsa" (tpm2-primary-alg).
	PrimaryAlg string
	// PolicyHash is the object's policy digest (tpm2-policy-hash).
	PolicyHash []byte
}

// Seal seals secret (1 to 128 bytes) to the TPM and the current values of
// its SHA-256 PCRs pcrs (nil: DefaultPCRs), under systemd 252's ECC primary
// key, or its RSA one when the TPM cannot make the ECC key (as systemd
// does).
func Seal(rw io.ReadWriter, secret []byte, pcrs []int) (*Sealed, error) {
	return seal(rw, secret, pcrs, []string{"ecc", "rsa"})
}

func seal(rw io.ReadWriter, secret []byte, pcrs []int, algs []string) (*Sealed, error) {
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
	values, err := readPCRs(tpm, tpm2.TPMAlgSHA256, pcrs)
	if err != nil {
		return nil, err
	}
	var (
		primary *primaryKey
		alg     string
		errs    []error
	)
	for _, alg = range algs {
		primary, err = createPrimary(tpm, systemdPrimary[alg])
		if err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", alg, err))
	}
	if primary == nil {
		return nil, fmt.Errorf("tpmseal: create the primary key: %w", errors.Join(errs...))
	}
	defer primary.flush(tpm)

	policy := policyDigest(tpm2.TPMAlgSHA256, pcrs, values)
	create, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{
			Handle: primary.handle, Name: primary.name,
			Auth: tpm2.HMAC(tpm2.TPMAlgSHA256, 16, tpm2.Salted(primary.handle, primary.pub), tpm2.AESEncryption(128, tpm2.EncryptIn)),
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
			AuthPolicy:       tpm2.TPM2BDigest{Buffer: policy},
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgKeyedHash, &tpm2.TPMSKeyedHashParms{
				Scheme: tpm2.TPMTKeyedHashScheme{Scheme: tpm2.TPMAlgNull},
			}),
		}),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the sealed object: %w", err)
	}
	blob := append(tpm2.Marshal(create.OutPrivate), tpm2.Marshal(create.OutPublic)...)
	return &Sealed{Blob: blob, PCRs: pcrs, Bank: "sha256", PrimaryAlg: alg, PolicyHash: policy}, nil
}

// Unseal returns the secret s holds, if this TPM sealed it and the PCRs it
// is sealed to hold the values they had then.
func Unseal(rw io.ReadWriter, s *Sealed) ([]byte, error) {
	o, err := s.parse()
	if err != nil {
		return nil, err
	}
	tpm := newTransport(rw)
	primary, err := createPrimary(tpm, o.template)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the primary key (%s): %w", s.PrimaryAlg, err)
	}
	defer primary.flush(tpm)
	secret, err := unsealUnder(tpm, primary, o.priv, o.pub, o.bank, s.PCRs)
	var pe *PolicyError
	if errors.As(err, &pe) && len(s.PCRs) == 1 {
		// One PCR: that one changed. (Of several, the policy hash alone
		// does not say which.)
		pe.Changed = s.PCRs
	}
	return secret, err
}

// sealedObject is a Sealed taken apart and checked.
type sealedObject struct {
	priv     tpm2.TPM2BPrivate
	pub      tpm2.TPM2BPublic
	bank     tpm2.TPMIAlgHash
	template tpm2.TPMTPublic
}

func (s *Sealed) parse() (*sealedObject, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: none", ErrBadBlob)
	}
	o := &sealedObject{}
	switch s.Bank {
	case "sha256", "":
		// No bank: systemd before 250 wrote none and meant SHA-256.
		o.bank = tpm2.TPMAlgSHA256
	case "sha1":
		o.bank = tpm2.TPMAlgSHA1
	default:
		return nil, fmt.Errorf("%w: PCR bank %q (want sha256 or sha1)", ErrBadBlob, s.Bank)
	}
	alg := s.PrimaryAlg
	if alg == "" {
		alg = "ecc" // systemd before 250: ECC only
	}
	t, ok := systemdPrimary[alg]
	if !ok {
		return nil, fmt.Errorf("%w: primary key algorithm %q (want ecc or rsa)", ErrBadBlob, s.PrimaryAlg)
	}
	o.template = t
	if len(s.PCRs) == 0 {
		return nil, fmt.Errorf("%w: no PCR in the policy (EIM unseals only secrets bound to PCRs)", ErrBadBlob)
	}
	if _, err := checkPCRs(s.PCRs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBlob, err)
	}
	priv, pub, err := splitBlob(s.Blob)
	if err != nil {
		return nil, err
	}
	pp, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](priv)
	if err != nil {
		return nil, fmt.Errorf("%w: private part: %v", ErrBadBlob, err)
	}
	pu, err := tpm2.Unmarshal[tpm2.TPM2BPublic](pub)
	if err != nil {
		return nil, fmt.Errorf("%w: public part: %v", ErrBadBlob, err)
	}
	area, err := pu.Contents()
	if err != nil {
		return nil, fmt.Errorf("%w: public part: %v", ErrBadBlob, err)
	}
	if area.Type != tpm2.TPMAlgKeyedHash {
		return nil, fmt.Errorf("%w: the object is of type 0x%04x, not a sealed data object (keyed hash)", ErrBadBlob, uint16(area.Type))
	}
	if len(s.PolicyHash) > 0 && !bytes.Equal(area.AuthPolicy.Buffer, s.PolicyHash) {
		return nil, fmt.Errorf("%w: the policy hash %x is not the sealed object's policy %x", ErrBadBlob, s.PolicyHash, area.AuthPolicy.Buffer)
	}
	o.priv, o.pub = *pp, *pu
	return o, nil
}

// splitBlob cuts systemd's blob into its TPM2B_PRIVATE and TPM2B_PUBLIC,
// each with its size.
func splitBlob(b []byte) (priv, pub []byte, err error) {
	var parts [2][]byte
	for i, name := range []string{"private", "public"} {
		if len(b) < 2 {
			return nil, nil, fmt.Errorf("%w: cut short before the %s part", ErrBadBlob, name)
		}
		n := int(binary.BigEndian.Uint16(b))
		if n == 0 || len(b) < 2+n {
			return nil, nil, fmt.Errorf("%w: %s part of %d bytes cut short or empty", ErrBadBlob, name, n)
		}
		parts[i], b = b[:2+n], b[2+n:]
	}
	if len(b) != 0 {
		// Later systemd appends the seed of an object it made outside the
		// TPM (sealed to a TPM it was not running on); 252 never does.
		return nil, nil, fmt.Errorf("%w: %d bytes after the public part (an imported object of a later systemd?)", ErrBadBlob, len(b))
	}
	return parts[0], parts[1], nil
}

// unsealUnder loads the sealed object under primary and unseals it in a
// policy session of PolicyPCR(bank, pcrs).
func unsealUnder(tpm transport.TPM, primary *primaryKey, priv tpm2.TPM2BPrivate, pub tpm2.TPM2BPublic, bank tpm2.TPMIAlgHash, pcrs []int) ([]byte, error) {
	load, err := tpm2.Load{
		ParentHandle: tpm2.AuthHandle{Handle: primary.handle, Name: primary.name, Auth: tpm2.PasswordAuth(nil)},
		InPrivate:    priv,
		InPublic:     pub,
	}.Execute(tpm)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCIntegrity) {
			return nil, ErrOtherTPM
		}
		return nil, fmt.Errorf("tpmseal: load the sealed object: %w", err)
	}
	defer flush(tpm, load.ObjectHandle)

	sess, closeSess, err := tpm2.PolicySession(tpm, tpm2.TPMAlgSHA256, 16,
		tpm2.Salted(primary.handle, primary.pub), tpm2.AESEncryption(128, tpm2.EncryptOut))
	if err != nil {
		return nil, fmt.Errorf("tpmseal: policy session: %w", err)
	}
	defer func() { _ = closeSess() }()
	if _, err := (tpm2.PolicyPCR{PolicySession: sess.Handle(), Pcrs: selection(bank, pcrs)}).Execute(tpm); err != nil {
		return nil, fmt.Errorf("tpmseal: PolicyPCR: %w", err)
	}
	out, err := tpm2.Unseal{ItemHandle: tpm2.AuthHandle{Handle: load.ObjectHandle, Name: load.Name, Auth: sess}}.Execute(tpm)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCPolicyFail) {
			return nil, &PolicyError{PCRs: pcrs}
		}
		return nil, fmt.Errorf("tpmseal: unseal: %w", err)
	}
	return out.OutData.Buffer, nil
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

// selection is pcrs of bank, in a 3-byte (24-PCR) bitmap as systemd and
// the PC Client profile have it: the policy digest covers its bytes.
func selection(bank tpm2.TPMIAlgHash, pcrs []int) tpm2.TPMLPCRSelection {
	u := make([]uint, len(pcrs))
	for i, p := range pcrs {
		u[i] = uint(p)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash: bank, PCRSelect: tpm2.PCClientCompatible.PCRs(u...),
	}}}
}

// readPCRs reads the values of pcrs in bank, in order.
func readPCRs(tpm transport.TPM, bank tpm2.TPMIAlgHash, pcrs []int) ([][]byte, error) {
	size := sha256.Size
	if bank == tpm2.TPMAlgSHA1 {
		size = 20
	}
	out := make([][]byte, len(pcrs))
	for i, p := range pcrs {
		r, err := tpm2.PCRRead{PCRSelectionIn: selection(bank, []int{p})}.Execute(tpm)
		if err != nil {
			return nil, fmt.Errorf("tpmseal: read PCR %d: %w", p, err)
		}
		if len(r.PCRValues.Digests) != 1 || len(r.PCRValues.Digests[0].Buffer) != size {
			return nil, fmt.Errorf("tpmseal: read PCR %d: the TPM has no such PCR bank (0x%04x)", p, uint16(bank))
		}
		out[i] = r.PCRValues.Digests[0].Buffer
	}
	return out, nil
}

// policyDigest is the SHA-256 policy of TPM2_PolicyPCR(bank, pcrs) with
// the PCRs holding values, from an empty policy: H(0…0 || TPM_CC_PolicyPCR
// || pcrs || H(values…)) (TPM 2.0 Part 3, 23.7), H the session's hash.
func policyDigest(bank tpm2.TPMIAlgHash, pcrs []int, values [][]byte) []byte {
	pd := sha256.New()
	for _, v := range values {
		pd.Write(v)
	}
	h := sha256.New()
	h.Write(make([]byte, sha256.Size))
	_ = binary.Write(h, binary.BigEndian, uint32(tpm2.TPMCCPolicyPCR))
	h.Write(tpm2.Marshal(selection(bank, pcrs)))
	h.Write(pd.Sum(nil))
	return h.Sum(nil)
}

// systemdPrimary are the templates of the primary keys systemd 252 seals
// under (its tpm2_make_primary; later systemd calls them its "legacy"
// templates and still makes them to unseal 252's tokens): owner
// hierarchy, restricted decryption keys with AES-128-CFB, scheme and KDF
// null, no unique value (so not the TCG SRK template: no noDA, no zeroed
// unique), empty auth and policy.
var systemdPrimary = map[string]tpm2.TPMTPublic{
	"ecc": {
		Type:             tpm2.TPMAlgECC,
		NameAlg:          tpm2.TPMAlgSHA256,
		ObjectAttributes: primaryAttributes,
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
			Symmetric: aes128CFB,
			Scheme:    tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgNull},
			CurveID:   tpm2.TPMECCNistP256,
			KDF:       tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{}),
	},
	"rsa": {
		Type:             tpm2.TPMAlgRSA,
		NameAlg:          tpm2.TPMAlgSHA256,
		ObjectAttributes: primaryAttributes,
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Symmetric: aes128CFB,
			Scheme:    tpm2.TPMTRSAScheme{Scheme: tpm2.TPMAlgNull},
			KeyBits:   2048,
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{}),
	},
}

var (
	primaryAttributes = tpm2.TPMAObject{
		Restricted: true, Decrypt: true, FixedTPM: true, FixedParent: true,
		SensitiveDataOrigin: true, UserWithAuth: true,
	}
	aes128CFB = tpm2.TPMTSymDefObject{
		Algorithm: tpm2.TPMAlgAES,
		KeyBits:   tpm2.NewTPMUSymKeyBits(tpm2.TPMAlgAES, tpm2.TPMKeyBits(128)),
		Mode:      tpm2.NewTPMUSymMode(tpm2.TPMAlgAES, tpm2.TPMAlgCFB),
	}
)

type primaryKey struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
	pub    tpm2.TPMTPublic
}

// createPrimary makes the owner hierarchy's primary key of template: the
// same key for the same seed, every time.
func createPrimary(tpm transport.TPM, template tpm2.TPMTPublic) (*primaryKey, error) {
	r, err := tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(template),
	}.Execute(tpm)
	if err != nil {
		return nil, err
	}
	pub, err := r.OutPublic.Contents()
	if err != nil {
		flush(tpm, r.ObjectHandle)
		return nil, fmt.Errorf("the primary key's public area: %w", err)
	}
	return &primaryKey{handle: r.ObjectHandle, name: r.Name, pub: *pub}, nil
}

func (k *primaryKey) flush(tpm transport.TPM) { flush(tpm, k.handle) }

func flush(tpm transport.TPM, h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tpm)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
