package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/eimhq/eim"
)

// The provisioning module's typed operations on what a node's reports
// change (eim.NodeReports): one indexed read of the host's status and
// name, its instance's states and statuses and its workflow's state (the
// workflow whole only for an action report), and field writes of what
// the decision changes. The writes are Tx.UpdateFieldsIf's, so they are
// audited and in the feed exactly as the inventory's field writes were.

var _ eim.NodeReports = nodeReports{}

// nodeReports runs its write transactions through run.
type nodeReports struct {
	s   *Store
	run eim.TxRunner
}

// NodeReports implements eim.Store.
func (s *Store) NodeReports(run eim.TxRunner) eim.NodeReports {
	if run == nil {
		run = storeRunner{s}
	}
	return nodeReports{s: s, run: run}
}

// nodeStateQuery reads a node's state: its host, the host's instance (one
// at most: instances_host_id_key) and the instance's workflow (one at
// most: workflows_instance_id_key).
const nodeStateQuery = "SELECT h.id, h.project, h.host_status, h.host_status_indicator, h.host_status_timestamp, h.hostname, " +
	"COALESCE(i.id, ''), COALESCE(i.desired_state, ''), COALESCE(i.current_state, ''), " +
	"COALESCE(i.instance_status, ''), COALESCE(i.instance_status_indicator, ''), COALESCE(i.instance_status_timestamp, 0), " +
	"COALESCE(i.provisioning_status, ''), COALESCE(i.provisioning_status_indicator, ''), COALESCE(i.provisioning_status_timestamp, 0), " +
	"COALESCE(w.id, ''), COALESCE(w.host_id, ''), COALESCE(w.state, '')" +
	" FROM hosts h LEFT JOIN instances i ON i.project = h.project AND i.host_id = h.id" +
	" LEFT JOIN workflows w ON w.project = i.project AND w.instance_id = i.id" +
	" WHERE h.id = ? AND h.project = ?"

// checkNode validates the arguments of an operation on a node's host.
func checkNode(project, id string) error {
	if project == "" {
		return eim.Errorf(eim.EINVALID, "project: required")
	}
	return eim.CheckID(eim.KindHost, "hostId", id)
}

// NodeState implements eim.NodeReports.
func (r nodeReports) NodeState(ctx context.Context, project, id string) (eim.NodeState, error) {
	if err := checkNode(project, id); err != nil {
		return eim.NodeState{}, err
	}
	var st eim.NodeState
	err := r.s.View(ctx, project, func(etx eim.Tx) error {
		var err error
		st, err = etx.(*tx).nodeState(ctx, project, id)
		return err
	})
	return st, err
}

// ReportIn implements eim.NodeReports.
func (r nodeReports) ReportIn(ctx context.Context, project, id string, decide func(eim.NodeState) eim.NodeChange) (eim.NodeState, error) {
	if err := checkNode(project, id); err != nil {
		return eim.NodeState{}, err
	}
	var out eim.NodeState
	err := r.run.DoIn(ctx, project, func(etx eim.Tx) error {
		t, err := r.tx(etx)
		if err != nil {
			return err
		}
		st, err := t.nodeState(ctx, project, id)
		if err != nil {
			return err
		}
		ch := decide(st)
		if ch.Workflow != nil {
			return eim.Errorf(eim.EINVALID, "workflow: a report-in does not write it")
		}
		out, err = t.writeNode(ctx, st, ch)
		return err
	})
	return out, err
}

// RecordActions implements eim.NodeReports.
func (r nodeReports) RecordActions(ctx context.Context, project, id string, decide func(eim.NodeState) (eim.NodeChange, error)) error {
	if err := checkNode(project, id); err != nil {
		return err
	}
	return r.run.DoIn(ctx, project, func(etx eim.Tx) error {
		t, err := r.tx(etx)
		if err != nil {
			return err
		}
		st, err := t.nodeState(ctx, project, id)
		if err != nil {
			return err
		}
		if st.Workflow != nil {
			res, err := t.Get(ctx, eim.KindWorkflow, st.Workflow.ResourceID)
			if err != nil {
				return fmt.Errorf("read workflow %s: %w", st.Workflow.ResourceID, err)
			}
			st.Workflow = res.(*eim.Workflow)
		}
		ch, err := decide(st)
		if err != nil {
			return err
		}
		_, err = t.writeNode(ctx, st, ch)
		return err
	})
}

// tx is the store's transaction under etx, which run gave.
func (r nodeReports) tx(etx eim.Tx) (*tx, error) {
	t, ok := etx.(*tx)
	if !ok || t.s != r.s {
		return nil, eim.Errorf(eim.EINTERNAL, "node reports: the transaction runner is not over this store")
	}
	return t, nil
}

// nodeState reads host id's state (its workflow's ID, host and state
// only).
func (t *tx) nodeState(ctx context.Context, project, id string) (eim.NodeState, error) {
	rows, err := t.query(ctx, nodeStateQuery, id, project)
	if err != nil {
		return eim.NodeState{}, t.fail(t.s.d.translate(fmt.Errorf("read state of host %s: %w", id, err), nil))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return eim.NodeState{}, t.fail(t.s.d.translate(fmt.Errorf("read state of host %s: %w", id, err), nil))
		}
		return eim.NodeState{}, eim.Errorf(eim.ENOTFOUND, "host %s not found", id)
	}
	st, err := scanNodeState(rows)
	if err != nil {
		return eim.NodeState{}, t.fail(fmt.Errorf("read state of host %s: %w", id, err))
	}
	return st, nil
}

