// Package swtpmtest starts a software TPM 2.0 (Debian's swtpm) for tests
// of code that talks to a node's TPM: sealing disk keys (fde/tpmseal) and
// quoting measured boots (attest/tpmquote).
package swtpmtest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// TPM is a running swtpm with its state in a directory, reached over a
// Unix socket (Conn): the same directory gives the same TPM (its seeds)
// after a restart, with its PCRs reset.
type TPM struct {
	Conn net.Conn
	cmd  *exec.Cmd
}

// Start starts swtpm on state directory dir (empty: a new TPM, with new
// seeds), stopped at the test's end. It skips the test without swtpm,
// unless EIM_REQUIRE_SECUREBOOT is set (as .ci/run sets it, after
// installing it).
func Start(t testing.TB, dir string) *TPM {
	t.Helper()
	if _, err := exec.LookPath("swtpm"); err != nil {
		if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
			t.Fatal("swtpm not installed and EIM_REQUIRE_SECUREBOOT is set")
		}
		t.Skip("swtpm not installed (Debian's swtpm)")
	}
	sock := filepath.Join(dir, "s")
	_ = os.Remove(sock)
	cmd := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+dir,
		"--server", "type=unixio,path="+sock, "--flags", "not-need-init,startup-clear")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &TPM{cmd: cmd}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			s.Conn = c
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not listen on %s in 20 s: %v\n%s", sock, err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling for the socket, with the deadline above
	}
}

// Stop stops swtpm (again: nothing).
func (s *TPM) Stop() {
	if s.Conn != nil {
		s.Conn.Close()
	}
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Extend extends the TPM's SHA-256 PCR pcr with digest, as firmware
// measures what it runs.
func (s *TPM) Extend(t testing.TB, pcr int, digest []byte) {
	t.Helper()
	_, err := tpm2.PCRExtend{
		PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: digest}}},
	}.Execute(transport.FromReadWriter(s.Conn))
	if err != nil {
		t.Fatalf("extend PCR %d: %v", pcr, err)
	}
}

// PCRs reads the TPM's SHA-256 values of pcrs, as a node reports them.
func (s *TPM) PCRs(t testing.TB, pcrs []int) map[int][]byte {
	t.Helper()
	out := map[int][]byte{}
	for _, p := range pcrs {
		r, err := tpm2.PCRRead{PCRSelectionIn: tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{
			{Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(uint(p))},
		}}}.Execute(transport.FromReadWriter(s.Conn))
		if err != nil {
			t.Fatalf("read PCR %d: %v", p, err)
		}
		out[p] = r.PCRValues.Digests[0].Buffer
	}
	return out
}
