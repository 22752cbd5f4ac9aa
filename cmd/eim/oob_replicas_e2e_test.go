package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the test reads who holds a job

	"github.com/eimhq/eim/internal/redfishsim"
)

// TestOOBReplicasKillMidJob: three "eim server" processes of the oob
// profile on one PostgreSQL, hosts with Redfish BMCs (redfishsim's fleet,
// transitions of 6 s). The process working on a job is SIGKILLed:
//
//   - a POWER_CYCLE, after the BMC received the cycle and before the
//     machine is back on: another process takes the job over after its
//     lease and confirms it from the BMC's state; the BMC received one
//     power cycle;
//   - a power-on, while it waits for its site's power-on slot (a limit of
//     1 per 20 s, taken by another host's power-on): another process takes
//     it over and sends it once;
//   - a power-on, after the BMC received it and before the machine is on:
//     confirmed from the BMC's state, not sent again.
func TestOOBReplicasKillMidJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three server processes and kills three of them")
	}
	dsn := freshPostgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	const lease = 4 * time.Second
	fleet, err := redfishsim.StartFleet(redfishsim.FleetConfig{N: 4, Delay: 6 * time.Second, Username: "fleet", Password: "fleet-bmc-Passw0rd"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	fleet.BMCs[0].Machine.Set(redfishsim.PowerOn) // the one power cycled

	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	common := []string{"--profile", "oob", "--database", dsn, "--data-dir", dataDir, "--log-level", "info", "--rate-limit", "0",
		"--database-max-conns", "4", "--oob-lease", lease.String(), "--oob-site-limit", "1", "--oob-site-window", "20s",
		"--oob-confirm-timeout", "20s", "--oob-job-timeout", "3m", "--oob-poll-every", "1h"}
	var rs []*replica
	for i := range 3 {
		rs = append(rs, &replica{name: fmt.Sprintf("oob%d", i+1), args: common, logFile: filepath.Join(base, fmt.Sprintf("oob%d.log", i+1))})
	}
	t.Cleanup(func() {
		for _, r := range rs {
			r.kill()
		}
		if t.Failed() {
			for _, r := range rs {
				b, _ := os.ReadFile(r.logFile)
				t.Logf("%s output (%d starts):\n%s", r.name, r.starts, b)
			}
		}
	})
	for _, r := range rs { // one after the other: the first creates the keys
		r.start(t)
	}
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	// api is a live process's API.
	api := func() string {
		for _, r := range rs {
			if r.cmd != nil {
				return "http://" + r.http + "/v1/projects/default"
			}
		}
		t.Fatal("no process runs")
		return ""
	}
	code, region := getJSON(t, "POST", api()+"/regions", tok, `{"name":"r"}`)
	if code != 200 {
		t.Fatalf("POST a region: %d %v", code, region)
	}
	code, site := getJSON(t, "POST", api()+"/sites", tok, fmt.Sprintf(`{"name":"s","regionId":%q}`, region["resourceId"]))
	if code != 200 {
		t.Fatalf("POST a site: %d %v", code, site)
	}
	ca := strings.ReplaceAll(string(fleet.CertPEM), "\n", `\n`)
	ids := make([]string, len(fleet.BMCs))
	for i, b := range fleet.BMCs {
		// A host is registered as desired ON unless told otherwise, and
		// its BMC then gets a job for it: the machines off stay off.
		desired := "POWER_STATE_OFF"
		if i == 0 {
			desired = "POWER_STATE_ON"
		}
		code, h := getJSON(t, "POST", api()+"/compute/hosts", tok, fmt.Sprintf(`{"name":"k%d","uuid":"4c4c4544-0000-4000-8000-0000000000%02d","siteId":%q,"desiredPowerState":%q}`,
			i, i, site["resourceId"], desired))
		if code != 200 {
			t.Fatalf("POST host %d: %d %v", i, code, h)
		}
		ids[i] = h["resourceId"].(string)
		if code, body := getJSON(t, "PUT", api()+"/compute/hosts/"+ids[i]+"/bmc", tok, fmt.Sprintf(
			`{"protocol":"REDFISH","address":%q,"username":%q,"password":%q,"caCert":"%s"}`, b.URL, fleet.Username, fleet.Password, ca)); code != 200 {
			t.Fatalf("PUT host %d's BMC: %d %v", i, code, body)
		}
	}

	post := func(i int, state string) string {
		t.Helper()
		code, job := getJSON(t, "POST", api()+"/compute/hosts/"+ids[i]+"/bmc/jobs", tok, `{"desiredPowerState":"`+state+`"}`)
		if code != 200 {
			t.Fatalf("POST a %s job for host %d: %d %v", state, i, code, job)
		}
		return job["jobId"].(string)
	}
	// holder is the process whose worker holds the job under a live
	// lease (its holder starts with the process's replica ID).
	holder := func(jobID string) *replica {
		t.Helper()
		var h string
		var until int64
		if err := db.QueryRow("SELECT holder, lease_until FROM power_jobs WHERE id = $1", jobID).Scan(&h, &until); err != nil {
			t.Fatal(err)
		}
		if time.UnixMilli(until).Before(time.Now()) {
			return nil
		}
		for _, r := range rs {
			if r.cmd != nil && strings.HasPrefix(h, fmt.Sprintf("%s-%d/", r.name, r.starts)) {
				return r
			}
		}
		return nil
	}
	waitFor := func(what string, d time.Duration, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	received := func(i int, typ redfishsim.ResetType) int {
		n := 0
		for _, a := range fleet.BMCs[i].BMC.Actions() {
			if a.Type == typ {
				n++
			}
		}
		return n
	}
	// succeeded waits for the job to succeed and returns it.
	succeeded := func(i int, jobID string) map[string]any {
		t.Helper()
		var job map[string]any
		waitFor("host "+fmt.Sprint(i)+"'s job "+jobID+" SUCCEEDED", 2*time.Minute, func() bool {
			code, j := getJSON(t, "GET", api()+"/compute/hosts/"+ids[i]+"/bmc/jobs/"+jobID, tok, "")
			if code == 200 && (j["state"] == "FAILED" || j["state"] == "CANCELLED") {
				t.Fatalf("host %d's job: %v", i, j)
			}
			job = j
			if code == 200 && j["state"] == "SUCCEEDED" {
				return true
			}
			time.Sleep(100 * time.Millisecond)
			return false
		})
		return job
	}
	kill := func(r *replica, why string) {
		t.Helper()
		r.kill()
		t.Logf("SIGKILLed %s %s", r.name, why)
	}
	restart := func(r *replica) {
		t.Helper()
		r.start(t)
	}
	stepNote := func(job map[string]any) string {
		steps := job["steps"].([]any)
		n, _ := steps[len(steps)-1].(map[string]any)["note"].(string)
		return n
	}

	// The jobs of the registration (nothing to send: each machine is
	// already as desired) end first.
	for i, id := range ids {
		waitFor(fmt.Sprintf("host %d's first job ends", i), time.Minute, func() bool {
			code, body := getJSON(t, "GET", api()+"/compute/hosts/"+id+"/bmc/jobs", tok, "")
			list, _ := body["jobs"].([]any)
			if code != 200 || len(list) != 1 {
				time.Sleep(100 * time.Millisecond)
				return false
			}
			if st := list[0].(map[string]any)["state"]; st != "SUCCEEDED" {
				if st == "FAILED" || st == "CANCELLED" {
					t.Fatalf("host %d's first job: %v", i, list[0])
				}
				time.Sleep(100 * time.Millisecond)
				return false
			}
			return true
		})
		if n := len(fleet.BMCs[i].BMC.Actions()); n != 0 {
			t.Fatalf("host %d's BMC received %d actions at registration", i, n)
		}
	}

	// 1. A power cycle, its process killed once the BMC received it.
	cycle := post(0, "POWER_STATE_POWER_CYCLE")
	var worker *replica
	waitFor("the BMC receives the power cycle", time.Minute, func() bool {
		if received(0, redfishsim.PowerCycle) == 0 {
			return false
		}
		worker = holder(cycle)
		return true
	})
	if worker == nil {
		t.Fatal("the power cycle was received, but no live process holds its job")
	}
	if st, _ := fleet.BMCs[0].Machine.PowerState(t.Context()); st == redfishsim.PowerOn {
		t.Fatalf("the machine is on already after the cycle (%s): the kill would not be mid-job", st)
	}
	kill(worker, "after the BMC received the power cycle, before the machine was on")
	job := succeeded(0, cycle)
	if n := received(0, redfishsim.PowerCycle); n != 1 {
		t.Errorf("the BMC received %d power cycles, want 1", n)
	}
	if job["attempts"].(float64) < 2 || !strings.Contains(stepNote(job), "recorded as sent before a take-over") {
		t.Errorf("the power cycle's job: %v, want taken over and confirmed from the BMC's state", job)
	}
	t.Logf("power cycle: %v attempts, %q", job["attempts"], stepNote(job))
	restart(worker)

	// 2. A power-on killed before it is sent: host 1's power-on holds the
	// site's one slot for 20 s from its send; host 2's waits for it.
	first := post(1, "POWER_STATE_ON")
	waitFor("host 1's BMC receives its power-on", time.Minute, func() bool { return received(1, redfishsim.ResetOn) > 0 })
	succeeded(1, first)
	second := post(2, "POWER_STATE_ON")
	waitFor("a process holds host 2's job", time.Minute, func() bool { worker = holder(second); return worker != nil })
	time.Sleep(time.Second) // it waits for the slot
	if n := len(fleet.BMCs[2].BMC.Actions()); n != 0 {
		t.Fatalf("host 2's BMC received %d actions before the slot was free: %+v; host 1's: %+v", n, fleet.BMCs[2].BMC.Actions(), fleet.BMCs[1].BMC.Actions())
	}
	kill(worker, "while host 2's power-on waited for its site's slot")
	job = succeeded(2, second)
	if n := received(2, redfishsim.ResetOn); n != 1 {
		t.Errorf("host 2's BMC received %d power-ons, want 1", n)
	}
	if job["attempts"].(float64) < 2 {
		t.Errorf("host 2's job: %v, want taken over", job)
	}
	one, two := fleet.BMCs[1].BMC.Actions(), fleet.BMCs[2].BMC.Actions()
	if gap := two[0].At.Sub(one[0].At); gap < 20*time.Second {
		t.Errorf("host 2's power-on %s after host 1's, within the site's window of 20 s", gap)
	}
	t.Logf("power-on killed before its send: %v attempts, sent once, %s after the slot's previous power-on",
		job["attempts"], two[0].At.Sub(one[0].At).Round(time.Millisecond))
	restart(worker)

	// 3. A power-on killed after the BMC received it: confirmed from the
	// BMC's state after the take-over, not sent again.
	third := post(3, "POWER_STATE_ON")
	waitFor("host 3's BMC receives its power-on", time.Minute, func() bool {
		if received(3, redfishsim.ResetOn) == 0 {
			return false
		}
		worker = holder(third)
		return true
	})
	if worker == nil {
		t.Fatal("host 3's power-on was received, but no live process holds its job")
	}
	kill(worker, "after host 3's BMC received its power-on, before the machine was on")
	job = succeeded(3, third)
	if n := received(3, redfishsim.ResetOn); n != 1 {
		t.Errorf("host 3's BMC received %d power-ons, want 1", n)
	}
	if !strings.Contains(stepNote(job), "recorded as sent before a take-over") {
		t.Errorf("host 3's job: %v, want confirmed from the BMC's state after the take-over", job)
	}
	t.Logf("power-on killed after its send: %v attempts, %q", job["attempts"], stepNote(job))
	for i, id := range ids {
		if code, h := getJSON(t, "GET", api()+"/compute/hosts/"+id, tok, ""); code != 200 || (h["currentPowerState"] != "POWER_STATE_ON" && h["currentPowerState"] != "POWER_STATE_POWER_CYCLE") {
			t.Errorf("host %d: %d %v", i, code, h["currentPowerState"])
		}
	}
}
