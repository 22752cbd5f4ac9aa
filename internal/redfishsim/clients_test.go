package redfishsim_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

// The Redfish clients Debian ships, run against the simulator so that it is
// checked by two independent implementations: DMTF's redfishtool and
// OpenStack's sushy (python3-sushy). Without them these tests skip, unless
// EIM_REQUIRE_REDFISH_CLIENTS is set (.ci/run installs them and sets it).

func requireClient(t *testing.T, what string, found bool) {
	t.Helper()
	if found {
		return
	}
	if os.Getenv("EIM_REQUIRE_REDFISH_CLIENTS") != "" {
		t.Fatalf("%s not installed and EIM_REQUIRE_REDFISH_CLIENTS is set (apt-get install redfishtool python3-sushy)", what)
	}
	t.Skipf("%s not installed (apt-get install redfishtool python3-sushy)", what)
}

// redfishtool runs redfishtool against the BMC's host:port and returns its
// output, failing the test when it fails unless fail is false.
func redfishtool(t *testing.T, hostPort string, ok bool, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"-r", hostPort, "-u", user, "-p", password, "-T", "20"}, args...)
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "redfishtool", full...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if ok && err != nil {
		t.Fatalf("redfishtool %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
	}
	if !ok && err == nil {
		t.Fatalf("redfishtool %s: succeeded, want a failure\n%s", strings.Join(args, " "), out.String())
	}
	return out.String() + stderr.String()
}

func TestRedfishtool(t *testing.T) {
	_, err := exec.LookPath("redfishtool")
	requireClient(t, "redfishtool", err == nil)
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}, MaxSessions: 4})
	https := strings.TrimPrefix(e.srv.URL, "https://")
	httpHost := strings.TrimPrefix(e.srv.HTTPURL, "http://")

	// The versions document and the service root, over HTTPS and HTTP.
	if out := redfishtool(t, https, true, "-S", "Always", "versions"); !strings.Contains(out, `"v1": "/redfish/v1/"`) {
		t.Errorf("versions: got %s", out)
	}
	if out := redfishtool(t, httpHost, true, "-S", "Never", "root"); !strings.Contains(out, `"RedfishVersion"`) {
		t.Errorf("root over HTTP: got %s", out)
	}
	var coll map[string]any
	if err := json.Unmarshal([]byte(redfishtool(t, https, true, "-S", "Always", "Systems")), &coll); err != nil || coll["Members@odata.count"] != float64(1) {
		t.Fatalf("Systems: got %v (%v)", coll, err)
	}

	for _, auth := range []string{"Basic", "Session"} {
		t.Run(auth, func(t *testing.T) {
			m.Set(redfishsim.PowerOff)
			base := []string{"-S", "Always", "-A", auth}
			run := func(args ...string) string { return redfishtool(t, https, true, append(base, args...)...) }
			var sys map[string]any
			if err := json.Unmarshal([]byte(run("Systems", "-I", "1", "get")), &sys); err != nil || sys["PowerState"] != "Off" {
				t.Fatalf("Systems get: got %v (%v)", sys, err)
			}
			run("Systems", "-I", "1", "reset", "On")
			if got := power(t, m); got != redfishsim.PowerOn {
				t.Errorf("after reset On: got %s, want On", got)
			}
			run("Systems", "-I", "1", "setBootOverride", "Once", "Pxe")
			if target, enabled, _, _ := e.bmc.BootOverride("1"); target != "Pxe" || enabled != "Once" {
				t.Errorf("boot override: got %s %s, want Pxe Once", target, enabled)
			}
			if auth == "Session" { // the rest is the same with either
				// One session per command, logged out at its end.
				if n, opened := e.bmc.Sessions(), e.bmc.SessionsOpened(); n != 0 || opened != 3 {
					t.Errorf("sessions: %d open of %d opened, want 0 of 3", n, opened)
				}
				return
			}
			run("Systems", "-I", "1", "reset", "ForceRestart")
			if b := m.Boots(); len(b) == 0 || b[len(b)-1].Target != "Pxe" {
				t.Errorf("boot after the restart: got %+v, want Pxe", b)
			}
			if _, enabled, _, _ := e.bmc.BootOverride("1"); enabled != "Disabled" {
				t.Errorf("one-time boot after the restart: got %s, want Disabled", enabled)
			}
			run("Systems", "-I", "1", "setBootOverride", "Disabled")
			run("Systems", "-I", "1", "reset", "GracefulShutdown")
			if got := power(t, m); got != redfishsim.PowerOff {
				t.Errorf("after GracefulShutdown: got %s, want Off", got)
			}
			// The virtual CD, through raw requests.
			cd := "/redfish/v1/Managers/BMC/VirtualMedia/Cd"
			run("raw", "POST", cd+"/Actions/VirtualMedia.InsertMedia", "-d", `{"Image": "http://eim.example/micro-os.iso"}`)
			if image, _ := e.bmc.VirtualCD("1"); image != "http://eim.example/micro-os.iso" {
				t.Errorf("virtual CD: got %q", image)
			}
			run("raw", "POST", cd+"/Actions/VirtualMedia.EjectMedia", "-d", `{}`)
			if image, _ := e.bmc.VirtualCD("1"); image != "" {
				t.Errorf("virtual CD after eject: got %q", image)
			}
		})
	}

	// Its own checks against the allowable values, and the BMC's refusals.
	out := redfishtool(t, https, false, "-S", "Always", "Systems", "-I", "1", "setBootOverride", "Once", "Floppy")
	if !strings.Contains(out, "not supported by the remote service") {
		t.Errorf("boot target Floppy: got %s", out)
	}
	redfishtool(t, https, false, "-S", "Always", "-p", "wrong", "Systems", "-I", "1", "get")
	m.Set(redfishsim.PowerOff)
	e.bmc.SetFaults(redfishsim.Faults{ConflictInState: true})
	out = redfishtool(t, https, false, "-S", "Always", "Systems", "-I", "1", "reset", "GracefulShutdown")
	if !strings.Contains(out, "409") {
		t.Errorf("GracefulShutdown of an off system with the 409 fault: got %s", out)
	}
}

