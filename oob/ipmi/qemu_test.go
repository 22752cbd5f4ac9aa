package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/oob/ipmi"
)

// TestQEMU: ipmi_sim's startcmd is a QEMU process (a VM without machine or
// devices, held before its first instruction: no CPU cost), so power on
// starts it, a cycle replaces it and off ends it, as the BMC of a real VM.
func TestQEMU(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed")
	}
	pidfile := filepath.Join(t.TempDir(), "qemu.pid")
	s := startSim(t, simConfig{StartCmd: qemu + " -machine none -S -display none -nodefaults -pidfile " + pidfile})
	bmc := s.bmc(t, ipmi.NewDriver(""), simPassword, 10*time.Second)
	ctx := context.Background()

	// running returns the QEMU process's id, or an error when there is none.
	running := func() (int, error) {
		data, err := os.ReadFile(pidfile)
		if err != nil {
			return 0, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return 0, err
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("QEMU %d gone", pid)
		}
		// A zombie is gone too: its parent has not reaped it yet.
		if _, rest, _ := strings.Cut(string(stat), ") "); strings.HasPrefix(rest, "Z") {
			return 0, fmt.Errorf("QEMU %d exited", pid)
		}
		return pid, nil
	}
	state := func(want ipmi.PowerState) {
		t.Helper()
		eventually(t, 15*time.Second, "power "+want.String(), func() error {
			got, err := bmc.PowerState(ctx)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
	}

	state(ipmi.Off)
	if _, err := running(); err == nil {
		t.Fatal("QEMU runs before power on")
	}
	if err := bmc.Power(ctx, ipmi.PowerOn); err != nil {
		t.Fatalf("Power(on): %v", err)
	}
	var first int
	eventually(t, 15*time.Second, "QEMU started", func() (err error) {
		first, err = running()
		return err
	})
	state(ipmi.On)

	if err := bmc.Power(ctx, ipmi.PowerCycle); err != nil {
		t.Fatalf("Power(cycle): %v", err)
	}
	eventually(t, 20*time.Second, "a new QEMU process", func() error {
		pid, err := running()
		if err != nil {
			return err
		}
		if pid == first {
			return errors.New("still the first process")
		}
		return nil
	})
	state(ipmi.On)

	if err := bmc.Power(ctx, ipmi.PowerOff); err != nil {
		t.Fatalf("Power(off): %v", err)
	}
	eventually(t, 15*time.Second, "QEMU stopped", func() error {
		if pid, err := running(); err == nil {
			return fmt.Errorf("QEMU %d still runs", pid)
		}
		return nil
	})
	state(ipmi.Off)
}
