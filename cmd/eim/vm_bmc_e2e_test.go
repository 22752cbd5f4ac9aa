package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/ipmisim"
	"github.com/eimhq/eim/internal/redfishsim"
	"github.com/eimhq/eim/oob"
)

// TestVMDay0BMC: Day 0 started from EIM through the machine's BMC, on a
// real (virtual) machine that nobody starts by hand. The VM's disk is
// empty and its firmware boots the disk only (-boot order=c): it reaches
// EIM's iPXE script only through the one-time network boot its BMC sets.
//
//   - ipmi: OpenIPMI's ipmi_sim, a real IPMI 2.0 BMC, whose chassis control
//     is a script that starts, resets and stops the VM's QEMU process (a
//     one-time PXE boot is QEMU's -boot once=n). EIM, given the BMC's
//     address and credentials, is asked `eim host provision`: it sets the
//     one-time PXE boot, powers the machine on, sees the node call home,
//     clears the override; the VM goes through Day 0 to RUNNING. Then a
//     reset through the BMC (the installed OS's agent calls home again,
//     booted from the disk: the override was cleared), then power off,
//     seen as OFF.
//   - redfish: the Redfish test BMC (internal/redfishsim) in front of a
//     QEMU VM driven through QMP, reading a one-time override back as
//     "Continuous" (a quirk of real BMCs): Day 0 starts by itself when the
//     BMC is given to a registered host with an instance, and the
//     override is cleared after the call-home.
//   - redfish-reprovision: a Day 0 through the Redfish BMC that fails (the
//     OS image is served broken), then `eim instance reprovision`: the oob
//     module resets the running machine with a one-time PXE boot through
//     the BMC, and attempt 2 runs to RUNNING.
//   - redfish-virtual-media: Day 0 from EIM's micro-OS CD image inserted
//     as the Redfish BMC's virtual media, on a UEFI VM that cannot boot
//     from the network (vm_vmedia_e2e_test.go).
//
// It runs with EIM_VM_TEST=1 (.ci/run's VM step), beside TestVMDay0, and
// also needs Debian's openipmi and ipmitool.
func TestVMDay0BMC(t *testing.T) {
	if os.Getenv("EIM_VM_TEST") == "" {
		t.Skip("boots QEMU VMs: set EIM_VM_TEST=1 (and install what TestVMDay0's comment lists, and openipmi, ipmitool)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "syslinux", "mcopy", "mkfs.fat", "mke2fs", "ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/run installs the VM test's Debian packages)", tool)
		}
	}
	total := time.Now()
	e := startVMEnv(t, "--oob-poll-every", "5s", "--oob-graceful-timeout", "5s", "--oob-call-home-timeout", "5m", "--oob-job-timeout", "5m", mediaURLFlag,
		"--oob-http-boot-url", "http://"+vmHost+":{apiPort}/boot/artifacts/ipxe.efi")
	t.Run("ipmi", func(t *testing.T) { bmcDay0IPMI(t, e, 5) })
	t.Run("redfish", func(t *testing.T) { bmcDay0Redfish(t, e, 6) })
	t.Run("redfish-reprovision", func(t *testing.T) { bmcReprovisionRedfish(t, e, 7) })
	t.Run("redfish-virtual-media", func(t *testing.T) { bmcMediaRedfish(t, e, 8) })
	t.Run("redfish-http", func(t *testing.T) { bmcDay0RedfishHTTP(t, e, 11) })
	t.Logf("BMC VM test total %s", time.Since(total).Round(time.Second))
}

