package hostmgr_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// A heartbeat makes the host "Running"; more heartbeats write nothing; when
// they stop for the timeout the host is "No Connection" with the time it
// was last heard from; the next heartbeat makes it "Running" again.
func TestLiveness(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.wantStatus(h.ResourceID, "Not Connected", eim.StatusUnspecified)
		resp := e.beat(e.svc, h, nil)
		if resp.IntervalSeconds != 10 || resp.HardwareIntervalSeconds != 3600 || resp.Action != nil {
			t.Fatalf("answer %v, want interval 10, hardware interval 3600, no action", resp)
		}
		ran := e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		if ran.HostStatusTimestamp != uint64(e.clock.Now().Unix()) {
			t.Errorf("status timestamp %d, want %d", ran.HostStatusTimestamp, e.clock.Now().Unix())
		}

		// Steady heartbeats: no write at all, and never flagged.
		e.beat(e.svc, h, nil) // the first write's feed event is not watched here; a second beat settles
		rev := e.revision()
		for range 10 {
			e.clock.Add(10 * time.Second)
			e.beat(e.svc, h, nil)
			e.svc.CheckTimeouts(e.ctx)
		}
		if got := e.revision(); got != rev {
			t.Errorf("10 heartbeats of a running host wrote %d events, want none", got-rev)
		}
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)

		// Silence: not yet at the timeout, then past it.
		last := e.clock.Now()
		e.clock.Add(29 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		e.clock.Add(2 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		lost := e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
		if lost.HostStatusTimestamp != uint64(last.Unix()) {
			t.Errorf("No Connection timestamp %d, want the last heartbeat %d", lost.HostStatusTimestamp, last.Unix())
		}
		// Checking again writes nothing.
		rev = e.revision()
		e.clock.Add(time.Minute)
		e.svc.CheckTimeouts(e.ctx)
		if got := e.revision(); got != rev {
			t.Errorf("a second check wrote %d events", got-rev)
		}

		e.beat(e.svc, h, nil)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
	})
}

// A node that says it is unhealthy shows an error status; healthy again,
// it is "Running". DEGRADED is still running.
func TestHealth(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{State: hostv1.Health_STATE_DEGRADED, Detail: "fan slow"}})
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{State: hostv1.Health_STATE_UNHEALTHY, Detail: "/var is full"}})
		e.wantStatus(h.ResourceID, "Error: node unhealthy: /var is full", eim.StatusError)
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{AgentHealth: &hostv1.Health{State: hostv1.Health_STATE_UNHEALTHY}})
		e.wantStatus(h.ResourceID, "Error: agent unhealthy", eim.StatusError)
		// An unhealthy node that goes silent is lost too.
		e.clock.Add(31 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
		e.beat(e.svc, h, &hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}})
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
	})
}

// Statuses of other modules are not overwritten by heartbeats, and a host
// showing one is not flagged.
func TestOtherModulesStatus(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.beat(e.svc, h, nil)
		e.edit(h.ResourceID, func(h *eim.Host) { h.HostStatus, h.HostStatusIndicator = "Invalidating", eim.StatusInProgress })
		e.beat(e.svc, h, nil)
		e.wantStatus(h.ResourceID, "Invalidating", eim.StatusInProgress)
		e.clock.Add(time.Hour)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Invalidating", eim.StatusInProgress)
	})
}

// A project's heartbeat settings reach its nodes and set its timeout; an
// interval alone keeps the default number of misses.
func TestProjectHeartbeatSettings(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		iv := uint32(30)
		if _, _, err := e.inv.UpdateProjectSettings(e.ctx, e.proj, inventory.SettingsChange{HeartbeatIntervalSeconds: &iv}); err != nil {
			t.Fatal(err)
		}
		h := e.host(nil)
		if resp := e.beat(e.svc, h, nil); resp.IntervalSeconds != 30 {
			t.Fatalf("interval %d, want 30", resp.IntervalSeconds)
		}
		e.clock.Add(89 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		e.clock.Add(2 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)

		// A timeout below two intervals is refused, naming the field.
		to := uint32(40)
		_, _, err := e.inv.UpdateProjectSettings(e.ctx, e.proj, inventory.SettingsChange{HeartbeatTimeoutSeconds: &to})
		if eim.ErrorCode(err) != eim.EINVALID || !strings.Contains(err.Error(), "heartbeatTimeoutSeconds") {
			t.Fatalf("timeout 40 s with interval 30 s: got %v, want EINVALID naming heartbeatTimeoutSeconds", err)
		}
	})
}

