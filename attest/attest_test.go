package attest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim/attest"
	"github.com/eimhq/eim/attest/attesttest"
	"github.com/eimhq/eim/secureboot/petest"
)

// captured is the boot testdata/ovmf-swtpm holds (README.md there: real
// OVMF with Secure Boot, swtpm, signed iPXE and kernel).
func captured(t testing.TB) (attest.Report, []attest.Artifact) {
	t.Helper()
	dir := filepath.Join("testdata", "ovmf-swtpm")
	rep := attest.Report{PCRs: map[int][]byte{}, EventLog: readFile(t, filepath.Join(dir, "binary_bios_measurements")), SecureBoot: true}
	for _, line := range lines(t, filepath.Join(dir, "pcr-sha256.txt")) {
		i, err := strconv.Atoi(line[0])
		if err != nil {
			t.Fatal(err)
		}
		rep.PCRs[i] = unhex(t, line[1])
	}
	var served []attest.Artifact
	for _, line := range lines(t, filepath.Join(dir, "served.txt")) {
		served = append(served, attest.Artifact{Name: line[0], Digest: unhex(t, line[1])})
	}
	if len(served) != 2 || len(rep.PCRs) != 24 {
		t.Fatalf("testdata: %d served binaries, %d PCRs; want 2 and 24", len(served), len(rep.PCRs))
	}
	return rep, served
}

func lines(t testing.TB, path string) [][]string {
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(readFile(t, path))), "\n") {
		out = append(out, strings.Fields(l))
	}
	return out
}

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCaptured(t *testing.T) {
	rep, served := captured(t)
	l, err := attest.Parse(rep.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	if l.Algs[attest.AlgSHA256] != 32 || l.Algs[attest.AlgSHA1] != 20 {
		t.Errorf("algorithms %v, want SHA-1 (20) and SHA-256 (32) among them", l.Algs)
	}
	// What OVMF measured into PCR 4: iPXE from the disk, then the kernel
	// iPXE loaded (over the network).
	var apps []string
	for _, e := range l.Events {
		if e.PCR == 4 && e.Type == attest.EvEFIBootServicesApp {
			apps = append(apps, hex.EncodeToString(e.Digests[attest.AlgSHA256])+" "+attest.ImageLoadPath(e.Data))
		}
	}
	if len(apps) < 2 || !strings.HasPrefix(apps[0], hex.EncodeToString(served[0].Digest)) || !strings.HasSuffix(apps[0], `\EFI\BOOT\BOOTX64.EFI`) {
		t.Errorf("PCR 4's first application: %q, want %s (ipxe.efi) from \\EFI\\BOOT\\BOOTX64.EFI", apps, served[0].Name)
	}
	if on, found := attest.SecureBootOf(l); !on || !found {
		t.Errorf("SecureBoot measured: %v (found %v), want on", on, found)
	}
}

func TestVerifyCaptured(t *testing.T) {
	rep, served := captured(t)
	if err := attest.Verify(rep, served); err != nil {
		t.Fatalf("got %v, want verified", err)
	}
}

// wantMismatch checks that err is a *Mismatch of the PCR whose reason
// holds each of want.
func wantMismatch(t *testing.T, err error, pcr int, want ...string) {
	t.Helper()
	var m *attest.Mismatch
	if !errors.As(err, &m) || m.PCR != pcr {
		t.Fatalf("got %v, want a mismatch of PCR %d", err, pcr)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("got %q, want it to contain %q", err, w)
		}
	}
}

// A kernel that is not the one EIM serves (changed after signing, or
// another signed kernel): PCR 4 names it.
func TestVerifyOtherKernel(t *testing.T) {
	rep, served := captured(t)
	measured := hex.EncodeToString(served[1].Digest)
	served[1].Digest = bytes.Clone(served[1].Digest)
	served[1].Digest[0] ^= 1
	err := attest.Verify(rep, served)
	wantMismatch(t, err, 4, "PCR 4: unexpected boot code", measured, "/vmlinuz", "ipxe.efi, vmlinuz")
}

func TestVerifyNothingServed(t *testing.T) {
	rep, _ := captured(t)
	wantMismatch(t, attest.Verify(rep, nil), 4, `\EFI\BOOT\BOOTX64.EFI`, "(none)")
}

func TestVerifyPCRValue(t *testing.T) {
	rep, served := captured(t)
	rep.PCRs[7] = make([]byte, 32)
	wantMismatch(t, attest.Verify(rep, served), 7, "PCR 7: the TPM's value 0000")
}

