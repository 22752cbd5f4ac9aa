package oob_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// setPolicies sets the power policy of project a, of a site of hostA
// (created for it when site is not "-") and of hostA's BMC.
func (j *jobs) setPolicies(t *testing.T, project, site, bmc string) {
	t.Helper()
	ctx := t.Context()
	p, err := j.store.FindProject(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	p.Settings.PowerPolicy = eim.PowerPolicy(project)
	if err := j.store.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if site != "-" {
		s := &eim.Site{Name: "s", PowerPolicy: eim.PowerPolicy(site)}
		if err := j.store.Update(ctx, "a", func(tx eim.Tx) error {
			if err := tx.Create(ctx, s); err != nil {
				return err
			}
			return tx.UpdateFields(ctx, &eim.Host{Meta: eim.Meta{ResourceID: j.hostA}, SiteID: s.ResourceID}, "siteId")
		}); err != nil {
			t.Fatal(err)
		}
	}
	body := map[string]any{"protocol": "IPMI", "address": "127.0.0.1:9623", "username": "admin", "powerPolicy": bmc}
	if code, out := j.do("admin", "PUT", bmcPath("a", j.hostA), body); code != 200 {
		t.Fatalf("PUT bmc: %d %s", code, out)
	}
}

// TestPowerPolicyLevels: a host's policy is its BMC's, else its site's,
// else its project's, else REPORT.
func TestPowerPolicyLevels(t *testing.T) {
	for _, tc := range []struct{ project, site, bmc, want string }{
		{"", "-", "", "REPORT"},
		{"ALWAYS_ON", "-", "", "ALWAYS_ON"},
		{"ALWAYS_ON", "", "", "ALWAYS_ON"},
		{"ALWAYS_ON", "REPORT", "", "REPORT"},
		{"", "ALWAYS_ON", "", "ALWAYS_ON"},
		{"ALWAYS_ON", "ALWAYS_ON", "REPORT", "REPORT"},
		{"", "REPORT", "ALWAYS_ON", "ALWAYS_ON"},
	} {
		t.Run(tc.project+"/"+tc.site+"/"+tc.bmc, func(t *testing.T) {
			j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), newFake(oob.PowerOn), nil)
			j.setPolicies(t, tc.project, tc.site, tc.bmc)
			b, err := j.store.GetBMC(t.Context(), "a", j.hostA)
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.svc.Policy(t.Context(), b, j.host(t))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("policy of project %q, site %q, BMC %q: got %s, want %s", tc.project, tc.site, tc.bmc, got, tc.want)
			}
		})
	}
}

// TestPowerPolicyBadValues: a bad powerPolicy is a 400 naming the field.
func TestPowerPolicyBadValues(t *testing.T) {
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), newFake(oob.PowerOn), nil)
	j.want("admin", "PUT", bmcPath("a", j.hostA), map[string]any{"protocol": "IPMI", "address": "127.0.0.1:9623", "username": "admin", "powerPolicy": "SOMETIMES"},
		400, "powerPolicy", "SOMETIMES")
	for _, bad := range []eim.PowerPolicy{"ON", "always_on"} {
		err := eim.Validate(&eim.Site{Name: "s", PowerPolicy: bad})
		if eim.ErrorCode(err) != eim.EINVALID || !strings.Contains(err.Error(), "powerPolicy") {
			t.Fatalf("site with powerPolicy %q: got %v, want EINVALID naming powerPolicy", bad, err)
		}
	}
	if err := eim.Validate(&eim.Site{Name: "s", PowerPolicy: eim.PowerPolicyAlwaysOn}); err != nil {
		t.Fatalf("site with powerPolicy ALWAYS_ON: %v", err)
	}
}

