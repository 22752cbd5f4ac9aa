package tpmseal_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2"

	"github.com/eimhq/eim/fde/tpmseal"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// anotherDB is what firmware extends PCR 7 with when the Secure Boot
// state changes (here also PCR 8, which the secret is not sealed to).
var anotherDB = func() []byte { d := sha256.Sum256([]byte("another db")); return d[:] }()

func TestSealUnseal(t *testing.T) {
	dir := t.TempDir()
	tpm := swtpmtest.Start(t, dir)
	secret := bytes.Repeat([]byte{0xa5, 0}, 16)
	for _, tc := range []struct {
		name string
		pcrs []int
		want []int
	}{
		{"default", nil, []int{7}},
		{"several", []int{14, 7, 0}, []int{0, 7, 14}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus := &recorder{rw: tpm.Conn}
			s, err := tpmseal.Seal(bus, secret, tc.pcrs)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(s.PCRs, tc.want) || s.Bank != "sha256" || s.PrimaryAlg != "ecc" || len(s.PolicyHash) != sha256.Size {
				t.Fatalf("sealed: PCRs %v, bank %q, primary %q, policy hash %x; want PCRs %v, sha256, ecc, 32 bytes",
					s.PCRs, s.Bank, s.PrimaryAlg, s.PolicyHash, tc.want)
			}
			if bytes.Contains(s.Blob, secret[:16]) {
				t.Fatal("the blob holds the secret in the clear")
			}
			checkBlobLayout(t, s)
			got, err := tpmseal.Unseal(bus, s)
			if err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("Unseal: got %x, %v; want %x", got, err, secret)
			}
			// The secret crossed the bus encrypted, both ways.
			if bytes.Contains(bus.seen.Bytes(), secret[:16]) {
				t.Fatal("the secret went to or came from the TPM in the clear")
			}
		})
	}

	// The same TPM after a restart (its seeds kept, its PCRs reset): the
	// primary key is made again from the seed, the secret unseals.
	s, err := tpmseal.Seal(tpm.Conn, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	tpm.Stop()
	tpm = swtpmtest.Start(t, dir)
	if got, err := tpmseal.Unseal(tpm.Conn, s); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Unseal after a restart: got %x, %v; want the secret", got, err)
	}

	// PCR 7 changes (another Secure Boot state): the policy refuses, naming
	// it; a PCR the secret is not sealed to does not matter.
	tpm.Extend(t, 8, anotherDB)
	if _, err := tpmseal.Unseal(tpm.Conn, s); err != nil {
		t.Fatalf("Unseal after PCR 8 changed: %v", err)
	}
	several, err := tpmseal.Seal(tpm.Conn, secret, []int{0, 7})
	if err != nil {
		t.Fatal(err)
	}
	tpm.Extend(t, 7, anotherDB)
	_, err = tpmseal.Unseal(tpm.Conn, s)
	var pe *tpmseal.PolicyError
	if !errors.Is(err, tpmseal.ErrPolicy) || !errors.As(err, &pe) || !equal(pe.Changed, []int{7}) {
		t.Fatalf("Unseal after PCR 7 changed: got %v, want ErrPolicy naming PCR 7", err)
	}
	if want := "PCR policy does not match: PCR 7 changed since the secret was sealed (PCR 7: the Secure Boot state"; !strings.Contains(err.Error(), want) {
		t.Fatalf("message: got %q, want it to contain %q", err, want)
	}
	// Of several PCRs, the policy hash does not say which changed.
	_, err = tpmseal.Unseal(tpm.Conn, several)
	if !errors.Is(err, tpmseal.ErrPolicy) || !strings.Contains(err.Error(), "one of PCR 0, 7 changed") {
		t.Fatalf("Unseal of PCRs 0, 7 after PCR 7 changed: got %v, want ErrPolicy naming PCRs 0, 7", err)
	}

	// Another TPM (other seeds) cannot load the blob.
	other := swtpmtest.Start(t, t.TempDir())
	if _, err := tpmseal.Unseal(other.Conn, s); !errors.Is(err, tpmseal.ErrOtherTPM) {
		t.Fatalf("Unseal on another TPM: got %v, want ErrOtherTPM", err)
	}
}

// checkBlobLayout checks the blob is systemd's: TPM2B_PRIVATE, then the
// TPM2B_PUBLIC of a keyed-hash object whose policy is the policy hash.
func checkBlobLayout(t *testing.T, s *tpmseal.Sealed) {
	t.Helper()
	n := int(binary.BigEndian.Uint16(s.Blob))
	if _, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](s.Blob[:2+n]); err != nil {
		t.Fatalf("private part: %v", err)
	}
	pub := s.Blob[2+n:]
	if m := int(binary.BigEndian.Uint16(pub)); len(pub) != 2+m {
		t.Fatalf("public part: %d bytes after the size %d, want exactly it", len(pub)-2, m)
	}
	p, err := tpm2.Unmarshal[tpm2.TPM2BPublic](pub)
	if err != nil {
		t.Fatalf("public part: %v", err)
	}
	area, err := p.Contents()
	if err != nil {
		t.Fatal(err)
	}
	if area.Type != tpm2.TPMAlgKeyedHash || !bytes.Equal(area.AuthPolicy.Buffer, s.PolicyHash) || area.ObjectAttributes.UserWithAuth {
		t.Fatalf("sealed object: type 0x%x, policy %x, userWithAuth %v; want a keyed hash, policy %x, no user auth",
			area.Type, area.AuthPolicy.Buffer, area.ObjectAttributes.UserWithAuth, s.PolicyHash)
	}
}