// registerForBMC registers the n-th VM identity's host with an instance
// of the test OS.
func registerForBMC(t *testing.T, e *vmEnv, name string, n int, beforeInstance func(h *eim.Host)) (uuid, serial string, h *eim.Host, in *eim.Instance) {
	t.Helper()
	ctx := context.Background()
	uuid, serial = fmt.Sprintf("4c4c4544-0045-4910-8000-%012d", n), fmt.Sprintf("EIMVM%04d", n)
	h, err := e.s.admin.RegisterHost(ctx, eim.DefaultProject, client.HostRegistration{Name: name, UUID: uuid, SerialNumber: serial, AutoOnboard: true})
	if err != nil {
		t.Fatal(err)
	}
	if beforeInstance != nil {
		beforeInstance(h)
	}
	in = &eim.Instance{}
	if err := e.s.admin.Create(ctx, eim.DefaultProject, eim.KindInstance, &eim.Instance{
		Name: name, Kind: eim.InstanceKindMetal, HostID: h.ResourceID, OSID: e.osID,
	}, in); err != nil {
		t.Fatal(err)
	}
	return uuid, serial, h, in
}

// vmArgs are QEMU's arguments for a BMC's VM: as startVM's, but the
// firmware boots the disk only, unless told otherwise for one boot.
func vmArgs(t *testing.T, bootURL, uuid, serial string) []string {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 256<<20); err != nil {
		t.Fatal(err)
	}
	return []string{
		"-m", "512", "-nographic", "-no-user-config",
		"-smbios", "type=1,serial=" + serial + ",uuid=" + uuid,
		"-drive", "file=" + disk + ",format=raw,if=virtio",
		"-netdev", "user,id=n0,bootfile=" + bootURL,
		"-device", "virtio-net-pci,netdev=n0",
		"-device", "virtio-rng-pci",
	}
}

// waitDay0 waits until the API shows the host onboarded and running and
// its instance RUNNING.
func waitDay0(t *testing.T, e *vmEnv, h *eim.Host, in *eim.Instance, console string, alive func() error) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(8 * time.Minute)
	for {
		var gh eim.Host
		var gi eim.Instance
		if err := e.s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, &gh); err != nil {
			t.Fatal(err)
		}
		if err := e.s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
		if gh.CurrentState == eim.HostStateOnboarded && gh.HostStatus == "Running" && gi.CurrentState == eim.InstanceStateRunning {
			return
		}
		if strings.HasPrefix(gi.ProvisioningStatus, "Provisioning Failed") {
			t.Fatalf("instance %s: %s; serial console in %s", in.ResourceID, gi.ProvisioningStatus, console)
		}
		if err := alive(); err != nil {
			t.Fatalf("%v; serial console in %s", err, console)
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s: %s %q, instance %s: %s %q, not onboarded and RUNNING within 8 minutes; serial console in %s",
				h.ResourceID, gh.CurrentState, gh.HostStatus, in.ResourceID, gi.CurrentState, gi.ProvisioningStatus, console)
		}
		time.Sleep(500 * time.Millisecond) // a poll's pace
	}
}

// waitJob waits until the host's job id has ended and returns it; it
// fails unless it SUCCEEDED.
func waitJob(t *testing.T, e *vmEnv, hostID, id string, within time.Duration) *client.PowerJob {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		list, err := e.s.admin.PowerJobs(context.Background(), eim.DefaultProject, hostID, 20, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range list.Jobs {
			if j.JobID != id || !eim.PowerJobState(j.State).Ended() {
				continue
			}
			if j.State != string(eim.PowerJobSucceeded) {
				t.Fatalf("job %s: %s (%s); steps %+v", id, j.State, j.LastError, j.Steps)
			}
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not end within %s", id, within)
		}
		time.Sleep(500 * time.Millisecond) // a poll's pace
	}
}

// waitPower waits until the host's currentPowerState is want.
func waitPower(t *testing.T, e *vmEnv, hostID string, want eim.PowerState) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var h eim.Host
		if err := e.s.admin.Get(context.Background(), eim.DefaultProject, eim.KindHost, hostID, &h); err != nil {
			t.Fatal(err)
		}
		if h.CurrentPowerState == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s: currentPowerState %s, want %s", hostID, h.CurrentPowerState, want)
		}
		time.Sleep(500 * time.Millisecond) // a poll's pace
	}
}

