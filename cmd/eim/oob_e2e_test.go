package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/ipmisim"
)

// TestServerOOB: the oob profile's server serves a host's BMC, audited by
// the API's user without the password; a process without the oob module
// does not serve it.
func TestServerOOB(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "oob")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"
	code, host := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"h1","uuid":"4c4c4544-0000-4000-8000-0000000000b1"}`)
	if code != 200 {
		t.Fatalf("POST a host: %d %v", code, host)
	}
	bmc := api + "/compute/hosts/" + host["resourceId"].(string) + "/bmc"
	const pw = "e2e-bmc-Passw0rd"
	code, body := getJSON(t, "PUT", bmc, tok, `{"protocol":"IPMI","address":"10.0.0.7:623","username":"root","password":"`+pw+`"}`)
	if code != 200 || body["passwordSet"] != true || body["password"] != nil {
		t.Fatalf("PUT the BMC: %d %v", code, body)
	}
	if code, body := getJSON(t, "GET", bmc, tok, ""); code != 200 || body["address"] != "10.0.0.7:623" || body["password"] != nil {
		t.Fatalf("GET the BMC: %d %v", code, body)
	}
	// kind="bmc" matches as a substring: the BMC's record and those of its
	// host's power jobs (bmcjob), which hold no credentials either.
	code, body = getJSON(t, "GET", api+`/audit?filter=kind%3D%22bmc%22`, tok, "")
	all, _ := body["auditRecords"].([]any)
	var recs []any
	for _, r := range all {
		if r.(map[string]any)["kind"] == "bmc" {
			recs = append(recs, r)
		}
	}
	if code != 200 || len(recs) != 1 {
		t.Fatalf("GET the BMC's audit records: %d %v", code, body)
	}
	if raw, _ := json.Marshal(all); strings.Contains(string(raw), pw) {
		t.Fatalf("the BMC's and its jobs' audit records hold the password: %s", raw)
	}
	if raw, _ := json.Marshal(recs); strings.Contains(string(raw), pw) || !strings.Contains(string(raw), "[redacted]") {
		t.Fatalf("the BMC's audit record: got %s, want the password redacted", raw)
	}
	if rec := recs[0].(map[string]any); !strings.HasPrefix(rec["principal"].(string), "user:") {
		t.Fatalf("the BMC's audit record: got %v, want made by the API's user", rec)
	}
	for _, out := range []string{s.out.String(), s.errOut.String()} {
		if strings.Contains(out, pw) {
			t.Fatalf("the server's output holds the BMC password:\n%s", out)
		}
	}

	apiDir := t.TempDir()
	a := startModules(t, apiDir, false, "--modules", "api")
	atok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(apiDir, adminTokenFile)))))
	if code, body := getJSON(t, "PUT", a.http+"/v1/projects/default/compute/hosts/host-0000000a/bmc", atok, `{}`); code != 404 {
		t.Fatalf("PUT a BMC on a process without the oob module: %d %v, want 404", code, body)
	}
}

// TestServerOOBPowerIPMI: a real BMC drives a real VM. OpenIPMI's
// ipmi_sim's chassis is a QEMU process (power on starts it, off ends it);
// EIM's oob profile, given only the BMC's address and credentials, carries
// out the host's desiredPowerState (the v1 PATCH) as power jobs through
// ipmitool: ON (QEMU starts; currentPowerState ON as the BMC reports it),
// RESET, then OFF (QEMU ends; the graceful shutdown that a VM without an OS
// cannot answer gives way to a forced one).
func TestServerOOBPowerIPMI(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed")
	}
	pidfile := filepath.Join(t.TempDir(), "qemu.pid")
	sim := ipmisim.Start(t, ipmisim.Config{StartCmd: qemu + " -machine none -S -display none -nodefaults -pidfile " + pidfile})
	// vm returns the QEMU process's id, or an error when none runs.
	vm := func() (int, error) {
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
		if _, rest, _ := strings.Cut(string(stat), ") "); strings.HasPrefix(rest, "Z") {
			return 0, fmt.Errorf("QEMU %d exited", pid)
		}
		return pid, nil
	}

	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "oob", "--oob-poll-every", "2s", "--oob-confirm-timeout", "20s",
		"--oob-graceful-timeout", "3s", "--oob-job-timeout", "3m")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"
	code, host := getJSON(t, "POST", api+"/compute/hosts", tok, `{"name":"bmc-vm","uuid":"4c4c4544-0000-4000-8000-0000000000c1"}`)
	if code != 200 {
		t.Fatalf("POST a host: %d %v", code, host)
	}
	id := host["resourceId"].(string)
	hostURL := api + "/compute/hosts/" + id
	if code, body := getJSON(t, "PUT", hostURL+"/bmc", tok, fmt.Sprintf(`{"protocol":"IPMI","address":"127.0.0.1:%d","username":%q,"password":%q}`,
		sim.Port, ipmisim.User, ipmisim.Password)); code != 200 {
		t.Fatalf("PUT the BMC: %d %v", code, body)
	}

	// power asks for a state and waits for its job to succeed; it returns
	// the host as it then is.
	jobs := 0
	power := func(state string) map[string]any {
		t.Helper()
		if code, body := getJSON(t, "PATCH", hostURL, tok, `{"desiredPowerState":"`+state+`"}`); code != 200 {
			t.Fatalf("PATCH desiredPowerState %s: %d %v", state, code, body)
		}
		jobs++
		var job map[string]any
		ipmisim.Eventually(t, 3*time.Minute, "the "+state+" job succeeds", func() error {
			code, body := getJSON(t, "GET", hostURL+"/bmc/jobs", tok, "")
			list, _ := body["jobs"].([]any)
			if code != 200 || len(list) != jobs {
				return fmt.Errorf("jobs: %d %v", code, body)
			}
			job = list[0].(map[string]any)
			switch job["state"] {
			case "SUCCEEDED":
				return nil
			case "FAILED", "CANCELLED":
				t.Fatalf("the %s job: %v", state, job)
			}
			return fmt.Errorf("job %v", job)
		})
		if job["desiredPowerState"] != state {
			t.Fatalf("job: got %v, want one for %s", job, state)
		}
		_, h := getJSON(t, "GET", hostURL, tok, "")
		t.Logf("%s: job %s steps %v; host %v %q", state, job["jobId"], job["steps"], h["currentPowerState"], h["powerStatus"])
		return h
	}

	h := power("POWER_STATE_ON")
	first, err := vm()
	if err != nil {
		t.Fatalf("after ON: %v", err)
	}
	if h["currentPowerState"] != "POWER_STATE_ON" || h["powerStatus"] != "Powered on" || h["bmcKind"] != "BAREMETAL_CONTROLLER_KIND_IPMI" ||
		h["bmcIp"] != "127.0.0.1" || h["powerOnTime"] == float64(0) {
		t.Fatalf("after ON: host %v", h)
	}
	h = power("POWER_STATE_RESET")
	if h["currentPowerState"] != "POWER_STATE_RESET" || h["powerStatus"] != "Reset successful" {
		t.Fatalf("after RESET: host %v", h)
	}
	// ipmi_sim refuses a reset of its startcmd's VM: the job power
	// cycled it instead (a new QEMU process).
	ipmisim.Eventually(t, 10*time.Second, "a new QEMU process after RESET", func() error {
		if pid, err := vm(); err != nil || pid == first {
			return fmt.Errorf("QEMU %d (first %d, %v)", pid, first, err)
		}
		return nil
	})
	h = power("POWER_STATE_OFF")
	if pid, err := vm(); err == nil {
		t.Fatalf("after OFF QEMU %d still runs", pid)
	}
	if h["currentPowerState"] != "POWER_STATE_OFF" || h["powerStatus"] != "Powered off" {
		t.Fatalf("after OFF: host %v", h)
	}
	code, b := getJSON(t, "GET", hostURL+"/bmc", tok, "")
	reach, _ := b["reachable"].(map[string]any)
	if code != 200 || reach["status"] != "REACHABLE" {
		t.Fatalf("the BMC: %d %v, want REACHABLE", code, b)
	}
	for _, out := range []string{s.out.String(), s.errOut.String()} {
		if strings.Contains(out, ipmisim.Password) {
			t.Fatal("the server's output holds the BMC password")
		}
	}
}
