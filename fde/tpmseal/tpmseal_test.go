package tpmseal_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/eimhq/eim/fde/tpmseal"
	"github.com/eimhq/eim/internal/swtpmtest"
)

// anotherDB is what firmware extends PCR 7 with when the Secure Boot
// state changes (here also PCR 8, which the blob is not sealed to).
var anotherDB = func() []byte { d := sha256.Sum256([]byte("another db")); return d[:] }()

func TestSealUnseal(t *testing.T) {
	dir := t.TempDir()
	tpm := swtpmtest.Start(t, dir)
	secret := bytes.Repeat([]byte{0xa5, 0}, 32)
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
			blob, err := tpmseal.Seal(bus, secret, tc.pcrs)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(blob, secret[:16]) {
				t.Fatal("the blob holds the secret in the clear")
			}
			if got, err := tpmseal.BlobPCRs(blob); err != nil || !equal(got, tc.want) {
				t.Fatalf("BlobPCRs: got %v, %v; want %v", got, err, tc.want)
			}
			got, err := tpmseal.Unseal(bus, blob)
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
	// storage key is made again from the seed, the blob opens.
	blob, err := tpmseal.Seal(tpm.Conn, secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	tpm.Stop()
	tpm = swtpmtest.Start(t, dir)
	if got, err := tpmseal.Unseal(tpm.Conn, blob); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Unseal after a restart: got %x, %v; want the secret", got, err)
	}

	// PCR 7 changes (another Secure Boot state): the policy refuses, naming
	// it; a PCR the blob is not sealed to does not matter.
	tpm.Extend(t, 8, anotherDB)
	if _, err := tpmseal.Unseal(tpm.Conn, blob); err != nil {
		t.Fatalf("Unseal after PCR 8 changed: %v", err)
	}
	tpm.Extend(t, 7, anotherDB)
	_, err = tpmseal.Unseal(tpm.Conn, blob)
	var pe *tpmseal.PolicyError
	if !errors.Is(err, tpmseal.ErrPolicy) || !errors.As(err, &pe) || !equal(pe.Changed, []int{7}) {
		t.Fatalf("Unseal after PCR 7 changed: got %v, want ErrPolicy naming PCR 7", err)
	}
	if !strings.Contains(err.Error(), "PCR policy does not match: PCR 7 changed") {
		t.Fatalf("message: got %q", err)
	}

	// Another TPM (other seeds) cannot load the blob.
	other := swtpmtest.Start(t, t.TempDir())
	if _, err := tpmseal.Unseal(other.Conn, blob); !errors.Is(err, tpmseal.ErrOtherTPM) {
		t.Fatalf("Unseal on another TPM: got %v, want ErrOtherTPM", err)
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
	for name, blob := range map[string][]byte{
		"empty":     nil,
		"magic":     append([]byte("XXX\x01"), good[4:]...),
		"cut":       good[:len(good)-1],
		"trailing":  append(append([]byte(nil), good...), 0),
		"pcr order": func() []byte { b := append([]byte(nil), good...); b[5] = 30; return b }(),
	} {
		if _, err := tpmseal.Unseal(tpm.Conn, blob); !errors.Is(err, tpmseal.ErrBadBlob) {
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
		pcrs, err := tpmseal.BlobPCRs(b)
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