// scanNodeState scans a row of nodeStateQuery.
func scanNodeState(rows *sql.Rows) (eim.NodeState, error) {
	var (
		st                             eim.NodeState
		status, statusInd              string
		statusTS, inTS, provTS         int64
		inID, desired, current         string
		inStatus, inInd, prov, provInd string
		wfID, wfHost, wfState          string
	)
	if err := rows.Scan(&st.HostID, &st.Project, &status, &statusInd, &statusTS, &st.Hostname,
		&inID, &desired, &current, &inStatus, &inInd, &inTS, &prov, &provInd, &provTS,
		&wfID, &wfHost, &wfState); err != nil {
		return st, err
	}
	st.HostStatus = eim.StatusValue{Text: status, Indicator: eim.StatusIndication(statusInd), Timestamp: uint64(statusTS)}
	if inID != "" {
		st.Instance = &eim.NodeInstance{ID: inID, DesiredState: eim.InstanceState(desired), CurrentState: eim.InstanceState(current),
			Status:       eim.StatusValue{Text: inStatus, Indicator: eim.StatusIndication(inInd), Timestamp: uint64(inTS)},
			Provisioning: eim.StatusValue{Text: prov, Indicator: eim.StatusIndication(provInd), Timestamp: uint64(provTS)}}
	}
	if wfID != "" {
		st.Workflow = &eim.Workflow{Meta: eim.Meta{ResourceID: wfID, Project: st.Project}, InstanceID: inID, HostID: wfHost,
			State: eim.WorkflowState(wfState)}
	}
	return st, nil
}

// writeNode writes ch over st, the state just read, each part as the
// inventory's field write of it did (the same columns, the same
// conditions, in the same order), and returns st as written.
func (t *tx) writeNode(ctx context.Context, st eim.NodeState, ch eim.NodeChange) (eim.NodeState, error) {
	if ch.Empty() {
		return st, nil
	}
	if err := ch.Check(st); err != nil {
		return st, err
	}
	if s := ch.Running; s != nil {
		in := st.Instance
		v := unspecifiedStatus(*s)
		w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ID}, CurrentState: eim.InstanceStateRunning,
			InstanceStatus: v.Text, InstanceStatusIndicator: v.Indicator, InstanceStatusTimestamp: v.Timestamp}
		when := []eim.Cond{{Field: "currentState", Value: in.CurrentState}}
		if err := t.UpdateFieldsIf(ctx, w, when, "currentState", "instanceStatus", "instanceStatusIndicator", "instanceStatusTimestamp"); err != nil {
			return st, err
		}
		n := *in
		n.CurrentState, n.Status = eim.InstanceStateRunning, v
		st.Instance = &n
	}
	if s := ch.HostStatus; s != nil {
		v := unspecifiedStatus(*s)
		w := &eim.Host{Meta: eim.Meta{ResourceID: st.HostID}, HostStatus: v.Text, HostStatusIndicator: v.Indicator, HostStatusTimestamp: v.Timestamp}
		when := []eim.Cond{{Field: "hostStatus", Value: st.HostStatus.Text}, {Field: "hostStatusIndicator", Value: st.HostStatus.Indicator}}
		if err := t.UpdateFieldsIf(ctx, w, when, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp"); err != nil {
			return st, err
		}
		st.HostStatus = v
	}
	if h := ch.Hostname; h != nil {
		w := &eim.Host{Meta: eim.Meta{ResourceID: st.HostID}, Hostname: *h}
		if err := t.UpdateFields(ctx, w, "hostname"); err != nil {
			return st, err
		}
		st.Hostname = *h
	}
	if s := ch.Provisioning; s != nil {
		v := unspecifiedStatus(*s)
		w := &eim.Instance{Meta: eim.Meta{ResourceID: st.Instance.ID},
			ProvisioningStatus: v.Text, ProvisioningStatusIndicator: v.Indicator, ProvisioningStatusTimestamp: v.Timestamp}
		if err := t.UpdateFields(ctx, w, "provisioningStatus", "provisioningStatusIndicator", "provisioningStatusTimestamp"); err != nil {
			return st, err
		}
		n := *st.Instance
		n.Provisioning = v
		st.Instance = &n
	}
	if wf := ch.Workflow; wf != nil {
		var when []eim.Cond
		if v := st.Workflow.Timestamps.UpdatedAt; !v.IsZero() {
			when = []eim.Cond{{Field: "updatedAt", Value: v}}
		}
		if err := t.UpdateFieldsIf(ctx, wf, when, eim.WorkflowProgress...); err != nil {
			return st, err
		}
		st.Workflow = wf
	}
	return st, nil
}

// unspecifiedStatus is s with a missing indicator as
// STATUS_INDICATION_UNSPECIFIED, as the inventory's writes store it.
func unspecifiedStatus(s eim.StatusValue) eim.StatusValue {
	if s.Indicator == "" {
		s.Indicator = eim.StatusUnspecified
	}
	return s
}
