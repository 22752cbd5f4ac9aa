package oob_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
	"github.com/eimhq/eim/oob"
)

const bmcUser, bmcPassword = "admin", "pa55-w0rd"

// redfishBMC serves a simulated Redfish BMC on loopback (HTTPS and HTTP).
func redfishBMC(t *testing.T, cfg redfishsim.Config) (*redfishsim.BMC, *redfishsim.Server) {
	t.Helper()
	cfg.Username, cfg.Password = bmcUser, bmcPassword
	if len(cfg.Systems) == 0 {
		cfg.Systems = []redfishsim.SystemConfig{{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})}}
	}
	sim, err := redfishsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redfishsim.Serve(sim, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return sim, srv
}

func redfishTarget(srv *redfishsim.Server) oob.Target {
	return oob.Target{Protocol: "REDFISH", Address: srv.URL, Username: bmcUser, Password: bmcPassword, CABundle: srv.CertPEM}
}

var redfishDriver = oob.NewRedfishDriver(oob.RedfishOptions{Timeout: 5 * time.Second, TaskPoll: 5 * time.Millisecond})

func openRedfish(t *testing.T, target oob.Target) oob.Conn {
	t.Helper()
	c, err := redfishDriver.Open(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRedfishDriver(t *testing.T) {
	ctx := context.Background()
	sim, srv := redfishBMC(t, redfishsim.Config{Faults: redfishsim.Faults{AsyncTasks: 1}})
	c := openRedfish(t, redfishTarget(srv))
	if s, err := c.PowerState(ctx); err != nil || s != oob.PowerOff {
		t.Fatalf("power state: got %q, %v, want OFF", s, err)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantActions := []oob.Action{oob.ActionOn, oob.ActionGracefulOff, oob.ActionForceOff, oob.ActionReset, oob.ActionPowerCycle}
	if !slices.Equal(caps.ResetTypes, []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn", "PushPowerButton", "PowerCycle"}) {
		t.Errorf("reset types: got %v", caps.ResetTypes)
	}
	if !slices.Equal(caps.Actions, wantActions) || len(caps.BootTargets) != 5 || !caps.VirtualMedia || caps.Systems != nil {
		t.Errorf("capabilities: got %+v, want actions %v, 5 boot targets, virtual media, no systems list", caps, wantActions)
	}
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootPXE, Once: true, UEFI: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Boot(ctx); err != nil || b != (oob.Boot{Target: oob.BootPXE, Once: true, UEFI: true}) {
		t.Fatalf("boot read back: got %+v, %v", b, err)
	}
	if target, enabled, mode, _ := sim.BootOverride("1"); target != "Pxe" || enabled != "Once" || mode != "UEFI" {
		t.Errorf("the BMC holds %s %s %s", target, enabled, mode)
	}
	for _, step := range []struct {
		a    oob.Action
		want oob.PowerState
		rt   redfishsim.ResetType
	}{
		{oob.ActionOn, oob.PowerOn, redfishsim.ResetOn},
		{oob.ActionReset, oob.PowerOn, redfishsim.ForceRestart},
		{oob.ActionPowerCycle, oob.PowerOn, redfishsim.PowerCycle},
		{oob.ActionForceOff, oob.PowerOff, redfishsim.ForceOff},
	} {
		if err := c.Power(ctx, step.a); err != nil {
			t.Fatalf("%s: %v", step.a, err)
		}
		if s, _ := c.PowerState(ctx); s != step.want {
			t.Errorf("after %s: got %s, want %s", step.a, s, step.want)
		}
		acts := sim.Actions()
		if last := acts[len(acts)-1]; last.Type != step.rt {
			t.Errorf("%s sent ResetType %s, want %s", step.a, last.Type, step.rt)
		}
	}
	if b, _ := c.Boot(ctx); b.Target != oob.BootNone {
		t.Errorf("the one-time override after its boot: got %+v, want NONE", b)
	}
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootHTTP, Once: true, URL: "https://127.0.0.1:8443/boot.ipxe"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Boot(ctx); b != (oob.Boot{Target: oob.BootHTTP, Once: true, UEFI: true, URL: "https://127.0.0.1:8443/boot.ipxe"}) {
		t.Errorf("HTTP boot read back: %+v", b)
	}
	for target, name := range map[oob.BootTarget]string{oob.BootCD: "Cd", oob.BootDisk: "Hdd", oob.BootBIOS: "BiosSetup"} {
		if err := c.SetBoot(ctx, oob.Boot{Target: target, UEFI: true}); err != nil {
			t.Fatal(err)
		}
		if b, _ := c.Boot(ctx); b != (oob.Boot{Target: target, UEFI: true}) {
			t.Errorf("%s read back: %+v", target, b)
		}
		if got, enabled, _, _ := sim.BootOverride("1"); got != name || enabled != "Continuous" {
			t.Errorf("%s: the BMC holds %s %s, want %s Continuous", target, got, enabled, name)
		}
	}
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootNone}); err != nil {
		t.Fatal(err)
	}
	if _, enabled, _, _ := sim.BootOverride("1"); enabled != "Disabled" {
		t.Errorf("after NONE: %s", enabled)
	}
	if err := c.InsertMedia(ctx, "http://127.0.0.1:8080/micro-os.iso"); err != nil {
		t.Fatal(err)
	}
	if img, _ := sim.VirtualCD("1"); img != "http://127.0.0.1:8080/micro-os.iso" {
		t.Errorf("virtual CD: %q", img)
	}
	if err := c.EjectMedia(ctx); err != nil {
		t.Fatal(err)
	}
	if img, _ := sim.VirtualCD("1"); img != "" {
		t.Errorf("virtual CD after the eject: %q", img)
	}
	// An older service without the actions: the CD's Image is PATCHed.
	sim.SetFaults(redfishsim.Faults{NoMediaActions: true})
	if err := c.InsertMedia(ctx, "http://127.0.0.1:8080/micro-os.iso"); err != nil {
		t.Fatalf("insert without the action: %v", err)
	}
	if img, _ := sim.VirtualCD("1"); img != "http://127.0.0.1:8080/micro-os.iso" {
		t.Errorf("virtual CD inserted by PATCH: %q", img)
	}
	if err := c.EjectMedia(ctx); err != nil {
		t.Fatalf("eject without the action: %v", err)
	}
	if img, _ := sim.VirtualCD("1"); img != "" {
		t.Errorf("virtual CD after the eject by PATCH: %q", img)
	}
	sim.SetFaults(redfishsim.Faults{})
	if err := c.Power(ctx, oob.ActionHibernate); !errors.Is(err, oob.ErrUnsupported) {
		t.Errorf("hibernate: got %v, want unsupported", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if sim.Sessions() != 0 {
		t.Errorf("sessions after Close: %d", sim.Sessions())
	}
}

// TestRedfishDriverErrors: each failure is a clear error of its kind.
func TestRedfishDriverErrors(t *testing.T) {
	ctx := context.Background()
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	type result struct {
		err  error
		want error
		text string
	}
	cases := map[string]func(t *testing.T) result{
		"unreachable": func(t *testing.T) result {
			_, err := redfishDriver.Open(ctx, oob.Target{Address: closed, Username: bmcUser, Password: bmcPassword, Insecure: true})
			return result{err, oob.ErrUnreachable, "connection refused"}
		},
		"wrong password": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{})
			tg := redfishTarget(srv)
			tg.Password = "wrong"
			_, err := redfishDriver.Open(ctx, tg)
			return result{err, oob.ErrBadCredentials, "HTTP 401"}
		},
		"self-signed without the CA": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{})
			tg := redfishTarget(srv)
			tg.CABundle = nil
			_, err := redfishDriver.Open(ctx, tg)
			return result{err, oob.ErrBadCertificate, "certificate"}
		},
		"session limit": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{MaxSessions: 1})
			openRedfish(t, redfishTarget(srv))
			_, err := redfishDriver.Open(ctx, redfishTarget(srv))
			return result{err, oob.ErrBusy, "number of simultaneous sessions"}
		},
		"several systems, none chosen": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{
				{ID: "blade-1", Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})},
				{ID: "blade-2", Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})},
			}})
			_, err := redfishDriver.Open(ctx, redfishTarget(srv))
			return result{err, oob.ErrAmbiguous, "blade-1, blade-2"}
		},
		"action not allowed": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{
				Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{}), ResetTypes: []redfishsim.ResetType{redfishsim.ResetOn, redfishsim.ForceOff},
			}}})
			c := openRedfish(t, redfishTarget(srv))
			return result{c.Power(ctx, oob.ActionPowerCycle), oob.ErrUnsupported, "needs ResetType PowerCycle or FullPowerCycle; the system allows On, ForceOff"}
		},
		"already off (409)": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{Faults: redfishsim.Faults{ConflictInState: true}})
			c := openRedfish(t, redfishTarget(srv))
			return result{c.Power(ctx, oob.ActionGracefulOff), oob.ErrAlreadyInState, "Server is already powered OFF"}
		},
		"boot target not allowed": func(t *testing.T) result {
			_, srv := redfishBMC(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{
				Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{}), BootTargets: []string{"None", "Pxe", "Hdd"},
			}}})
			c := openRedfish(t, redfishTarget(srv))
			return result{c.SetBoot(ctx, oob.Boot{Target: oob.BootHTTP, Once: true, URL: "http://127.0.0.1/x"}), oob.ErrUnsupported, "allows boot targets None, Pxe, Hdd"}
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := f(t)
			if !errors.Is(r.err, r.want) {
				t.Fatalf("got %v (kind %v), want %v", r.err, oob.KindOf(r.err), r.want)
			}
			if !strings.Contains(r.err.Error(), r.text) || strings.Contains(r.err.Error(), bmcPassword) {
				t.Errorf("message %q: want it to say %q and never the password", r.err, r.text)
			}
		})
	}
}

