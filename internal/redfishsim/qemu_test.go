package redfishsim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

// fakeQEMU serves QMP on a unix socket: the greeting, then answers from
// reply (which may send events first).
func fakeQEMU(t *testing.T, greet bool, reply func(cmd string, id json.RawMessage, w *json.Encoder)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		w := json.NewEncoder(conn)
		if greet {
			_ = w.Encode(map[string]any{"QMP": map[string]any{"version": map[string]any{}, "capabilities": []string{}}})
		}
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			var req struct {
				Execute string          `json:"execute"`
				ID      json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil {
				return
			}
			if req.Execute == "qmp_capabilities" {
				_ = w.Encode(map[string]any{"return": map[string]any{}, "id": req.ID})
				continue
			}
			reply(req.Execute, req.ID, w)
		}
	}()
	return sock
}

func TestQMPProtocol(t *testing.T) {
	ctx := context.Background()
	sock := fakeQEMU(t, true, func(cmd string, id json.RawMessage, w *json.Encoder) {
		switch cmd {
		case "query-status":
			_ = w.Encode(map[string]any{"event": "RESET", "data": map[string]any{"guest": true}})
			_ = w.Encode(map[string]any{"return": map[string]any{"status": "running", "running": true}, "id": id})
		case "stale":
			_ = w.Encode(map[string]any{"return": map[string]any{}, "id": "0"}) // not ours: skipped
			_ = w.Encode(map[string]any{"error": map[string]any{"class": "GenericError", "desc": "nope"}, "id": id})
		default:
			_ = w.Encode(map[string]any{"error": map[string]any{"class": "CommandNotFound", "desc": "The command " + cmd + " has not been found"}, "id": id})
		}
	})
	q, err := redfishsim.DialQMP(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if st, err := q.Status(ctx); err != nil || st != "running" {
		t.Errorf("status: got %q, %v, want running", st, err)
	}
	var qerr *redfishsim.QMPError
	if _, err := q.Execute(ctx, "explode", nil); !errors.As(err, &qerr) || qerr.Class != "CommandNotFound" {
		t.Errorf("unknown command: got %v, want CommandNotFound", err)
	}
	if _, err := q.Execute(ctx, "stale", nil); !errors.As(err, &qerr) || qerr.Desc != "nope" {
		t.Errorf("answer after another's: got %v, want nope", err)
	}
	ev, err := q.WaitEvent(ctx, "RESET")
	if err != nil || !strings.Contains(string(ev.Data), `"guest":true`) {
		t.Errorf("RESET event: got %+v, %v", ev, err)
	}
	// No second event: waiting ends at the deadline.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := q.WaitEvent(short, "RESET"); err == nil {
		t.Error("second RESET: got one, want a timeout")
	}

	// A peer that never greets: the dial ends at the context's deadline.
	silent := fakeQEMU(t, false, nil)
	short2, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if _, err := redfishsim.DialQMP(short2, "unix", silent); err == nil {
		t.Error("dial without greeting: got no error")
	}
}

// qemuBinary finds QEMU, or skips (fails with EIM_REQUIRE_QEMU).
func qemuBinary(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
	}
	return p
}

// vm is the argv of a VM that costs nothing: no machine, no devices, CPUs
// held (-S) until QMP starts them.
func vm(qemu, sock string) []string {
	return []string{qemu, "-machine", "none", "-nodefaults", "-display", "none", "-S", "-qmp", "unix:" + sock + ",server=on,wait=off"}
}