// The primary keys are systemd 252's templates, byte for byte: a template
// that differs in one bit makes another key, under which systemd's blobs
// do not load (nor EIM's under systemd's).
func TestPrimaryTemplates(t *testing.T) {
	for alg, want := range map[string]string{
		// type ECC, nameAlg SHA-256, attributes fixedTPM|fixedParent|
		// sensitiveDataOrigin|userWithAuth|restricted|decrypt, empty
		// policy, AES-128-CFB, scheme null, NIST P-256, KDF null, empty
		// x and y.
		"ecc": "0023" + "000b" + "00030072" + "0000" + "0006" + "0080" + "0043" + "0010" + "0003" + "0010" + "0000" + "0000",
		// type RSA, …, scheme null, 2048 bits, exponent 0 (65537), empty
		// modulus.
		"rsa": "0001" + "000b" + "00030072" + "0000" + "0006" + "0080" + "0043" + "0010" + "0800" + "00000000" + "0000",
	} {
		if got := hex.EncodeToString(tpm2.Marshal(tpmseal.PrimaryTemplate[alg])); got != want {
			t.Errorf("%s template: got %s, want %s", alg, got, want)
		}
	}
}

// A TPM that cannot make the ECC key gets the secret sealed under the RSA
// one, as systemd does; Unseal makes the key the Sealed names.
func TestSealRSA(t *testing.T) {
	tpm := swtpmtest.Start(t, t.TempDir())
	s, err := tpmseal.SealRSA(tpm.Conn, []byte("secret"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.PrimaryAlg != "rsa" {
		t.Fatalf("primary alg %q, want rsa", s.PrimaryAlg)
	}
	if got, err := tpmseal.Unseal(tpm.Conn, s); err != nil || string(got) != "secret" {
		t.Fatalf("Unseal: got %q, %v", got, err)
	}
	wrong := *s
	wrong.PrimaryAlg = "ecc"
	if _, err := tpmseal.Unseal(tpm.Conn, &wrong); !errors.Is(err, tpmseal.ErrOtherTPM) {
		t.Fatalf("Unseal under the ECC key: got %v, want ErrOtherTPM", err)
	}
}

func TestBadInput(t *testing.T) {
	tpm := swtpmtest.Start(t, t.TempDir())
	for _, tc := range []struct {
		name   string
		secret []byte
		pcrs   []int
		want   string
	}{
		{"empty secret", nil, nil, "secret: 0 bytes"},
		{"long secret", make([]byte, 129), nil, "secret: 129 bytes"},
		{"no PCR", []byte("s"), []int{}, "pcrs: empty"},
		{"PCR 24", []byte("s"), []int{7, 24}, "pcrs: 24 is not a PCR"},
		{"twice", []byte("s"), []int{7, 7}, "pcrs: 7 twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tpmseal.Seal(tpm.Conn, tc.secret, tc.pcrs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	good, err := tpmseal.Seal(tpm.Conn, []byte("s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	with := func(f func(s *tpmseal.Sealed)) *tpmseal.Sealed {
		s := *good
		s.Blob = append([]byte(nil), good.Blob...)
		f(&s)
		return &s
	}
	for _, tc := range []struct {
		name string
		s    *tpmseal.Sealed
		want string
	}{
		{"nil", nil, "none"},
		{"empty blob", with(func(s *tpmseal.Sealed) { s.Blob = nil }), "cut short before the private part"},
		{"cut", with(func(s *tpmseal.Sealed) { s.Blob = s.Blob[:len(s.Blob)-1] }), "public part of"},
		{"trailing", with(func(s *tpmseal.Sealed) { s.Blob = append(s.Blob, 0, 0) }), "2 bytes after the public part"},
		{"bank", with(func(s *tpmseal.Sealed) { s.Bank = "sha384" }), `PCR bank "sha384"`},
		{"primary", with(func(s *tpmseal.Sealed) { s.PrimaryAlg = "dsa" }), `primary key algorithm "dsa"`},
		{"no PCR", with(func(s *tpmseal.Sealed) { s.PCRs = nil }), "no PCR in the policy"},
		{"PCR 24", with(func(s *tpmseal.Sealed) { s.PCRs = []int{24} }), "24 is not a PCR"},
		{"policy hash", with(func(s *tpmseal.Sealed) { s.PolicyHash = make([]byte, 32) }), "is not the sealed object's policy"},
	} {
		_, err := tpmseal.Unseal(tpm.Conn, tc.s)
		if !errors.Is(err, tpmseal.ErrBadBlob) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrBadBlob with %q", tc.name, err, tc.want)
		}
	}
	// No bank and no primary algorithm: systemd before 250 wrote neither
	// and meant SHA-256 and ECC.
	if got, err := tpmseal.Unseal(tpm.Conn, with(func(s *tpmseal.Sealed) { s.Bank, s.PrimaryAlg = "", "" })); err != nil || string(got) != "s" {
		t.Errorf("no bank, no primary algorithm: got %q, %v; want the secret", got, err)
	}
}

// Volumes installed before keep EIM's v1 blob: it still unseals, and a
// changed PCR is named from the values it keeps.
func TestV1(t *testing.T) {
	tpm := swtpmtest.Start(t, t.TempDir())
	secret := []byte("the key of an older install")
	blob, err := tpmseal.SealV1(tpm.Conn, secret, []int{7, 0})
	if err != nil {
		t.Fatal(err)
	}
	if pcrs, err := tpmseal.V1PCRs(blob); err != nil || !equal(pcrs, []int{0, 7}) {
		t.Fatalf("V1PCRs: got %v, %v; want [0 7]", pcrs, err)
	}
	if got, err := tpmseal.UnsealV1(tpm.Conn, blob); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("UnsealV1: got %q, %v; want the secret", got, err)
	}
	// The v1 blob is not systemd's layout, nor the reverse.
	if _, err := tpmseal.Unseal(tpm.Conn, &tpmseal.Sealed{Blob: blob, PCRs: []int{0, 7}}); !errors.Is(err, tpmseal.ErrBadBlob) {
		t.Errorf("Unseal of a v1 blob: got %v, want ErrBadBlob", err)
	}
	tpm.Extend(t, 7, anotherDB)
	_, err = tpmseal.UnsealV1(tpm.Conn, blob)
	var pe *tpmseal.PolicyError
	if !errors.As(err, &pe) || !equal(pe.Changed, []int{7}) {
		t.Fatalf("UnsealV1 after PCR 7 changed: got %v, want ErrPolicy naming PCR 7", err)
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXX\x01"), blob[4:]...),
		"cut":       blob[:len(blob)-1],
		"trailing":  append(append([]byte(nil), blob...), 0),
		"pcr order": func() []byte { b := append([]byte(nil), blob...); b[5] = 30; return b }(),
	} {
		if _, err := tpmseal.UnsealV1(tpm.Conn, b); !errors.Is(err, tpmseal.ErrBadBlob) {
			t.Errorf("%s: got %v, want ErrBadBlob", name, err)
		}
	}
}

// On a machine without a TPM device, Open says so with ErrNoTPM.
func TestOpenNoTPM(t *testing.T) {
	for _, p := range []string{"/dev/tpmrm0", "/dev/tpm0"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("this machine has %s", p)
		}
	}
	if _, err := tpmseal.Open(); !errors.Is(err, tpmseal.ErrNoTPM) {
		t.Fatalf("got %v, want ErrNoTPM", err)
	}
}

// recorder keeps what crosses the bus to the TPM.
type recorder struct {
	rw   net.Conn
	seen bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) { r.seen.Write(p); return r.rw.Write(p) }

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.rw.Read(p)
	r.seen.Write(p[:n])
	return n, err
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Blobs come back from disk: decoding must refuse damage, never panic.
//
//	go test -fuzz FuzzBlob ./fde/tpmseal
func FuzzBlob(f *testing.F) {
	f.Add([]byte("ETS\x01\x01\x07" + strings.Repeat("\x00", 32) + "\x00\x02ab\x00\x01c"))
	f.Add([]byte("ETS\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pcrs, err := tpmseal.V1PCRs(b)
		if err != nil {
			if !errors.Is(err, tpmseal.ErrBadBlob) {
				t.Fatalf("an error other than ErrBadBlob: %v", err)
			}
			return
		}
		for i, p := range pcrs {
			if p < 0 || p > 23 || i > 0 && p <= pcrs[i-1] {
				t.Fatalf("accepted PCRs %v", pcrs)
			}
		}
	})
}

// systemd's blob comes from a LUKS2 token on disk: taking it apart must
// refuse damage with ErrBadBlob, never panic.
//
//	go test -fuzz FuzzSealed ./fde/tpmseal
func FuzzSealed(f *testing.F) {
	f.Add([]byte("\x00\x02ab\x00\x04\x00\x08\x00\x0b"), []byte{})
	f.Add([]byte("\x00\x01"), []byte{1})
	f.Fuzz(func(t *testing.T, blob, policy []byte) {
		err := tpmseal.CheckSealed(&tpmseal.Sealed{Blob: blob, PCRs: []int{7}, Bank: "sha256", PrimaryAlg: "ecc", PolicyHash: policy})
		if err != nil && !errors.Is(err, tpmseal.ErrBadBlob) {
			t.Fatalf("an error other than ErrBadBlob: %v", err)
		}
	})
}
