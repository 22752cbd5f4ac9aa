// Package ipmisim runs the test BMC of EIM's IPMI tests: OpenIPMI's
// ipmi_sim (Debian's openipmi), a real IPMI 2.0 BMC implementation, on
// 127.0.0.1 and a free UDP port, optionally driving a QEMU process as its
// chassis (startcmd: power on starts it, off ends it, a cycle replaces
// it). Used by oob/ipmi's tests and cmd/eim's end-to-end test of power
// jobs; tests skip without ipmi_sim and ipmitool unless EIM_REQUIRE_IPMI
// is set.
package ipmisim

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim/oob/ipmi"
)

// The test BMC: OpenIPMI's ipmi_sim (Debian's openipmi), a real IPMI 2.0
// BMC implementation, on 127.0.0.1 and a free UDP port.

const (
	User     = "admin"
	Password = "Eim-ipmi-pw1"
)

// Require finds ipmi_sim and ipmitool, or skips (fails with
// EIM_REQUIRE_IPMI).
func Require(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("EIM_REQUIRE_IPMI") != "" {
				t.Fatalf("%s not installed and EIM_REQUIRE_IPMI is set", bin)
			}
			t.Skipf("%s not installed (Debian: openipmi ipmitool)", bin)
		}
	}
}

// Config chooses how the simulated chassis is controlled.
type Config struct {
	// chassisControl: power and boot controls go to a script that records
	// them (lan.conf's chassis_control); ipmi_sim needs it for bootdev.
	ChassisControl bool
	// ChassisScript, with ChassisControl, is the caller's chassis_control
	// program instead of the recording one (cmd/eim's VM test drives a
	// QEMU VM with one). ipmi_sim runs it as "<script> 0x20 get|set
	// <parameter> [<value>]": parameters power (0, 1), reset (1), boot
	// (none, pxe, default, cdrom, bios…) and shutdown (1, the soft off);
	// a get prints "<parameter>:<value>".
	ChassisScript string
	// startcmd: the command ipmi_sim runs for power on and kills for off
	// (used without chassisControl, which would take the power controls).
	StartCmd string
}

// Sim is a running ipmi_sim.
type Sim struct {
	Dir  string
	Port int
}

// controlScript is the chassis_control program: ipmi_sim runs it as
// "<script> 0x20 get|set <parameter> [<value>]"; a get prints
// "<parameter>:<value>". It records every set in actions.
const controlScript = `#!/bin/sh
d=$(dirname "$0")
case "$2" in
get)
	case "$3" in
	power) echo "power:$(cat "$d/power" 2>/dev/null || echo 0)" ;;
	boot) echo "boot:$(cat "$d/boot" 2>/dev/null || echo default)" ;;
	*) exit 1 ;;
	esac ;;
set)
	echo "$3 $4" >>"$d/actions"
	case "$3" in
	power) echo "$4" >"$d/power" ;;
	boot) echo "$4" >"$d/boot" ;;
	esac ;;
*) exit 1 ;;
esac
`

// emuCommands makes the BMC itself: one management controller at 0x20.
const emuCommands = `mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
`

// Start writes lan.conf, the emu file and the control script to a
// temporary directory, starts ipmi_sim and waits until it answers.
func Start(t *testing.T, cfg Config) *Sim {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	s := &Sim{Dir: dir, Port: FreeUDPPort(t)}

	var conf strings.Builder
	fmt.Fprintf(&conf, "name \"eimtest\"\nset_working_mc 0x20\n")
	fmt.Fprintf(&conf, "  startlan 1\n    addr 127.0.0.1 %d\n    priv_limit admin\n", s.Port)
	for _, p := range []string{"callback", "user", "operator", "admin"} {
		fmt.Fprintf(&conf, "    allowed_auths_%s md5\n", p)
	}
	fmt.Fprintf(&conf, "    guid a123456789abcdefa123456789abcdef\n  endlan\n")
	if cfg.ChassisControl {
		script := cfg.ChassisScript
		if script == "" {
			script = filepath.Join(dir, "chassis.sh")
			if err := os.WriteFile(script, []byte(controlScript), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&conf, "  chassis_control \"%s 0x20\"\n", script)
	}
	if cfg.StartCmd != "" {
		// ipmi_sim manages a startcmd only with a VM serial interface
		// configured; nothing need connect to it.
		fmt.Fprintf(&conf, "  serial 15 127.0.0.1 %d codec VM\n", FreeTCPPort(t))
		fmt.Fprintf(&conf, "  startcmd \"%s\"\n  startnow false\n  poweroff_wait 1\n  kill_wait 5\n", cfg.StartCmd)
	}
	fmt.Fprintf(&conf, "  user 2 true \"%s\" \"%s\" admin 10 md5\n", User, Password)
	lanConf := filepath.Join(dir, "lan.conf")
	emu := filepath.Join(dir, "eimtest.emu")
	state := filepath.Join(dir, "state")
	for name, text := range map[string]string{lanConf: conf.String(), emu: emuCommands} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ipmi_sim", "-c", lanConf, "-f", emu, "-s", state, "-n")
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group: the VMs its startcmd runs go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start ipmi_sim: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		out.Close()
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("ipmi_sim output:\n%s", log)
		}
	})

	bmc := s.BMC(t, ipmi.NewDriver(""), Password, 5*time.Second)
	Eventually(t, 20*time.Second, "ipmi_sim answers", func() error {
		_, err := bmc.PowerState(context.Background())
		return err
	})
	return s
}

// BMC is an ipmi.BMC of the simulator.
func (s *Sim) BMC(t *testing.T, d *ipmi.Driver, password string, timeout time.Duration) *ipmi.BMC {
	t.Helper()
	b, err := d.BMC(ipmi.Config{Host: "127.0.0.1", Port: s.Port, Username: User, Password: password, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Actions is what the chassis control script recorded ("power 1", "reset
// 1", "boot pxe" …).
func (s *Sim) Actions(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(s.Dir, "actions"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(data)), " ", "_"))
}

// FreeUDPPort returns a UDP port nothing listens on at the moment.
func FreeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// FreeTCPPort returns a TCP port nothing listens on at the moment.
func FreeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually polls cond until it returns nil, failing with its last error
// after d.
func Eventually(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
