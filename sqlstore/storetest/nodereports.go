package storetest

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// updatesOf returns, per resource of project, its update audit records
// (principal and changes), oldest first, and how many update events the
// feed holds of it.
func updatesOf(t *testing.T, s eim.Store, project string) (map[string][]string, map[string]int) {
	t.Helper()
	recs, _ := audit(t, s, project, eim.AuditQuery{Filter: `action="UPDATED"`})
	out := map[string][]string{}
	for i := len(recs) - 1; i >= 0; i-- { // newest first
		r := recs[i]
		out[r.ResourceID] = append(out[r.ResourceID], r.Principal+" "+string(r.Kind)+" "+changesJSON(r.Changes))
	}
	evs, err := s.Events(ctx(t), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, ev := range evs {
		if ev.Project == project && ev.Op == eim.OpUpdated {
			n[ev.ID]++
		}
	}
	return out, n
}

// sameWrites fails unless resource typed (of project tp) has the same
// update audit records and events as generic (of gp) has.
func sameWrites(t *testing.T, s eim.Store, tp, typed, gp, generic string) {
	t.Helper()
	ta, te := updatesOf(t, s, tp)
	ga, ge := ta, te
	if gp != tp {
		ga, ge = updatesOf(t, s, gp)
	}
	if len(ta[typed]) == 0 || !reflect.DeepEqual(ta[typed], ga[generic]) {
		t.Errorf("audit records of %s: got\n%v\nwant as the field writes':\n%v", typed, ta[typed], ga[generic])
	}
	if te[typed] != ge[generic] {
		t.Errorf("update events of %s: got %d, want %d as the field writes'", typed, te[typed], ge[generic])
	}
}

// testNodeReports: the provisioning module's typed operations read a
// node's host, instance and workflow state as a few columns (the
// workflow whole for action reports), write only what the decision
// changes, through the runner given, and record it as the inventory's
// field writes do (the same audit records, the same events).
func testNodeReports(t *testing.T, s eim.Store) {
	p := project(t, s)
	run := &countingRunner{s: s}
	nr := s.NodeReports(run)
	prov := eim.WithActor(ctx(t), eim.ModuleActor("provisioning"))
	hostWith := func(name string, withInstance bool) (*eim.Host, *eim.Instance, *eim.Workflow) {
		h := create(t, s, p, &eim.Host{Name: name, HostStatus: "Rebooting", HostStatusIndicator: eim.StatusInProgress, HostStatusTimestamp: 100,
			Hostname: "old", HardwareDigest: "sha256:" + strings.Repeat("a", 64)}).(*eim.Host)
		if !withInstance {
			return h, nil, nil
		}
		in := create(t, s, p, &eim.Instance{Name: name, HostID: h.ResourceID, DesiredState: eim.InstanceStateRunning,
			ProvisioningStatus: "Provisioned", ProvisioningStatusIndicator: eim.StatusIdle, ProvisioningStatusTimestamp: 90}).(*eim.Instance)
		wf := create(t, s, p, &eim.Workflow{InstanceID: in.ResourceID, HostID: h.ResourceID, Attempt: 1, State: eim.WorkflowSucceeded,
			Actions: []eim.WorkflowAction{{Name: "erase", Type: eim.ActionEraseDisk, State: eim.ActionSucceeded},
				{Name: "reboot", Type: eim.ActionReboot, State: eim.ActionPending}},
			Log: []eim.WorkflowLogEntry{{Seq: 1, Action: -1, Message: "created"}}}).(*eim.Workflow)
		return h, in, wf
	}

	// A host without an instance.
	bare, _, _ := hostWith("bare", false)
	st, err := nr.NodeState(ctx(t), p, bare.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	want := eim.NodeState{HostID: bare.ResourceID, Project: p, Hostname: "old",
		HostStatus: eim.StatusValue{Text: "Rebooting", Indicator: eim.StatusInProgress, Timestamp: 100}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("NodeState of a host without an instance: got %+v, want %+v", st, want)
	}

	// With its instance and workflow: the workflow's state only.
	typed, tin, twf := hostWith("typed", true)
	generic, gin, _ := hostWith("generic", true)
	st, err = nr.NodeState(ctx(t), p, typed.ResourceID)
	if err != nil {
		t.Fatal(err)
	}
	wantIn := &eim.NodeInstance{ID: tin.ResourceID, DesiredState: eim.InstanceStateRunning, CurrentState: tin.CurrentState,
		Status:       eim.StatusValue{Indicator: tin.InstanceStatusIndicator},
		Provisioning: eim.StatusValue{Text: "Provisioned", Indicator: eim.StatusIdle, Timestamp: 90}}
	if !reflect.DeepEqual(st.Instance, wantIn) {
		t.Errorf("NodeState's instance: got %+v, want %+v", st.Instance, wantIn)
	}
	if w := st.Workflow; w == nil || w.ResourceID != twf.ResourceID || w.State != eim.WorkflowSucceeded || w.HostID != typed.ResourceID ||
		w.InstanceID != tin.ResourceID || w.Actions != nil || w.Log != nil {
		t.Errorf("NodeState's workflow: got %+v, want %s SUCCEEDED without actions or log", w, twf.ResourceID)
	}

	// A report-in: the instance RUNNING, the host's status and name, as
	// the inventory's three field writes made them.
	running := eim.StatusValue{Text: "Running", Indicator: eim.StatusIdle, Timestamp: 200}
	name := "edge-1"
	var seen eim.NodeState
	after, err := nr.ReportIn(prov, p, typed.ResourceID, func(st eim.NodeState) eim.NodeChange {
		seen = st
		return eim.NodeChange{Running: &running, HostStatus: &running, Hostname: &name}
	})
	if err != nil {
		t.Fatalf("ReportIn: %v", err)
	}
	if !reflect.DeepEqual(seen.Instance, wantIn) || seen.HostStatus != want.HostStatus {
		t.Errorf("ReportIn's decision was given %+v, want as NodeState read", seen)
	}
	if after.HostStatus != running || after.Hostname != name || after.Instance.CurrentState != eim.InstanceStateRunning || after.Instance.Status != running {
		t.Errorf("ReportIn returned %+v, want the state as written", after)
	}
	if run.n.Load() == 0 {
		t.Errorf("the runner ran no transaction")
	}
	update(t, s, p, func(tx eim.Tx) error {
		wi := &eim.Instance{Meta: eim.Meta{ResourceID: gin.ResourceID}, CurrentState: eim.InstanceStateRunning,
			InstanceStatus: running.Text, InstanceStatusIndicator: running.Indicator, InstanceStatusTimestamp: running.Timestamp}
		if err := tx.UpdateFieldsIf(prov, wi, []eim.Cond{{Field: "currentState", Value: gin.CurrentState}},
			"currentState", "instanceStatus", "instanceStatusIndicator", "instanceStatusTimestamp"); err != nil {
			return err
		}
		wh := &eim.Host{Meta: eim.Meta{ResourceID: generic.ResourceID}, HostStatus: running.Text, HostStatusIndicator: running.Indicator, HostStatusTimestamp: running.Timestamp}
		if err := tx.UpdateFieldsIf(prov, wh, []eim.Cond{{Field: "hostStatus", Value: "Rebooting"}, {Field: "hostStatusIndicator", Value: eim.StatusInProgress}},
			"hostStatus", "hostStatusIndicator", "hostStatusTimestamp"); err != nil {
			return err
		}
		return tx.UpdateFields(prov, &eim.Host{Meta: eim.Meta{ResourceID: generic.ResourceID}, Hostname: name}, "hostname")
	})
	sameWrites(t, s, p, typed.ResourceID, p, generic.ResourceID)
	sameWrites(t, s, p, tin.ResourceID, p, gin.ResourceID)
	r, _ := get(t, s, p, eim.KindHost, typed.ResourceID)
	if h := r.(*eim.Host); h.HostStatus != "Running" || h.Hostname != name || h.Name != "typed" || h.HardwareDigest != typed.HardwareDigest {
		t.Errorf("stored host: got status %q, hostname %q, name %q; want Running, %s, the rest unchanged", h.HostStatus, h.Hostname, h.Name, name)
	}
	r, _ = get(t, s, p, eim.KindInstance, tin.ResourceID)
	if in := r.(*eim.Instance); in.CurrentState != eim.InstanceStateRunning || in.InstanceStatus != "Running" || in.ProvisioningStatus != "Provisioned" {
		t.Errorf("stored instance: got %q %q %q, want RUNNING, Running, the provisioning status unchanged", in.CurrentState, in.InstanceStatus, in.ProvisioningStatus)
	}

	// Nothing to change: nothing written.
	rev, _ := s.Revision(ctx(t))
	if _, err := nr.ReportIn(prov, p, typed.ResourceID, func(eim.NodeState) eim.NodeChange { return eim.NodeChange{} }); err != nil {
		t.Fatal(err)
	}
	if rev2, _ := s.Revision(ctx(t)); rev2 != rev {
		t.Errorf("revision after no change: got %d, want %d", rev2, rev)
	}
	// A report-in does not write the workflow.
	_, err = nr.ReportIn(prov, p, typed.ResourceID, func(st eim.NodeState) eim.NodeChange { return eim.NodeChange{Workflow: st.Workflow} })
	wantCode(t, err, eim.EINVALID)

	// Action reports: the workflow whole, changed and written over the
	// version read, with the provisioning status.
	var read *eim.Workflow
	err = nr.RecordActions(prov, p, generic.ResourceID, func(st eim.NodeState) (eim.NodeChange, error) {
		read = st.Workflow
		wf := st.Workflow
		wf.Actions[1].State = eim.ActionRunning
		wf.State = eim.WorkflowRunning
		wf.Log = append(wf.Log, eim.WorkflowLogEntry{Seq: 2, Action: 1, Name: "reboot", State: eim.ActionRunning})
		return eim.NodeChange{Workflow: wf, Provisioning: &eim.StatusValue{Text: "Provisioning In Progress: 2/2 reboot", Indicator: eim.StatusInProgress, Timestamp: 300}}, nil
	})
	if err != nil {
		t.Fatalf("RecordActions: %v", err)
	}
	if read == nil || len(read.Actions) != 2 || len(read.Log) != 2 || read.Timestamps.UpdatedAt.IsZero() {
		t.Errorf("RecordActions' decision was given workflow %+v, want it whole", read)
	}
	r, _ = get(t, s, p, eim.KindWorkflow, read.ResourceID)
	if wf := r.(*eim.Workflow); wf.State != eim.WorkflowRunning || len(wf.Log) != 2 || wf.Actions[1].State != eim.ActionRunning {
		t.Errorf("stored workflow: got %s with %d log entries, action 2 %s; want RUNNING, 2, RUNNING", wf.State, len(wf.Log), wf.Actions[1].State)
	}
	r, _ = get(t, s, p, eim.KindInstance, gin.ResourceID)
	if in := r.(*eim.Instance); in.ProvisioningStatus != "Provisioning In Progress: 2/2 reboot" || in.CurrentState != eim.InstanceStateRunning {
		t.Errorf("stored instance: got %q, %q", in.ProvisioningStatus, in.CurrentState)
	}

	// Concurrent reports of one node each append to what the one before
	// wrote: none is lost.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			err := nr.RecordActions(ctx(t), p, generic.ResourceID, func(st eim.NodeState) (eim.NodeChange, error) {
				wf := st.Workflow
				wf.Log = append(wf.Log, eim.WorkflowLogEntry{Seq: len(wf.Log) + 1, Action: 1, Output: "x"})
				return eim.NodeChange{Workflow: wf}, nil
			})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent RecordActions: %v", err)
	}
	r, _ = get(t, s, p, eim.KindWorkflow, read.ResourceID)
	if n := len(r.(*eim.Workflow).Log); n != 10 {
		t.Errorf("log after 8 concurrent reports: got %d entries, want 10", n)
	}

	// A decision's error is returned; nothing is written.
	rev, _ = s.Revision(ctx(t))
	boom := eim.Errorf(eim.EINVALID, "index: out of range")
	err = nr.RecordActions(prov, p, generic.ResourceID, func(st eim.NodeState) (eim.NodeChange, error) {
		return eim.NodeChange{Workflow: st.Workflow}, boom
	})
	if !errors.Is(err, boom) && eim.ErrorMessage(err) != "index: out of range" {
		t.Errorf("RecordActions with a failing decision: got %v, want %v", err, boom)
	}
	if rev2, _ := s.Revision(ctx(t)); rev2 != rev {
		t.Errorf("revision after a failed decision: got %d, want %d", rev2, rev)
	}

	// Bad changes are refused, naming the field; nothing is written.
	long := strings.Repeat("h", eim.MaxHostname+1)
	for _, tc := range []struct {
		host  string
		ch    func(st eim.NodeState) eim.NodeChange
		field string
	}{
		{typed.ResourceID, func(eim.NodeState) eim.NodeChange {
			return eim.NodeChange{HostStatus: &eim.StatusValue{Text: "x", Indicator: "BOGUS"}}
		}, "hostStatusIndicator"},
		{typed.ResourceID, func(eim.NodeState) eim.NodeChange { return eim.NodeChange{Hostname: &long} }, "hostname"},
		{typed.ResourceID, func(eim.NodeState) eim.NodeChange {
			return eim.NodeChange{Provisioning: &eim.StatusValue{Text: "\xff"}}
		}, "provisioningStatus"},
		{bare.ResourceID, func(eim.NodeState) eim.NodeChange { return eim.NodeChange{Running: &running} }, "instance"},
		{generic.ResourceID, func(st eim.NodeState) eim.NodeChange {
			st.Workflow.State = "WORKFLOW_STATE_BOGUS"
			return eim.NodeChange{Workflow: st.Workflow}
		}, "state"},
		{generic.ResourceID, func(st eim.NodeState) eim.NodeChange {
			st.Workflow.Actions[0].Name = ""
			return eim.NodeChange{Workflow: st.Workflow}
		}, "actions[0].name"},
	} {
		err := nr.RecordActions(prov, p, tc.host, func(st eim.NodeState) (eim.NodeChange, error) { return tc.ch(st), nil })
		wantCode(t, err, eim.EINVALID)
		if !strings.HasPrefix(eim.ErrorMessage(err), tc.field+":") {
			t.Errorf("error: got %q, want it to name %s", eim.ErrorMessage(err), tc.field)
		}
	}
	if rev2, _ := s.Revision(ctx(t)); rev2 != rev {
		t.Errorf("revision after refused changes: got %d, want %d", rev2, rev)
	}

	// A host that is not there, or not the project's.
	nothing := func(eim.NodeState) eim.NodeChange { return eim.NodeChange{} }
	_, err = nr.NodeState(ctx(t), p, "host-0000abcd")
	wantCode(t, err, eim.ENOTFOUND)
	_, err = nr.NodeState(ctx(t), project(t, s), typed.ResourceID)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = nr.ReportIn(ctx(t), project(t, s), typed.ResourceID, nothing)
	wantCode(t, err, eim.ENOTFOUND)
	err = nr.RecordActions(ctx(t), p, "host-0000abcd", func(eim.NodeState) (eim.NodeChange, error) { return eim.NodeChange{}, nil })
	wantCode(t, err, eim.ENOTFOUND)
	_, err = nr.ReportIn(ctx(t), p, "not-an-id", nothing)
	wantCode(t, err, eim.EINVALID)
	_, err = nr.NodeState(ctx(t), "", typed.ResourceID)
	wantCode(t, err, eim.EINVALID)

	// A runner over another store is refused, not trusted.
	_, err = s.NodeReports(foreignRunner{}).ReportIn(ctx(t), p, typed.ResourceID, nothing)
	wantCode(t, err, eim.EINTERNAL)
}