// jobsOf returns hostA's jobs, newest first.
func (j *jobs) jobsOf(t *testing.T) []*eim.PowerJob {
	t.Helper()
	list, _, err := j.store.ListPowerJobs(t.Context(), "a", j.hostA, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestPowerPolicyRestore: an ALWAYS_ON host found off by the poll is
// powered on again by a job that says why, once per back-off; a REPORT
// host is only shown off.
func TestPowerPolicyRestore(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, func(o *oob.Options) { o.RestoreBackoff = time.Hour })
		run(t, j.svc.Work)
		j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobSucceeded)
		off := func() {
			f.mu.Lock()
			f.state = oob.PowerOff
			f.mu.Unlock()
			if err := j.svc.PollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
		}

		// REPORT (the default): shown, not corrected.
		off()
		if n := len(j.jobsOf(t)); n != 1 {
			t.Fatalf("REPORT: got %d jobs, want the first only", n)
		}
		if h := j.host(t); h.CurrentPowerState != eim.PowerStateOff || h.PowerStatus != oob.MismatchText {
			t.Fatalf("REPORT: got %s %q, want OFF and the mismatch", h.CurrentPowerState, h.PowerStatus)
		}

		// ALWAYS_ON in the project's settings: powered on again.
		j.setPolicies(t, "ALWAYS_ON", "-", "")
		if err := j.svc.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		list := j.jobsOf(t)
		if len(list) != 2 {
			t.Fatalf("ALWAYS_ON: got %d jobs, want a second one", len(list))
		}
		restore := list[0]
		if restore.Desired != eim.PowerStateOn || restore.Reason != "restored by power policy ALWAYS_ON: the BMC reported OFF" {
			t.Fatalf("restore job: got %s %q, want ON with the policy's reason", restore.Desired, restore.Reason)
		}
		j.wait(t, restore.ID, eim.PowerJobSucceeded)
		if h := j.host(t); h.CurrentPowerState != eim.PowerStateOn || h.PowerStatus != "Powered on" {
			t.Fatalf("after the restore: got %s %q, want ON, Powered on", h.CurrentPowerState, h.PowerStatus)
		}
		if !strings.Contains(j.logs.String(), "power policy ALWAYS_ON: powering the host on again") {
			t.Fatal("the restore was not logged")
		}
		recs, _, err := j.store.Audit(t.Context(), "a", eim.AuditQuery{Filter: `kind="bmcjob" AND action="CREATED"`})
		if err != nil || len(recs) == 0 || !strings.Contains(string(recs[0].Changes["reason"].New), "restored by power policy") {
			t.Fatalf("audit of the restore: got %v (%v), want its creation with the reason", recs, err)
		}

		// Off again within the back-off: shown, not powered on again.
		off()
		if n := len(j.jobsOf(t)); n != 2 {
			t.Fatalf("within the back-off: got %d jobs, want 2", n)
		}
		if h := j.host(t); h.CurrentPowerState != eim.PowerStateOff || h.PowerStatus != oob.MismatchText {
			t.Fatalf("within the back-off: got %s %q, want OFF and the mismatch", h.CurrentPowerState, h.PowerStatus)
		}
		if !strings.Contains(j.logs.String(), "not powered on before its back-off ends") {
			t.Fatal("the held-back restore was not logged")
		}
		// The request found the machine on (nothing sent): one power-on,
		// the restore's.
		if sends := f.sent(oob.ActionOn); sends != 1 {
			t.Fatalf("power-ons sent: got %d, want 1 (the restore)", sends)
		}
	})
}

// TestPowerPolicyBackoffEnds: after the back-off a host found off again
// is powered on again.
func TestPowerPolicyBackoffEnds(t *testing.T) {
	f := newFake(oob.PowerOn)
	j := newJobs(t, newEnv(t, "sqlite", t.TempDir()+"/eim.db"), f, func(o *oob.Options) { o.RestoreBackoff = 200 * time.Millisecond })
	run(t, j.svc.Work)
	j.setPolicies(t, "", "ALWAYS_ON", "")
	j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobSucceeded)
	for i := 1; i <= 2; i++ {
		f.mu.Lock()
		f.state = oob.PowerOff
		f.mu.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		for len(j.jobsOf(t)) < 1+i {
			if time.Now().After(deadline) {
				t.Fatalf("restore %d: no job after the back-off", i)
			}
			if err := j.svc.PollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond) // the poll's pace
		}
		j.wait(t, j.jobsOf(t)[0].ID, eim.PowerJobSucceeded)
	}
}