var sushyPython = sync.OnceValue(func() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import sushy").Run() == nil {
			return p
		}
	}
	return ""
})

// python3 finds a Python that has sushy (Debian's, not a pyenv's).
func python3(t *testing.T) string {
	t.Helper()
	p := sushyPython()
	requireClient(t, "python3-sushy", p != "")
	return p
}

func sushy(t *testing.T, e *env, verify string, steps ...string) map[string]map[string]any {
	t.Helper()
	py := python3(t)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"testdata/sushy_check.py", e.srv.URL, user, password, verify}, steps...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Stderr = &stderr
	// requests lets these override a session's verify=False.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sushy %v: %v\n%s%s", steps, err, out, stderr.String())
	}
	t.Logf("sushy %v: %s", steps, time.Since(t0))
	res := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("sushy output %q: %v", sc.Text(), err)
		}
		res[line["step"].(string)] = line
	}
	return res
}

func TestSushy(t *testing.T) {
	python3(t)
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := oneSystem(t, m, redfishsim.Faults{})

	res := sushy(t, e, "false", "state", "on", "pxe-once", "state", "bad-target", "vmedia")
	if c := res["connect"]; c["redfish_version"] != "1.15.0" || c["session"] != "/redfish/v1/SessionService/Sessions/1" {
		t.Errorf("connect: got %v, want a session", c)
	}
	if got := power(t, m); got != redfishsim.PowerOn {
		t.Errorf("power after reset_system(RESET_ON): got %s, want On", got)
	}
	st := res["state"] // the second one, after the override
	for k, want := range map[string]any{"power_state": "on", "boot_target": "Pxe", "boot_enabled": "Once", "boot_mode": "UEFI", "serial": "SIM1"} {
		if got := st[k]; got != want && !strings.EqualFold(got.(string), want.(string)) {
			t.Errorf("state %s: got %v, want %v", k, got, want)
		}
	}
	if got := len(st["resets"].([]any)); got != len(redfishsim.ResetTypes) {
		t.Errorf("allowed resets: got %v", st["resets"])
	}
	if got := st["managers"]; len(got.([]any)) != 1 || got.([]any)[0] != "BMC" {
		t.Errorf("managers: got %v", got)
	}
	if target, enabled, mode, _ := e.bmc.BootOverride("1"); target != "Pxe" || enabled != "Once" || mode != "UEFI" {
		t.Errorf("boot override: got %s %s %s", target, enabled, mode)
	}
	if got := res["bad-target"]["error"]; got != "InvalidParameterValueError" {
		t.Errorf("boot target Floppy: got %v", got)
	}
	if v := res["vmedia"]; v["inserted"] != true || v["image"] != "http://eim.example/micro-os.iso" || v["after_eject"] != false {
		t.Errorf("virtual media: got %v", v)
	}
	if _, ok := res["closed"]; !ok || e.bmc.Sessions() != 0 {
		t.Errorf("session not logged out: %d open", e.bmc.Sessions())
	}

	// The 409 of an off system reaches sushy as an HTTP error with its code.
	m.Set(redfishsim.PowerOff)
	e.bmc.SetFaults(redfishsim.Faults{ConflictInState: true, OnceAsContinuous: true})
	res = sushy(t, e, "false", "graceful", "pxe-once", "state")
	if g := res["graceful"]; g["status"] != float64(409) || g["code"] != "Base.1.16.GeneralError" {
		t.Errorf("graceful shutdown when off: got %v", g)
	}
	if got := res["state"]["boot_enabled"]; got != "Continuous" {
		t.Errorf("Once read back: got %v, want Continuous", got)
	}

	// The session limit: sushy falls back to Basic authentication.
	e2 := start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}, MaxSessions: 1})
	hold := e2.do(t, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": user, "Password": password}, map[string]string{"Authorization": ""})
	if hold.status != 201 {
		t.Fatalf("login: got %d", hold.status)
	}
	res = sushy(t, e2, "false", "state")
	if res["connect"]["session"] != nil || res["state"]["power_state"] != "Off" {
		t.Errorf("at the session limit: got %v %v, want Basic auth and the state", res["connect"], res["state"])
	}

	// The self-signed certificate verifies as its own CA bundle.
	bundle := filepath.Join(t.TempDir(), "bmc-ca.pem")
	if err := os.WriteFile(bundle, e.srv.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if res := sushy(t, e, bundle, "state"); res["state"]["serial"] != "SIM1" {
		t.Errorf("with the CA bundle: got %v", res["state"])
	}
}