// checkNetbootJob checks the steps of a network-boot job that succeeded.
func checkNetbootJob(t *testing.T, j *client.PowerJob, power oob.Action) {
	t.Helper()
	var kinds []string
	for _, s := range j.Steps {
		kinds = append(kinds, s.Kind)
		if !s.Done {
			t.Errorf("job %s: step %s not done: %+v", j.JobID, s.Kind, s)
		}
	}
	if got := strings.Join(kinds, ","); got != "SET_BOOT,BOOT_POWER,CALL_HOME,CLEAR_BOOT" {
		t.Fatalf("job %s: steps %s, want a network boot's", j.JobID, got)
	}
	if j.Steps[0].Boot != "PXE" || !j.Steps[0].Once || j.Steps[1].Action != string(power) {
		t.Errorf("job %s: boot %s once %v, power %s; want a one-time PXE boot and %s", j.JobID, j.Steps[0].Boot, j.Steps[0].Once, j.Steps[1].Action, power)
	}
	t.Logf("job %s: %s", j.JobID, j.Steps[2].Note)
}

// chassisScript is ipmi_sim's chassis control for a QEMU VM, by process
// control: power on starts QEMU (a one-time PXE boot when the boot
// parameter says pxe), off and reset stop it (reset then starts it
// again, booting as the boot parameter says), the soft off is only
// recorded (the test OS does not answer ACPI: EIM forces the machine off
// after its graceful timeout). A zombie (nobody reaped the process yet)
// is off.
const chassisScript = `#!/bin/sh
d=$(dirname "$0")
running() {
	pid=$(cat "$d/qemu.pid" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
	state=$(sed 's/.*) //' "/proc/$pid/stat" | cut -c1)
	[ "$state" != Z ]
}
start() {
	boot=order=c
	[ "$(cat "$d/boot" 2>/dev/null)" = pxe ] && boot=once=n,order=c
	echo "start -boot $boot" >>"$d/actions"
	"$d/qemu.sh" -boot "$boot" >>"$d/console.log" 2>&1 </dev/null &
	echo $! >"$d/qemu.pid"
}
stop() {
	if running; then
		kill "$(cat "$d/qemu.pid")"
		while running; do sleep 0.1; done
	fi
	rm -f "$d/qemu.pid"
}
case "$2" in
get)
	case "$3" in
	power) if running; then echo power:1; else echo power:0; fi ;;
	boot) echo "boot:$(cat "$d/boot" 2>/dev/null || echo none)" ;;
	*) exit 1 ;;
	esac ;;
set)
	echo "$3 $4" >>"$d/actions"
	case "$3" in
	power) if [ "$4" = 1 ]; then running || start; else stop; fi ;;
	reset) stop; start ;;
	boot) echo "$4" >"$d/boot" ;;
	esac ;;
*) exit 1 ;;
esac
`