// TestPowerPolicyNoConnection: a host going "No Connection" has its BMC
// read at once (not at the next poll), and is powered on again when off
// under ALWAYS_ON; one asked to be OFF is left alone.
func TestPowerPolicyNoConnection(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, nil)
		j.setPolicies(t, "", "-", "ALWAYS_ON")
		run(t, j.svc.Work)
		j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON"}), eim.PowerJobSucceeded)
		run(t, j.svc.Follow) // polls every hour: only the lost connection reads the BMC
		f.mu.Lock()
		f.state = oob.PowerOff
		f.mu.Unlock()
		if err := j.store.Update(t.Context(), "a", func(tx eim.Tx) error {
			return tx.UpdateFields(t.Context(), &eim.Host{Meta: eim.Meta{ResourceID: j.hostA}, HostStatus: "No Connection"}, "hostStatus")
		}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for len(j.jobsOf(t)) < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("no restore after the host lost its connection; log:\n%s", j.logs.String())
			}
			time.Sleep(20 * time.Millisecond) // a poll's pace
		}
		got := j.wait(t, j.jobsOf(t)[0].ID, eim.PowerJobSucceeded)
		if got.Reason != "restored by power policy ALWAYS_ON: the BMC reported OFF" {
			t.Fatalf("restore job's reason: got %q", got.Reason)
		}
		if !strings.Contains(j.logs.String(), "host lost its connection: reading its BMC") {
			t.Fatal("the BMC read for the lost connection was not logged")
		}
	})
}

// TestCredentialsNeverLeak: whatever the jobs do — succeed, fail on a BMC
// that does not answer, get cancelled, restore a host — the BMC's
// password is in no log line and no audit record (which the webhooks'
// events are made from).
func TestCredentialsNeverLeak(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOff)
		j := newJobs(t, e, f, func(o *oob.Options) { o.JobTimeout = 2 * time.Second })
		j.setPolicies(t, "ALWAYS_ON", "-", "")
		const pw = "ipmi-pass-1" // the password newJobs gives the BMC
		run(t, j.svc.Work)
		j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_ON", "boot": "PXE", "bootOnce": true}), eim.PowerJobSucceeded)
		f.mu.Lock()
		f.state = oob.PowerOff
		f.mu.Unlock()
		if err := j.svc.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		j.wait(t, j.jobsOf(t)[0].ID, eim.PowerJobSucceeded)
		f.mu.Lock()
		f.unreachable = true
		f.mu.Unlock()
		j.wait(t, j.post(t, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}), eim.PowerJobFailed)
		if err := j.svc.PollOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		recs, _, err := j.store.Audit(t.Context(), "a", eim.AuditQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var jobRecs int
		for _, r := range recs {
			b, _ := json.Marshal(r)
			if strings.Contains(string(b), pw) {
				t.Errorf("audit record %d (%s %s) holds the password: %s", r.Seq, r.Kind, r.Action, b)
			}
			if r.Kind == eim.KindPowerJob {
				jobRecs++
			}
		}
		if jobRecs < 6 {
			t.Errorf("got %d job records, want the creation and end of 3 jobs at least", jobRecs)
		}
		if strings.Contains(j.logs.String(), pw) {
			t.Errorf("the log holds the password:\n%s", j.logs.String())
		}
		if !strings.Contains(j.logs.String(), "unreachable") {
			t.Errorf("the log shows nothing of the failures it was checked for:\n%s", j.logs.String())
		}
	})
}