// Report-in counts as a heartbeat (agents from before Heartbeat only
// report in) and answers the project's interval.
func TestReportInIsAHeartbeat(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.edit(h.ResourceID, func(h *eim.Host) { h.HostStatus, h.HostStatusIndicator = "Running", eim.StatusIdle })
		resp, err := e.svc.ReportIn(e.node(h), connect.NewRequest(&hostv1.ReportInRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Msg.HeartbeatIntervalSeconds != 10 || e.reportIns.Load() != 1 {
			t.Fatalf("interval %d after %d report-ins, want 10 after 1", resp.Msg.HeartbeatIntervalSeconds, e.reportIns.Load())
		}
		e.clock.Add(31 * time.Second)
		e.svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
	})
}

// Bad heartbeats are refused, naming the field; a call without a node is
// unauthenticated.
func TestHeartbeatValidation(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		for _, tc := range []struct {
			m    *hostv1.HeartbeatRequest
			want string
		}{
			{&hostv1.HeartbeatRequest{AgentVersion: strings.Repeat("v", 1025)}, "agent_version"},
			{&hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{Detail: "\xff"}}, "node_health.detail"},
			{&hostv1.HeartbeatRequest{NodeHealth: &hostv1.Health{State: 9}}, "node_health.state"},
			{&hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{State: hostv1.ActionResult_STATE_STARTED}}, "action_result.id"},
			{&hostv1.HeartbeatRequest{ActionResult: &hostv1.ActionResult{Id: "x"}}, "action_result.state"},
		} {
			_, err := e.svc.Heartbeat(e.node(h), connect.NewRequest(tc.m))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: got %v, want InvalidArgument naming %s", tc.m, err, tc.want)
			}
		}
		_, err := e.svc.Heartbeat(e.ctx, connect.NewRequest(&hostv1.HeartbeatRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Errorf("no node: got %v, want Unauthenticated", err)
		}
		e.wantStatus(h.ResourceID, "Not Connected", eim.StatusUnspecified)
	})
}

// A restarted server restores liveness from the store: a host heard from
// before is not flagged for the server's own outage, but is flagged when it
// stays silent a timeout after the restart. A host changed while the
// server was down is read afresh.
func TestRestart(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		quiet, lively := e.host(nil), e.host(nil)
		lastHeard := e.clock.Now()
		e.beat(e.svc, quiet, nil)
		e.beat(e.svc, lively, nil)
		e.svc.Flush(e.ctx)

		// Down for ten minutes.
		e.clock.Add(10 * time.Minute)
		svc := hostmgr.New(e.opts)
		e.start(svc)
		waitFor(t, func() bool { return svc.Restored() })
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(quiet.ResourceID, "Running", eim.StatusIdle)

		e.clock.Add(20 * time.Second)
		e.beat(svc, lively, nil)
		e.clock.Add(11 * time.Second)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(quiet.ResourceID, "No Connection", eim.StatusError)
		e.wantStatus(lively.ResourceID, "Running", eim.StatusIdle)
		// The status dates the node's silence, not the restart.
		if got, want := e.getHost(quiet.ResourceID).HostStatusTimestamp, uint64(lastHeard.Unix()); got != want {
			t.Errorf("No Connection since %d, want %d (when the node was last heard from)", got, want)
		}
	})
}

