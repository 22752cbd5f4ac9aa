package ipmi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/oob/ipmi"
)

// TestPowerAndBoot drives ipmi_sim's chassis through every power action and
// a one-time PXE boot, checking what its chassis control script was asked.
func TestPowerAndBoot(t *testing.T) {
	s := startSim(t, simConfig{ChassisControl: true})
	bmc := s.bmc(t, ipmi.NewDriver(""), simPassword, 10*time.Second)
	ctx := context.Background()

	state := func(want ipmi.PowerState) {
		t.Helper()
		got, err := bmc.PowerState(ctx)
		if err != nil {
			t.Fatalf("PowerState: %v", err)
		}
		if got != want {
			t.Fatalf("PowerState: got %v, want %v", got, want)
		}
	}
	// recorded waits for the script to have recorded want (ipmi_sim runs
	// the power-on of a cycle after an interval).
	recorded := func(want ...string) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("actions %v", want), func() error {
			if got := s.actions(t); !slices.Equal(got, want) {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
	}
	power := func(a ipmi.Action) {
		t.Helper()
		if err := bmc.Power(ctx, a); err != nil {
			t.Fatalf("Power(%s): %v", a, err)
		}
	}

	state(ipmi.Off)
	power(ipmi.PowerOn)
	recorded("power_1")
	state(ipmi.On)

	if err := bmc.SetBootDevice(ctx, ipmi.BootPXE, true, false); err != nil {
		t.Fatalf("SetBootDevice(pxe, once): %v", err)
	}
	recorded("power_1", "boot_pxe")
	boot, err := bmc.BootDevice(ctx)
	if err != nil {
		t.Fatalf("BootDevice: %v", err)
	}
	if boot.Device != ipmi.BootPXE || !boot.Once {
		t.Fatalf("BootDevice: got %v, want pxe once", boot)
	}

	power(ipmi.PowerReset)
	recorded("power_1", "boot_pxe", "reset_1")
	power(ipmi.PowerCycle)
	recorded("power_1", "boot_pxe", "reset_1", "power_0", "power_1")
	state(ipmi.On)
	power(ipmi.PowerSoft)
	recorded("power_1", "boot_pxe", "reset_1", "power_0", "power_1", "shutdown_1")
	power(ipmi.PowerOff)
	recorded("power_1", "boot_pxe", "reset_1", "power_0", "power_1", "shutdown_1", "power_0")
	state(ipmi.Off)

	// The other devices, as ipmi_sim names them to its script (a disk is
	// its "default"), each read back.
	for _, c := range []struct {
		dev    ipmi.BootDevice
		script string
	}{{ipmi.BootCDROM, "boot_cdrom"}, {ipmi.BootBIOS, "boot_bios"}, {ipmi.BootDisk, "boot_default"}} {
		if err := bmc.SetBootDevice(ctx, c.dev, true, true); err != nil {
			t.Fatalf("SetBootDevice(%s): %v", c.dev, err)
		}
		if got := s.actions(t); got[len(got)-1] != c.script {
			t.Fatalf("SetBootDevice(%s): script got %v, want %s last", c.dev, got, c.script)
		}
		boot, err := bmc.BootDevice(ctx)
		if err != nil {
			t.Fatalf("BootDevice: %v", err)
		}
		if boot.Device != c.dev {
			t.Fatalf("BootDevice after %s: got %v", c.dev, boot)
		}
	}
	// No override, which the typed interface does not set.
	if err := ipmi.RunForTest(ctx, bmc, "chassis", "bootdev", "none"); err != nil {
		t.Fatalf("bootdev none: %v", err)
	}
	if boot, err := bmc.BootDevice(ctx); err != nil || boot.Device != ipmi.BootNone {
		t.Fatalf("BootDevice after none: got %v, %v, want none", boot, err)
	}
}

// TestUnsupported: a command the BMC refuses as unknown or out of its range
// is the typed unsupported error.
func TestUnsupported(t *testing.T) {
	s := startSim(t, simConfig{ChassisControl: true})
	d := ipmi.NewDriver("")
	bmc := s.bmc(t, d, simPassword, 10*time.Second)
	// ipmi_sim has no front-panel diagnostic interrupt: ipmitool's
	// "power diag" is answered "Invalid data field in request".
	err := bmc.Power(context.Background(), ipmi.Action("diag"))
	if err == nil || errors.Is(err, ipmi.ErrUnsupported) {
		t.Fatalf("Power(diag): got %v, want a refusal before running ipmitool", err)
	}
	err = ipmi.RunForTest(context.Background(), bmc, "power", "diag")
	if !errors.Is(err, ipmi.ErrUnsupported) {
		t.Fatalf("power diag: got %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "Invalid data field in request") {
		t.Fatalf("power diag: got %q, want ipmitool's reason in it", err)
	}
}

// TestBadCredentials: a wrong password and an unknown user are the typed
// bad-credentials error, whose message does not hold the password.
func TestBadCredentials(t *testing.T) {
	s := startSim(t, simConfig{ChassisControl: true})
	d := ipmi.NewDriver("")
	const wrong = "Not-the-pw-42"
	for _, c := range []struct {
		name, user, password string
	}{
		{"wrong password", simUser, wrong},
		{"unknown user", "nobody", simPassword},
	} {
		t.Run(c.name, func(t *testing.T) {
			bmc, err := d.BMC(ipmi.Config{Host: "127.0.0.1", Port: s.Port, Username: c.user, Password: c.password, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			_, err = bmc.PowerState(context.Background())
			if !errors.Is(err, ipmi.ErrBadCredentials) {
				t.Fatalf("got %v, want ErrBadCredentials", err)
			}
			if errors.Is(err, ipmi.ErrUnreachable) {
				t.Fatalf("got %v, also unreachable", err)
			}
			if msg := err.Error(); strings.Contains(msg, c.password) || !strings.Contains(msg, "RAKP") {
				t.Fatalf("message %q: want ipmitool's RAKP line and no password", msg)
			}
		})
	}
}

// TestUnreachable: nothing listening on the port is the typed unreachable
// error, within the timeout (ipmitool alone would retry for 20 s).
func TestUnreachable(t *testing.T) {
	requireIPMI(t)
	port := freeUDPPort(t)
	bmc, err := ipmi.NewDriver("").BMC(ipmi.Config{Host: "127.0.0.1", Port: port, Username: simUser, Password: simPassword, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = bmc.PowerState(context.Background())
	took := time.Since(start)
	if !errors.Is(err, ipmi.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	// Bounded by the timeout, with room for a loaded machine; not a speed
	// measurement.
	if took > 10*time.Second {
		t.Fatalf("took %s, want it cut at the 2s timeout", took)
	}
	if strings.Contains(err.Error(), simPassword) {
		t.Fatalf("message %q holds the password", err)
	}

	// The caller's cancellation is reported as such, not as the BMC's
	// silence.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = bmc.PowerState(ctx)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ipmi.ErrUnreachable) {
		t.Fatalf("cancelled: got %v, want context.Canceled, not unreachable", err)
	}
}