func TestVerifyPCRMissing(t *testing.T) {
	rep, served := captured(t)
	delete(rep.PCRs, 5)
	wantMismatch(t, attest.Verify(rep, served), 5, "not reported")
}

// An event's digest changed in the log (a log that is not this boot's):
// its PCR no longer replays to the TPM's value.
func TestVerifyLogChanged(t *testing.T) {
	rep, served := captured(t)
	l, err := attest.Parse(rep.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Events {
		if e.PCR == 4 && e.Type == attest.EvEFIBootServicesApp {
			// Claim the firmware measured the served kernel where it
			// measured something else: the replay catches it.
			i := bytes.Index(rep.EventLog, e.Digests[attest.AlgSHA256])
			rep.EventLog = bytes.Clone(rep.EventLog)
			rep.EventLog[i] ^= 1
			break
		}
	}
	wantMismatch(t, attest.Verify(rep, served), 4, "is not what the event log replays to")
}

// The SecureBoot variable's data changed in the log (its digest kept):
// not taken for the measured value.
func TestVerifySecureBootData(t *testing.T) {
	rep, served := captured(t)
	l, err := attest.Parse(rep.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Events {
		if e.PCR == 7 && e.Type == attest.EvEFIVariableDriverCfg && bytes.Contains(e.Data, utf16("SecureBoot")) {
			sum := sha256.Sum256(e.Data)
			if !bytes.Equal(sum[:], e.Digests[attest.AlgSHA256]) {
				t.Fatalf("the SecureBoot event's digest is not that of its data")
			}
			i := bytes.Index(rep.EventLog, e.Data)
			rep.EventLog = bytes.Clone(rep.EventLog)
			rep.EventLog[i+len(e.Data)-1] = 0
			break
		}
	}
	wantMismatch(t, attest.Verify(rep, served), 7, "measured no SecureBoot variable")
	// A node that did not claim Secure Boot is not held to it.
	rep.SecureBoot = false
	if err := attest.Verify(rep, served); err != nil {
		t.Errorf("got %v, want verified", err)
	}
}

func utf16(s string) []byte {
	var b []byte
	for _, c := range s {
		b = append(b, byte(c), 0)
	}
	return b
}

func TestParseRefuses(t *testing.T) {
	rep, _ := captured(t)
	for _, c := range []struct {
		name, want string
		log        []byte
	}{
		{"empty", "header event", nil},
		{"TPM 1.2 log", "TPM 1.2", append(make([]byte, 32), rep.EventLog[32:]...)},
		{"truncated", "truncated", rep.EventLog[:len(rep.EventLog)-3]},
		{"PCR out of range", "PCR 200", withFirstEventPCR(rep.EventLog, 200)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := attest.Parse(c.log)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// withFirstEventPCR changes the PCR index of the log's first event after
// the header.
func withFirstEventPCR(log []byte, pcr byte) []byte {
	b := bytes.Clone(log)
	hdrSize := int(b[28]) | int(b[29])<<8 | int(b[30])<<16 | int(b[31])<<24
	b[32+hdrSize] = pcr
	return b
}

func FuzzParse(f *testing.F) {
	f.Add(readFileF(f, filepath.Join("testdata", "ovmf-swtpm", "binary_bios_measurements")))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := attest.Parse(b)
		if err != nil {
			return
		}
		_ = attest.Replay(l, nil)
		_ = attest.CheckBootCode(l, nil)
		attest.SecureBootOf(l)
		for _, e := range l.Events {
			attest.ImageLoadPath(e.Data)
		}
	})
}

func readFileF(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// attesttest's boots are what Verify accepts, and PCR 4 names a binary
// that is not served.
func TestSyntheticBoot(t *testing.T) {
	ipxe, err := attest.ArtifactOf("ipxe.efi", petest.Minimal(1))
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := attest.ArtifactOf("vmlinuz", petest.Minimal(2))
	if err != nil {
		t.Fatal(err)
	}
	b := attesttest.NewBoot(ipxe.Digest, kernel.Digest)
	rep := attest.Report{PCRs: b.PCRs, EventLog: b.EventLog, SecureBoot: true}
	if err := attest.Verify(rep, []attest.Artifact{ipxe, kernel}); err != nil {
		t.Fatalf("got %v, want verified", err)
	}
	wantMismatch(t, attest.Verify(rep, []attest.Artifact{ipxe}), 4, hex.EncodeToString(kernel.Digest), `from \EFI\BOOT\BOOTX64.EFI`, "(ipxe.efi)")
}
