package webhooks_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/webhooks"
)

// TestPowerEvents: the oob module's events — a power job's creation and
// its end (succeeded, failed, cancelled), a host's power mismatch — reach
// a receiver, each job's in order with the job as it is in its body, and
// no body holds the BMC's credentials.
func TestPowerEvents(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		const p, secret = "acme", "0123456789abcdef0123"
		st := openProject(t, ctx, dsn, p, "2a9d3c9e-8c4f-4d5e-9a6b-000000000002")
		inv := inventory.New(st, inventory.Options{})
		r := newReceiver(t, secret, 0, false)
		if _, _, err := inv.CreateWebhook(ctx, p, inventory.WebhookInput{URL: r.srv.URL, Secret: secret,
			EventTypes: []string{eim.EventHostPowerMismatch, eim.EventPowerJobCreated, eim.EventPowerJobSucceeded, eim.EventPowerJobFailed, eim.EventPowerJobCancelled}}); err != nil {
			t.Fatal(err)
		}
		svc := webhooks.New(webhooks.Options{Store: st, Poll: 50 * time.Millisecond})
		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Follow(ctx) })
		wg.Go(func() { _ = svc.Deliver(ctx) })
		defer func() { cancel(); wg.Wait() }()

		h := &eim.Host{Name: "h"}
		if err := st.Update(ctx, p, func(tx eim.Tx) error { return tx.Create(ctx, h) }); err != nil {
			t.Fatal(err)
		}
		const sealed = "SEALED-BMC-PASSWORD-0123"
		if err := st.PutBMC(ctx, &eim.BMC{Project: p, HostID: h.ResourceID, Protocol: eim.BMCIPMI, Address: "127.0.0.1:623", Username: "admin", SealedPassword: sealed}); err != nil {
			t.Fatal(err)
		}
		job := func(d eim.PowerState, reason string) *eim.PowerJob {
			t.Helper()
			j := &eim.PowerJob{Project: p, HostID: h.ResourceID, Desired: d, Reason: reason, Deadline: eim.NewTime(time.Now().Add(time.Hour)),
				Steps: []eim.PowerStep{{Kind: eim.PowerStepPower, Action: "ON"}}}
			if _, err := st.RequestPowerJob(ctx, eim.PowerJobRequest{Job: j}); err != nil {
				t.Fatal(err)
			}
			return j
		}
		end := func(j *eim.PowerJob, st2 eim.PowerJobState, why string) {
			t.Helper()
			c, err := st.ClaimPowerJob(ctx, "w", time.Hour)
			if err != nil || c == nil || c.ID != j.ID {
				t.Fatalf("claim: got %+v, %v, want %s", c, err, j.ID)
			}
			c.State, c.LastError, c.EndedAt = st2, why, eim.NewTime(time.Now())
			if err := st.SavePowerJob(ctx, c, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		ok := job(eim.PowerStateOn, "restored by power policy ALWAYS_ON: the BMC reported OFF")
		end(ok, eim.PowerJobSucceeded, "")
		cancelled := job(eim.PowerStateOff, "")
		if _, err := st.CancelPowerJob(ctx, p, h.ResourceID, cancelled.ID, "cancelled by user:alice"); err != nil {
			t.Fatal(err)
		}
		failed := job(eim.PowerStateReset, "")
		end(failed, eim.PowerJobFailed, "the BMC refused the login")
		h.PowerStatus, h.PowerStatusIndicator = eim.PowerStatusMismatch, eim.StatusError
		if err := st.Update(ctx, p, func(tx eim.Tx) error { return tx.UpdateFields(ctx, h, "powerStatus", "powerStatusIndicator") }); err != nil {
			t.Fatal(err)
		}

		want := map[string][]string{
			ok.ID:        {eim.EventPowerJobCreated, eim.EventPowerJobSucceeded},
			cancelled.ID: {eim.EventPowerJobCreated, eim.EventPowerJobCancelled},
			failed.ID:    {eim.EventPowerJobCreated, eim.EventPowerJobFailed},
			h.ResourceID: {eim.EventHostPowerMismatch},
		}
		eventually(t, 20*time.Second, "the 7 events delivered", func() bool { got, _ := r.got(); return len(got) >= 7 })
		got, errs := r.got()
		if len(errs) > 0 {
			t.Fatalf("receiver: %v", errs)
		}
		per := map[string][]string{}
		for _, d := range got {
			per[d.resourceID] = append(per[d.resourceID], d.eventType)
			if strings.Contains(d.body, sealed) || strings.Contains(strings.ToLower(d.body), "password") {
				t.Errorf("%s of %s: the body holds the BMC's credentials: %s", d.eventType, d.resourceID, d.body)
			}
			var pl struct {
				Kind     eim.Kind        `json:"kind"`
				Resource json.RawMessage `json:"resource"`
			}
			if err := json.Unmarshal([]byte(d.body), &pl); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(d.eventType, "power_job.") {
				var v eim.PowerJobView
				if err := json.Unmarshal(pl.Resource, &v); err != nil || pl.Kind != eim.KindPowerJob || v.JobID != d.resourceID || v.HostID != h.ResourceID {
					t.Errorf("%s: got kind %s, resource %s (%v), want the job", d.eventType, pl.Kind, pl.Resource, err)
				}
				if d.resourceID == ok.ID && v.Reason != ok.Reason {
					t.Errorf("%s: reason %q, want %q", d.eventType, v.Reason, ok.Reason)
				}
			}
		}
		for id, w := range want {
			if !slices.Equal(per[id], w) {
				t.Errorf("events of %s: got %v, want %v", id, per[id], w)
			}
		}
		if len(got) != 7 {
			t.Errorf("got %d events, want 7", len(got))
		}
	})
}