// TestRedfishDriverQEMU: the driver against the simulated BMC driving a
// real QEMU through QMP: power on starts the VM, a one-time PXE boot is
// read back and used by the next boot, off stops it.
func TestRedfishDriverQEMU(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
	}
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	m, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{
		QMP: sock,
		// A VM that costs nothing: no machine, no devices, CPUs held until
		// QMP starts them; it has no boot order, so the boot the BMC asks
		// for shows in its command line.
		Command: []string{qemu, "-machine", "none", "-nodefaults", "-display", "none", "-S", "-qmp", "unix:" + sock + ",server=on,wait=off"},
		BootArgs: func(b redfishsim.Boot) []string {
			if b.Target == "None" {
				return nil
			}
			return []string{"-name", "boot-" + b.Target}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	_, srv := redfishBMC(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}})
	c := openRedfish(t, redfishTarget(srv))
	waitPower := func(want oob.PowerState) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s, err := c.PowerState(ctx)
			if err == nil && s == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("power state: got %q, %v, want %s", s, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cmdline := func(pid int) string {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return strings.ReplaceAll(string(data), "\x00", " ")
	}

	waitPower(oob.PowerOff)
	if m.PID() != 0 {
		t.Fatalf("a QEMU process before power on: %d", m.PID())
	}
	if err := c.SetBoot(ctx, oob.Boot{Target: oob.BootPXE, Once: true, UEFI: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Boot(ctx); err != nil || b != (oob.Boot{Target: oob.BootPXE, Once: true, UEFI: true}) {
		t.Fatalf("one-time PXE read back: got %+v, %v", b, err)
	}
	if err := c.Power(ctx, oob.ActionOn); err != nil {
		t.Fatal(err)
	}
	waitPower(oob.PowerOn)
	pid := m.PID()
	if pid == 0 || !strings.Contains(cmdline(pid), "-name boot-Pxe") {
		t.Fatalf("power on: QEMU pid %d, command line %q, want a VM booting from PXE", pid, cmdline(pid))
	}
	if b, _ := c.Boot(ctx); b.Target != oob.BootNone {
		t.Errorf("the one-time override after the boot: %+v, want NONE", b)
	}
	if err := c.Power(ctx, oob.ActionForceOff); err != nil {
		t.Fatal(err)
	}
	waitPower(oob.PowerOff)
	deadline := time.Now().Add(10 * time.Second)
	for m.PID() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the QEMU process is still there after power off")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