func bmcDay0IPMI(t *testing.T, e *vmEnv, n int) {
	ctx := context.Background()
	name := "bmc-ipmi"
	// The host asks to be off until `eim host provision`: its BMC, given
	// before the instance exists, must not start Day 0 by itself here.
	uuid, serial, h, in := registerForBMC(t, e, name, n, func(h *eim.Host) {
		if err := e.s.admin.Patch(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}, nil); err != nil {
			t.Fatal(err)
		}
	})
	dir := t.TempDir()
	console := filepath.Join(e.logDir, name+".log")
	qemu := "#!/bin/sh\nexec qemu-system-x86_64"
	for _, a := range vmArgs(t, e.bootURL, uuid, serial) {
		qemu += " '" + a + "'"
	}
	qemu += ` "$@"` + "\n"
	for file, text := range map[string]string{"qemu.sh": qemu, "chassis.sh": chassisScript} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(console, filepath.Join(dir, "console.log")); err != nil {
		t.Fatal(err)
	}
	qemuPID := func() (int, error) {
		b, err := os.ReadFile(filepath.Join(dir, "qemu.pid"))
		if err != nil {
			return 0, fmt.Errorf("no QEMU process (%v)", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return 0, err
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("QEMU %d gone", pid)
		}
		if _, rest, _ := strings.Cut(string(stat), ") "); strings.HasPrefix(rest, "Z") {
			return 0, fmt.Errorf("QEMU %d exited", pid)
		}
		return pid, nil
	}
	t.Cleanup(func() {
		if pid, err := qemuPID(); err == nil {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	})
	sim := ipmisim.Start(t, ipmisim.Config{ChassisControl: true, ChassisScript: filepath.Join(dir, "chassis.sh")})
	if _, err := qemuPID(); err == nil {
		t.Fatal("a VM runs before EIM asked the BMC for one")
	}
	pw := ipmisim.Password
	if _, err := e.s.admin.PutBMC(ctx, eim.DefaultProject, h.ResourceID, client.BMCInput{Protocol: "IPMI",
		Address: fmt.Sprintf("127.0.0.1:%d", sim.Port), Username: ipmisim.User, Password: &pw}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out := e.cli.must("host", "provision", h.ResourceID, "-o", "id")
	jobID := strings.TrimSpace(out)
	waitDay0(t, e, h, in, console, func() error {
		if time.Since(start) > 30*time.Second {
			if _, err := qemuPID(); err != nil {
				return fmt.Errorf("the VM is not running: %v", err)
			}
		}
		return nil
	})
	day0 := time.Since(start)
	j := waitJob(t, e, h.ResourceID, jobID, 5*time.Minute)
	checkNetbootJob(t, j, oob.ActionOn)
	actions, _ := os.ReadFile(filepath.Join(dir, "actions"))
	acts := strings.ReplaceAll(strings.TrimSpace(string(actions)), "\n", "; ")
	iPXE, on, none := strings.Index(acts, "boot pxe"), strings.Index(acts, "start -boot once=n"), strings.LastIndex(acts, "boot none")
	if iPXE < 0 || on < iPXE || none < on {
		t.Fatalf("chassis actions %q: want a one-time PXE boot, a start booting from the network, then the override cleared", acts)
	}
	waitPower(t, e, h.ResourceID, eim.PowerStateOn)
	t.Logf("%s: `eim host provision` to instance RUNNING: %s (network-boot job done: %s)", name, day0.Round(100*time.Millisecond), j.Steps[2].Note)

	// A reset through the BMC: the VM starts again from its disk (the
	// override was cleared), and the installed OS's agent calls home again.
	cons := func() string { return string(mustRead(t, console)) }
	at := len(cons())
	pid, _ := qemuPID()
	start = time.Now()
	rj, err := e.s.admin.RequestPower(ctx, eim.DefaultProject, h.ResourceID, client.PowerRequest{DesiredPowerState: eim.PowerStateReset})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, h.ResourceID, rj.JobID, 3*time.Minute)
	// After the reset, in order: the firmware boots the disk (not the
	// network: the override was cleared), the installed OS's agent
	// starts and calls home.
	order := []string{"Booting from Hard Disk", "EIM agent starting as init", "reported in"}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		after, i := cons()[at:], 0
		for _, want := range order {
			if j := strings.Index(after[i:], want); j >= 0 && i >= 0 {
				i += j + len(want)
			} else {
				i = -1
				break
			}
		}
		if i >= 0 {
			if strings.Contains(after, "msg=onboarded") || strings.Contains(after, "Booting from ROM") {
				t.Errorf("after the reset the machine booted from the network (the override was not cleared); console in %s", console)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reset, the console does not show %q in order within 5 minutes; console in %s", order, console)
		}
		time.Sleep(500 * time.Millisecond) // a poll's pace
	}
	if now, err := qemuPID(); err != nil || now == pid {
		t.Fatalf("after the reset: QEMU %d (%v), want a new process (was %d)", now, err, pid)
	}
	acts2, _ := os.ReadFile(filepath.Join(dir, "actions"))
	if !strings.Contains(string(acts2[len(actions):]), "start -boot order=c") {
		t.Errorf("chassis actions after the reset %q: want a start from the disk", acts2[len(actions):])
	}
	waitDay0(t, e, h, in, console, func() error { return nil })
	t.Logf("%s: reset through the BMC to the agent calling home again: %s", name, time.Since(start).Round(100*time.Millisecond))

	// Off: the graceful shutdown the test OS does not answer, then forced.
	start = time.Now()
	oj, err := e.s.admin.RequestPower(ctx, eim.DefaultProject, h.ResourceID, client.PowerRequest{DesiredPowerState: eim.PowerStateOff})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, h.ResourceID, oj.JobID, 3*time.Minute)
	waitPower(t, e, h.ResourceID, eim.PowerStateOff)
	if _, err := qemuPID(); err == nil {
		t.Fatal("the host is OFF but its QEMU process runs")
	}
	t.Logf("%s: power off through the BMC, seen OFF: %s", name, time.Since(start).Round(100*time.Millisecond))
}