// The feed keeps the tracker honest: a host whose status another writer
// changed is read again at its next heartbeat, and a deleted host is
// forgotten.
func TestFeed(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.start(e.svc)
		waitFor(t, func() bool { return e.svc.Restored() })
		// PostgreSQL's database is shared by the tests: others' hosts
		// are restored too.
		before := e.svc.Tracked()
		h := e.host(nil)
		e.beat(e.svc, h, nil)
		e.beat(e.svc, h, nil)
		e.edit(h.ResourceID, func(h *eim.Host) { h.HostStatus, h.HostStatusIndicator = "No Connection", eim.StatusError })
		waitFor(t, func() bool {
			e.beat(e.svc, h, nil)
			return e.getHost(h.ResourceID).HostStatus == "Running"
		})
		if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error { return tx.Delete(e.ctx, eim.KindHost, h.ResourceID) }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return e.svc.Tracked() == before })
		_, err := e.svc.Heartbeat(e.node(h), connect.NewRequest(&hostv1.HeartbeatRequest{}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("heartbeat of a deleted host: got %v, want NotFound", err)
		}
	})
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A node whose instance is updating its OS may go silent (the update
// reboots it) for the update timeout after its last update report before
// it is "No Connection"; a heartbeat in between ends the hold.
func TestUpdatingNodeNotLost(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		osr, err := e.inv.Create(e.ctx, e.proj, &eim.OS{Name: "edge-os", Sha256: strings.Repeat("ab", 32), ImageURL: "https://example.com/os.img",
			ProfileName: "edge-os", OsType: "OS_TYPE_IMMUTABLE", SecurityFeature: "SECURITY_FEATURE_NONE", Architecture: "x86_64"})
		if err != nil {
			t.Fatalf("create OS: %v", err)
		}
		inst, err := e.inv.Create(e.ctx, e.proj, &eim.Instance{Name: "i", HostID: h.ResourceID, OSID: osr.Base().ResourceID})
		if err != nil {
			t.Fatalf("create instance: %v", err)
		}
		setUpdate := func(ind eim.StatusIndication) {
			err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
				r, err := tx.Get(e.ctx, eim.KindInstance, inst.Base().ResourceID)
				if err != nil {
					return err
				}
				in := r.(*eim.Instance)
				in.UpdateStatus, in.UpdateStatusIndicator, in.UpdateStatusTimestamp = "Updating", ind, uint64(e.clock.Now().Unix())
				return tx.Update(e.ctx, in)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		svc := hostmgr.New(func() hostmgr.Options { o := e.opts; o.UpdateTimeout = time.Hour; return o }())
		e.beat(svc, h, nil)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		setUpdate(eim.StatusInProgress)

		// Silent well past the heartbeat timeout: held.
		e.clock.Add(45 * time.Minute)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		// Past the update timeout: lost.
		e.clock.Add(16 * time.Minute)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)

		// Back; a heartbeat ends any hold, and without an update under
		// way silence is lost after the usual timeout.
		e.beat(svc, h, nil)
		e.wantStatus(h.ResourceID, "Running", eim.StatusIdle)
		setUpdate(eim.StatusIdle)
		e.clock.Add(31 * time.Second)
		svc.CheckTimeouts(e.ctx)
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)
	})
}

// Last-seen times are saved when a host is first heard from and then about
// once a timeout, as the checker passes the host: not at every heartbeat.
func TestLastSeenSaves(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		stored := func() time.Time {
			t.Helper()
			all, err := e.store.LastSeen(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, ls := range all {
				if ls.HostID == h.ResourceID {
					return ls.At
				}
			}
			return time.Time{}
		}
		first := e.clock.Now()
		e.beat(e.svc, h, nil)
		e.svc.Flush(e.ctx)
		if got := stored(); !got.Equal(first.Truncate(time.Millisecond)) {
			t.Fatalf("after the first heartbeat the store has %v, want %v", got, first)
		}
		// Heartbeats every 10 s (timeout 30 s) over a minute, the checker
		// and the flusher running after each.
		var last time.Time
		for range 6 {
			e.clock.Add(10 * time.Second)
			last = e.clock.Now()
			e.beat(e.svc, h, nil)
			e.svc.CheckTimeouts(e.ctx)
			e.svc.Flush(e.ctx)
			if got := stored(); got.Before(last.Add(-30 * time.Second)) {
				t.Fatalf("at %v the store has %v: more than a timeout old", last, got)
			}
		}
		saves := 0
		prev := stored()
		// Count the distinct times the store held over another minute.
		for range 6 {
			e.clock.Add(10 * time.Second)
			e.beat(e.svc, h, nil)
			e.svc.CheckTimeouts(e.ctx)
			e.svc.Flush(e.ctx)
			if got := stored(); !got.Equal(prev) {
				saves++
				prev = got
			}
		}
		if saves == 0 || saves > 3 {
			t.Fatalf("%d saves in six heartbeats over a minute (timeout 30 s): want one to three", saves)
		}
	})
}

// The host module's writes are in the audit log as who made them decided
// them: the node's heartbeat by the node, the checker's flag by the
// module. The webhooks' events come from those records (host.connection_lost
// is a hostStatus that became "No Connection").
func TestLivenessAudited(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		e.beat(e.svc, h, nil)
		e.clock.Add(31 * time.Second)
		e.svc.CheckTimeouts(eim.WithActor(e.ctx, eim.ModuleActor("host")))
		e.wantStatus(h.ResourceID, "No Connection", eim.StatusError)

		recs, _, err := e.store.Audit(e.ctx, e.proj, eim.AuditQuery{Filter: `kind="host" AND action="UPDATED"`})
		if err != nil {
			t.Fatal(err)
		}
		type change struct{ principal, old, new string }
		var got []change
		for i := len(recs) - 1; i >= 0; i-- { // oldest first
			if c, ok := recs[i].Changes["hostStatus"]; ok && recs[i].ResourceID == h.ResourceID {
				got = append(got, change{recs[i].Principal, string(c.Old), string(c.New)})
			}
		}
		want := []change{
			{"node:" + h.ResourceID, `"Not Connected"`, `"Running"`},
			{"module:host", `"Running"`, `"No Connection"`},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("hostStatus audit records: got %v, want %v", got, want)
		}
	})
}
