package ipmi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/oob/ipmi"
)

// recordingIpmitool writes a wrapper of the real ipmitool that logs when
// each run starts and ends, and its arguments, to dir/calls.
func recordingIpmitool(t *testing.T) (path, calls string) {
	t.Helper()
	real, err := exec.LookPath("ipmitool")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	path = filepath.Join(dir, "ipmitool")
	script := fmt.Sprintf("#!/bin/sh\necho \"start $$ $*\" >>%[1]s\n%[2]s \"$@\"\nrc=$?\necho \"end $$\" >>%[1]s\nexit $rc\n", calls, real)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, calls
}

// TestSerialisedPerAddress: concurrent calls to one BMC address, through
// two *BMC values of one driver, run one ipmitool at a time; and the
// password is never on ipmitool's command line.
func TestSerialisedPerAddress(t *testing.T) {
	s := startSim(t, simConfig{ChassisControl: true})
	path, calls := recordingIpmitool(t)
	d := ipmi.NewDriver(path)
	bmcs := []*ipmi.BMC{s.bmc(t, d, simPassword, 20*time.Second), s.bmc(t, d, simPassword, 20*time.Second)}

	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := bmcs[i%2].PowerState(context.Background()); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("PowerState: %v", err)
	}

	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 12 {
		t.Fatalf("got %d lines, want 12 (6 runs):\n%s", len(lines), data)
	}
	for i, l := range lines {
		want := "start "
		if i%2 == 1 {
			want = "end "
		}
		if !strings.HasPrefix(l, want) {
			t.Fatalf("line %d: got %q, want %q… (runs overlapped):\n%s", i, l, want, data)
		}
		if strings.Contains(l, simPassword) {
			t.Fatalf("line %d: the password is on the command line: %q", i, l)
		}
		if i%2 == 0 && !strings.Contains(l, " -E ") {
			t.Fatalf("line %d: %q, want -E (password from the environment)", i, l)
		}
	}
}