// redfishVM is a QEMU VM behind the Redfish test BMC.
type redfishVM struct {
	bmc     *redfishsim.BMC
	q       *redfishsim.QEMU
	srv     *redfishsim.Server
	console string
}

const redfishUser, redfishPassword = "admin", "Eim-redfish-pw1"

// startRedfishVM serves a Redfish BMC whose machine is a QEMU VM (off
// until the BMC switches it on) of the identity, with faults.
// A SeaBIOS VM: its BMC does not list UEFI HTTP boot (the oob module
// boots it by PXE).
func startRedfishVM(t *testing.T, e *vmEnv, name, uuid, serial string, faults redfishsim.Faults) *redfishVM {
	t.Helper()
	return startRedfishMachine(t, e, name, uuid, serial, faults, false)
}

// startRedfishMachine starts a VM behind the Redfish test BMC: SeaBIOS,
// or with uefi OVMF, whose BMC honours a one-time UefiHttp boot with its
// HttpBootUri by writing an HTTP boot option and BootNext into the VM's
// variables before it starts (redfishsim.SetHTTPBootNext).
func startRedfishMachine(t *testing.T, e *vmEnv, name, uuid, serial string, faults redfishsim.Faults, uefi bool) *redfishVM {
	t.Helper()
	console := filepath.Join(e.logDir, name+".log")
	logf, err := os.Create(console)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	cmd := append([]string{"qemu-system-x86_64"}, vmArgs(t, e.bootURL, uuid, serial)...)
	cmd = append(cmd, "-qmp", "unix:"+sock+",server=on,wait=off")
	bootArgs := func(b redfishsim.Boot) []string {
		if b.Target == "Pxe" {
			return []string{"-boot", "once=n,order=c"}
		}
		return []string{"-boot", "order=c"}
	}
	var targets []string
	for _, tg := range redfishsim.BootTargets {
		if tg != "UefiHttp" {
			targets = append(targets, tg)
		}
	}
	if uefi {
		// OVMF without QEMU's boot order (-boot order=…, a fw_cfg
		// bootorder), which it would impose on its boot options, BootNext's
		// among them: the firmware's own order, then the entry
		// provisioning writes.
		// Without iPXE's option ROM on the NIC either: its LoadFile would
		// take the URI boot option's turn and boot by DHCP's bootfile (a
		// PXE boot in all but name); OVMF's own network stack does HTTP boot.
		for i, a := range cmd {
			if a == "virtio-net-pci,netdev=n0" {
				cmd[i] = a + ",romfile="
			}
		}
		var vars string
		fw := uefiFirmware(t).args
		for i := 0; i < len(fw); i++ {
			if fw[i] == "-boot" {
				i++
				continue
			}
			if _, f, ok := strings.Cut(fw[i], "if=pflash,format=raw,unit=1,file="); ok {
				vars = f
			}
			cmd = append(cmd, fw[i])
		}
		bootArgs = func(b redfishsim.Boot) []string {
			if b.Target == "UefiHttp" && b.HTTPBootURI != "" {
				if err := redfishsim.SetHTTPBootNext(vars, b.HTTPBootURI); err != nil {
					t.Errorf("VM %s: HTTP boot of %s not set: %v", name, b.HTTPBootURI, err)
				}
			}
			return nil // BootNext, else the firmware's order
		}
		targets = redfishsim.BootTargets
	}
	q, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{QMP: sock, Command: cmd, Stdout: logf, Stderr: logf, BootArgs: bootArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	bmc, err := redfishsim.New(redfishsim.Config{Username: redfishUser, Password: redfishPassword,
		Systems: []redfishsim.SystemConfig{{Machine: q, UUID: uuid, SerialNumber: serial, BootTargets: targets}}, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redfishsim.Serve(bmc, "127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &redfishVM{bmc: bmc, q: q, srv: srv, console: console}
}

// putBMC gives the host the VM's BMC (its self-signed certificate as the
// CA bundle).
func (v *redfishVM) putBMC(t *testing.T, e *vmEnv, hostID string) {
	t.Helper()
	pass := redfishPassword
	if _, err := e.s.admin.PutBMC(context.Background(), eim.DefaultProject, hostID, client.BMCInput{Protocol: "REDFISH",
		Address: v.srv.URL, Username: redfishUser, Password: &pass, CACert: string(v.srv.CertPEM)}); err != nil {
		t.Fatal(err)
	}
}

// netbootJobs are the host's network-boot jobs, newest first.
func netbootJobs(t *testing.T, e *vmEnv, hostID string) []*client.PowerJob {
	t.Helper()
	list, err := e.s.admin.PowerJobs(context.Background(), eim.DefaultProject, hostID, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []*client.PowerJob
	for _, j := range list.Jobs {
		for _, s := range j.Steps {
			if s.Kind == oob.StepCallHome {
				out = append(out, j)
				break
			}
		}
	}
	return out
}

func bmcDay0Redfish(t *testing.T, e *vmEnv, n int) {
	ctx := context.Background()
	name := "bmc-redfish"
	uuid, serial, h, in := registerForBMC(t, e, name, n, nil)
	vm := startRedfishVM(t, e, name, uuid, serial, redfishsim.Faults{OnceAsContinuous: true})
	bmc, q, console := vm.bmc, vm.q, vm.console

	// Day 0 starts by itself: the host is registered, has an instance and
	// asks to be on (as new hosts do); the BMC is all that was missing.
	start := time.Now()
	vm.putBMC(t, e, h.ResourceID)
	waitDay0(t, e, h, in, console, func() error { return nil })
	day0 := time.Since(start)
	list, err := e.s.admin.PowerJobs(ctx, eim.DefaultProject, h.ResourceID, 20, 0)
	if err != nil {
		t.Fatal(err)
	}
	var jobID string
	for _, j := range list.Jobs {
		if len(j.Steps) > 0 && j.Steps[0].Kind == eim.PowerStepSetBoot {
			jobID = j.JobID
		}
	}
	if jobID == "" || list.TotalElements != 1 {
		t.Fatalf("jobs %+v: want one network-boot job, started by itself", list.Jobs)
	}
	j := waitJob(t, e, h.ResourceID, jobID, 5*time.Minute)
	checkNetbootJob(t, j, oob.ActionOn)
	if !strings.Contains(j.Steps[0].Note, "Continuous") {
		t.Errorf("SET_BOOT note %q: want the BMC's Once read back as Continuous noted", j.Steps[0].Note)
	}
	if target, enabled, _, _ := bmc.BootOverride("1"); target != "None" && enabled != "Disabled" {
		t.Errorf("the BMC's override after the job: %s %s, want cleared", target, enabled)
	}
	boots := q.Boots()
	if len(boots) == 0 || boots[0].Boot.Target != "Pxe" {
		t.Errorf("the VM's boots %+v: want the first from the network", boots)
	}
	t.Logf("%s: the BMC given to the host to instance RUNNING (Day 0 by itself): %s", name, day0.Round(100*time.Millisecond))

	start = time.Now()
	oj, err := e.s.admin.RequestPower(ctx, eim.DefaultProject, h.ResourceID, client.PowerRequest{DesiredPowerState: eim.PowerStateOff})
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, e, h.ResourceID, oj.JobID, 3*time.Minute)
	waitPower(t, e, h.ResourceID, eim.PowerStateOff)
	t.Logf("%s: power off through the BMC, seen OFF: %s", name, time.Since(start).Round(100*time.Millisecond))
}

// bmcDay0RedfishHTTP: Day 0 through a Redfish BMC by UEFI HTTP boot. An
// OVMF VM whose BMC lists UefiHttp; the server runs with
// --oob-http-boot-url naming EIM's iPXE EFI binary (/boot/artifacts/
// ipxe.efi). The host asks to be off until its BMC's capabilities are
// read, then `eim host provision`: the network-boot job sets a one-time
// UefiHttp boot with that URI, the firmware fetches iPXE over HTTP, iPXE
// chains EIM's script (the DHCP bootfile of QEMU's network), and the
// micro-OS provisions the instance to RUNNING.
func bmcDay0RedfishHTTP(t *testing.T, e *vmEnv, n int) {
	ctx := context.Background()
	name := "bmc-redfish-http"
	var vm *redfishVM
	_, _, h, in := registerForBMC(t, e, name, n, func(h *eim.Host) {
		if err := e.s.admin.Patch(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}, nil); err != nil {
			t.Fatal(err)
		}
		vm = startRedfishMachine(t, e, name, h.UUID, h.SerialNumber, redfishsim.Faults{}, true)
		vm.putBMC(t, e, h.ResourceID)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			b, err := e.s.admin.GetBMC(ctx, eim.DefaultProject, h.ResourceID)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(b.Capabilities.BootTargets, string(oob.BootHTTP)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the BMC's capabilities %+v: HTTP boot not listed within 2 minutes", b.Capabilities)
			}
			time.Sleep(500 * time.Millisecond) // the poll's pace
		}
	})
	start := time.Now()
	jobID := strings.TrimSpace(e.cli.must("host", "provision", h.ResourceID, "-o", "id"))
	waitDay0(t, e, h, in, vm.console, func() error { return nil })
	day0 := time.Since(start)
	j := waitJob(t, e, h.ResourceID, jobID, 5*time.Minute)
	if j.Steps[0].Boot != string(oob.BootHTTP) || !j.Steps[0].Once || j.Steps[1].Action != string(oob.ActionOn) {
		t.Errorf("job %s: boot %s once %v, power %s; want a one-time HTTP boot and ON", j.JobID, j.Steps[0].Boot, j.Steps[0].Once, j.Steps[1].Action)
	}
	boots := vm.q.Boots()
	if len(boots) == 0 || boots[0].Boot.Target != "UefiHttp" || !strings.HasSuffix(boots[0].Boot.HTTPBootURI, "/boot/artifacts/ipxe.efi") {
		t.Fatalf("the VM's boots %+v: want the first by UEFI HTTP boot of EIM's ipxe.efi", boots)
	}
	// The firmware's own HTTP boot loaded the iPXE that booted the
	// micro-OS.
	cons := string(mustRead(t, vm.console))
	http := strings.Index(cons, `starting Boot0100 "EIM HTTP boot" from Uri(http://`+vmHost)
	microOS := strings.Index(cons, "EIM: booting the micro-OS")
	if http < 0 || microOS < http || !strings.Contains(cons[:http], "Start HTTP Boot over IPv4") {
		t.Errorf("console in %s: want OVMF's HTTP boot of the BMC's URI, then EIM's iPXE booting the micro-OS", vm.console)
	}
	t.Logf("%s: `eim host provision` to instance RUNNING by UEFI HTTP boot: %s (network-boot job: %s)", name, day0.Round(100*time.Millisecond), j.Steps[2].Note)
}

// bmcReprovisionRedfish: a reprovisioning through the BMC. The host's OS
// image is served broken at first, so its Day 0 (started by itself
// through the Redfish BMC) fails at stream-image; the image mended, `eim
// instance reprovision` makes the oob module boot the host from the
// network again through its BMC — a reset of the running machine with a
// one-time PXE boot — and the new micro-OS runs attempt 2 to RUNNING.
func bmcReprovisionRedfish(t *testing.T, e *vmEnv, n int) {
	ctx := context.Background()
	name := "bmc-reprovision"
	// An OS profile like the test OS's, its image behind a server that
	// breaks it until mended.
	var good eim.OS
	if err := e.s.admin.Get(ctx, eim.DefaultProject, eim.KindOS, e.osID, &good); err != nil {
		t.Fatal(err)
	}
	img := mustRead(t, filepath.Join(e.s.bootDir, "eim-testos.img.gz"))
	var mended atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	imgSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := img
		if !mended.Load() {
			b = bytes.Clone(img)
			b[len(b)/2] ^= 0xff // one byte off: the checksum does not match
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}), ReadHeaderTimeout: 10 * time.Second}
	go imgSrv.Serve(ln)
	t.Cleanup(func() { imgSrv.Close() })
	mendable := map[string]any{"name": "mendable-os", "profileName": "mendable-os", "architecture": good.Architecture,
		"imageUrl": fmt.Sprintf("http://%s:%d/os.img.gz", vmHost, ln.Addr().(*net.TCPAddr).Port), "sha256": good.Sha256,
		"osType": good.OsType, "osProvider": good.OsProvider, "securityFeature": good.SecurityFeature, "description": good.Description}
	var osr eim.OS
	if err := e.s.admin.Create(ctx, eim.DefaultProject, eim.KindOS, mendable, &osr); err != nil {
		t.Fatalf("create the mendable OS: %v", err)
	}
	e2 := *e
	e2.osID = osr.ResourceID
	uuid, serial, h, in := registerForBMC(t, &e2, name, n, nil)
	vm := startRedfishVM(t, e, name, uuid, serial, redfishsim.Faults{})
	vm.putBMC(t, e, h.ResourceID)

	// Day 0 starts by itself and fails at the broken image.
	deadline := time.Now().Add(8 * time.Minute)
	for {
		var gi eim.Instance
		if err := e.s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(gi.ProvisioningStatus, "Provisioning Failed") {
			t.Logf("%s: first attempt: %s", name, gi.ProvisioningStatus)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s: %q, not failed within 8 minutes; console in %s", in.ResourceID, gi.ProvisioningStatus, vm.console)
		}
		time.Sleep(500 * time.Millisecond) // a poll's pace
	}
	if jobs := netbootJobs(t, e, h.ResourceID); len(jobs) != 1 {
		t.Fatalf("before the reprovisioning: %d network-boot jobs, want Day 0's", len(jobs))
	}
	mended.Store(true)
	start := time.Now()
	e.cli.must("instance", "reprovision", in.ResourceID)
	var j *client.PowerJob
	deadline = time.Now().Add(time.Minute)
	for {
		if jobs := netbootJobs(t, e, h.ResourceID); len(jobs) == 2 {
			j = jobs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no network-boot job within a minute of the reprovisioning")
		}
		time.Sleep(250 * time.Millisecond) // a poll's pace
	}
	waitDay0(t, e, h, in, vm.console, func() error { return nil })
	took := time.Since(start)
	j = waitJob(t, e, h.ResourceID, j.JobID, 5*time.Minute)
	checkNetbootJob(t, j, oob.ActionReset)
	var pxe int
	for _, b := range vm.q.Boots() {
		if b.Boot.Target == "Pxe" {
			pxe++
		}
	}
	if pxe != 2 {
		t.Errorf("the VM's boots %+v: want two from the network (Day 0, the reprovisioning)", vm.q.Boots())
	}
	log, err := e.s.admin.ProvisioningLog(ctx, eim.DefaultProject, in.ResourceID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var attempt2 bool
	for _, le := range log.Entries {
		attempt2 = attempt2 || (le.Attempt == 2 && strings.Contains(le.Message, "workflow succeeded"))
	}
	if !attempt2 {
		t.Errorf("the provisioning log has no succeeded attempt 2: %+v", log.Entries)
	}
	t.Logf("%s: `eim instance reprovision` to instance RUNNING, through a reset by the BMC: %s", name, took.Round(100*time.Millisecond))
}