// TestQMPRealQEMU: the QMP client against a real QEMU: status, stop and
// cont, reset with its event, an error answer, quit.
func TestQMPRealQEMU(t *testing.T) {
	qemu := qemuBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	argv := vm(qemu, sock)
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	var q *redfishsim.QMP
	eventually(t, 30*time.Second, "QEMU's QMP socket", func() bool {
		var err error
		q, err = redfishsim.DialQMP(ctx, "unix", sock)
		return err == nil
	})
	defer q.Close()
	status := func(want string) {
		t.Helper()
		if st, err := q.Status(ctx); err != nil || st != want {
			t.Fatalf("status: got %q, %v, want %s", st, err, want)
		}
	}
	exec := func(cmd string) {
		t.Helper()
		if _, err := q.Execute(ctx, cmd, nil); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	status("prelaunch")
	exec("cont")
	status("running")
	exec("stop")
	status("paused")
	exec("cont")
	exec("system_reset")
	if ev, err := q.WaitEvent(ctx, "RESET"); err != nil || !strings.Contains(string(ev.Data), "host-qmp-system-reset") {
		t.Errorf("RESET event: got %+v, %v", ev, err)
	}
	status("running")
	var qerr *redfishsim.QMPError
	if _, err := q.Execute(ctx, "no-such-command", nil); !errors.As(err, &qerr) || qerr.Class != "CommandNotFound" {
		t.Errorf("unknown command: got %v", err)
	}
	exec("quit")
	select {
	case <-exited:
		exited <- nil // for the deferred wait
	case <-ctx.Done():
		t.Fatal("QEMU still running after quit")
	}
}

// TestQEMUMachine: a BMC whose system is a QEMU VM, driven through Redfish.
func TestQEMUMachine(t *testing.T) {
	qemu := qemuBinary(t)
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	m, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{
		QMP:     sock,
		Command: vm(qemu, sock),
		// machine none has no boot order: the boot shows in the command line.
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
	t.Cleanup(func() { m.Close() }) // after the server's (cleanups run last first)
	e := oneSystem(t, m, redfishsim.Faults{})
	state := func() any { return e.get(t, sys1)["PowerState"] }
	reset := func(rt string) {
		t.Helper()
		if a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}, nil); a.status != 204 {
			t.Fatalf("%s: got %d %s", rt, a.status, a.raw)
		}
	}
	waitState := func(want string) {
		t.Helper()
		eventually(t, 30*time.Second, "PowerState "+want, func() bool { return state() == want })
	}
	cmdline := func(pid int) string {
		data, _ := os.ReadFile("/proc/" + itoa(pid) + "/cmdline")
		return strings.ReplaceAll(string(data), "\x00", " ")
	}

	if got := state(); got != "Off" {
		t.Fatalf("before any power-on: got %v, want Off", got)
	}
	reset("On")
	waitState("On")
	first := m.PID()
	if first == 0 {
		t.Fatal("no QEMU process after On")
	}

	// A one-time PXE boot: the restart is a new process with its arguments.
	e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}, nil)
	reset("ForceRestart")
	waitState("On")
	second := m.PID()
	if second == first || second == 0 || !strings.Contains(cmdline(second), "-name boot-Pxe") {
		t.Errorf("restart with a PXE override: pid %d (was %d), command line %q", second, first, cmdline(second))
	}
	// Without an override a restart is system_reset of the same process.
	reset("ForceRestart")
	waitState("On")
	if m.PID() != second {
		t.Errorf("plain restart: pid %d, want the same %d", m.PID(), second)
	}
	if b := m.Boots(); len(b) != 3 || b[1].Target != "Pxe" || b[2].Target != "None" {
		t.Errorf("boots: got %+v", b)
	}

	// machine none has no ACPI: the power button does nothing.
	reset("GracefulShutdown")
	if got := state(); got != "On" {
		t.Errorf("after GracefulShutdown without ACPI: got %v, want On", got)
	}
	reset("ForceOff")
	waitState("Off")
	eventually(t, 10*time.Second, "the QEMU process to be gone", func() bool { return m.PID() == 0 })
	reset("ForceOff") // already off
	reset("PowerCycle")
	waitState("On")
	third := m.PID()
	reset("PowerCycle")
	waitState("On")
	if m.PID() == third || m.PID() == 0 {
		t.Errorf("power cycle: pid %d, want a new one (was %d)", m.PID(), third)
	}

	// A graceful restart: the power button, then, once the guest is off
	// (here quit from outside, as a guest that shuts down ends its QEMU),
	// a new start.
	before := m.PID()
	reset("GracefulRestart")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := redfishsim.DialQMP(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := q.Status(ctx); err != nil || st != "running" {
		t.Fatalf("after the power button: got %q, %v, want running", st, err)
	}
	_, _ = q.Execute(ctx, "quit", nil)
	q.Close()
	eventually(t, 30*time.Second, "the restarted VM", func() bool { return m.PID() != 0 && m.PID() != before && state() == "On" })

	a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "Nmi"}, nil)
	if a.status != 500 || !strings.Contains(string(a.raw), "not currently supported") {
		t.Errorf("NMI on a machine without CPUs: got %d %s, want 500 with QEMU's error", a.status, a.raw)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestQEMUVirtualCD: an image inserted by URL into the virtual CD is
// downloaded when a one-time Cd boot starts the VM, and the VM starts
// with that file as its CD (here a drive of machine none); the override
// is used once, and an ejected CD is no longer there.
func TestQEMUVirtualCD(t *testing.T) {
	qemu := qemuBinary(t)
	image := []byte(strings.Repeat("EIM CD image ", 1000))
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(image) }))
	t.Cleanup(img.Close)
	sock := filepath.Join(t.TempDir(), "qmp.sock")
	m, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{
		QMP:     sock,
		Command: vm(qemu, sock),
		BootArgs: func(b redfishsim.Boot) []string {
			u, err := url.Parse(b.Image)
			if b.Target != "Cd" || err != nil || u.Scheme != "file" {
				return nil
			}
			return []string{"-name", "boot-Cd", "-drive", "if=none,id=cd0,media=cdrom,readonly=on,format=raw,file=" + u.Path}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e := oneSystem(t, m, redfishsim.Faults{})
	cd := "/redfish/v1/Managers/BMC/VirtualMedia/Cd"
	if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": img.URL + "/eim-microos.iso"}, nil); a.status != 204 {
		t.Fatalf("InsertMedia: %d %s", a.status, a.raw)
	}
	e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}, nil)
	if a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil); a.status != 204 {
		t.Fatalf("On: %d %s", a.status, a.raw)
	}
	eventually(t, 30*time.Second, "the VM on", func() bool { return e.get(t, sys1)["PowerState"] == "On" })
	data, _ := os.ReadFile("/proc/" + itoa(m.PID()) + "/cmdline")
	args := strings.Split(string(data), "\x00")
	var file string
	for _, a := range args {
		if _, f, ok := strings.Cut(a, ",file="); ok {
			file = f
		}
	}
	if file == "" {
		t.Fatalf("command line %q: no CD drive", args)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, image) {
		t.Fatalf("the VM's CD %s: %d bytes (%v), want the %d served", file, len(got), err, len(image))
	}
	if b := m.Boots(); len(b) != 1 || b[0].Target != "Cd" {
		t.Errorf("boots %+v, want one from the CD", b)
	}
	if target, enabled, _, _ := e.bmc.BootOverride("1"); enabled != "Disabled" {
		t.Errorf("override after the boot: %s %s, want used up (Disabled)", target, enabled)
	}
	if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.EjectMedia", map[string]any{}, nil); a.status != 204 {
		t.Fatalf("EjectMedia: %d %s", a.status, a.raw)
	}
	if v := e.get(t, cd); v["Inserted"] != false || (v["Image"] != nil && v["Image"] != "") {
		t.Errorf("the virtual CD after the eject: Inserted %v Image %v", v["Inserted"], v["Image"])
	}
	m.Close()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the downloaded image %s outlived the machine (%v)", file, err)
	}
}
