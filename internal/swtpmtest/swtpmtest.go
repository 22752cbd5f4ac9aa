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
