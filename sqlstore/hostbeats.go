package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// The host module's typed operations on its hosts' liveness
// (eim.HostBeats): a node's call or silence reads the dozen columns that
// decide it and writes the three or four it changes, without reading,
// decoding or diffing the whole host (its hardware and metadata are most
// of a row). The write is audited and in the change feed as any field
// write of a host (Tx.UpdateFields): the old values the audit record
// shows are the ones just read.

var _ eim.HostBeats = hostBeats{}

// hostBeats runs its transactions through run.
type hostBeats struct {
	s   *Store
	run eim.TxRunner
}

// HostBeats implements eim.Store.
func (s *Store) HostBeats(run eim.TxRunner) eim.HostBeats {
	if run == nil {
		run = storeRunner{s}
	}
	return hostBeats{s: s, run: run}
}

// storeRunner runs each transaction alone.
type storeRunner struct{ s *Store }

func (r storeRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return r.s.Update(ctx, project, fn)
}

// livenessCols are the columns of a host's liveness, in HostLiveness's
// order (scanLiveness).
const livenessCols = "h.id, h.project, h.host_status, h.host_status_indicator, h.host_status_timestamp, " +
	"h.current_power_state, h.power_status, h.power_status_indicator, h.power_status_timestamp, " +
	"h.bmc_kind, h.desired_power_state, h.hardware_digest"

// updatingCols add, for a silence, the update status of the host's
// instance (the first by ID, as a host has one).
const updatingCols = ", COALESCE((SELECT i.update_status_indicator FROM instances i WHERE i.project = h.project AND i.host_id = h.id ORDER BY i.id LIMIT 1), '')" +
	", COALESCE((SELECT i.update_status_timestamp FROM instances i WHERE i.project = h.project AND i.host_id = h.id ORDER BY i.id LIMIT 1), 0)"

// RecordBeat implements eim.HostBeats.
func (b hostBeats) RecordBeat(ctx context.Context, project, id string, decide func(eim.HostLiveness) eim.LivenessChange) (eim.HostLiveness, error) {
	return b.record(ctx, project, id, false, decide)
}

// RecordSilence implements eim.HostBeats.
func (b hostBeats) RecordSilence(ctx context.Context, project, id string, decide func(eim.HostLiveness) eim.LivenessChange) (eim.HostLiveness, error) {
	return b.record(ctx, project, id, true, decide)
}

func (b hostBeats) record(ctx context.Context, project, id string, updating bool, decide func(eim.HostLiveness) eim.LivenessChange) (eim.HostLiveness, error) {
	if project == "" {
		return eim.HostLiveness{}, eim.Errorf(eim.EINVALID, "project: required")
	}
	if err := eim.CheckID(eim.KindHost, "hostId", id); err != nil {
		return eim.HostLiveness{}, err
	}
	var out eim.HostLiveness
	err := b.run.DoIn(ctx, project, func(etx eim.Tx) error {
		t, ok := etx.(*tx)
		if !ok || t.s != b.s {
			return eim.Errorf(eim.EINTERNAL, "host beats: the transaction runner is not over this store")
		}
		l, err := t.liveness(ctx, id, updating)
		if err != nil {
			return err
		}
		ch := decide(l)
		if ch.Empty() {
			out = l
			return nil
		}
		if err := ch.Check(); err != nil {
			return err
		}
		ch = unspecified(ch)
		if err := t.writeLiveness(ctx, l, ch); err != nil {
			return err
		}
		out = ch.Apply(l)
		return nil
	})
	return out, err
}

// liveness reads the liveness of host id, locked for the write that may
// follow on PostgreSQL (where another writer could otherwise change it
// between the read and the write, and the transaction would run again).
func (t *tx) liveness(ctx context.Context, id string, updating bool) (eim.HostLiveness, error) {
	a := &args{pg: t.s.d.pg}
	q := "SELECT " + livenessCols
	if updating {
		q += updatingCols
	}
	q += " FROM hosts h WHERE h.id = " + a.add(id)
	if t.project != "" {
		q += " AND h.project = " + a.add(t.project)
	}
	if t.s.d.pg && t.write {
		q += " FOR NO KEY UPDATE OF h"
	}
	rows, err := t.queryBuilt(ctx, q, a.list)
	if err != nil {
		return eim.HostLiveness{}, t.fail(t.s.d.translate(fmt.Errorf("read liveness of host %s: %w", id, err), nil))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return eim.HostLiveness{}, t.fail(t.s.d.translate(fmt.Errorf("read liveness of host %s: %w", id, err), nil))
		}
		return eim.HostLiveness{}, eim.Errorf(eim.ENOTFOUND, "host %s not found", id)
	}
	l, err := scanLiveness(rows, updating)
	if err != nil {
		return eim.HostLiveness{}, t.fail(fmt.Errorf("read liveness of host %s: %w", id, err))
	}
	return l, nil
}

// scanLiveness scans a row of livenessCols (and updatingCols).
func scanLiveness(rows *sql.Rows, updating bool) (eim.HostLiveness, error) {
	var (
		l                          eim.HostLiveness
		statusTS, powerTS          int64
		updateInd                  string
		updateTS                   int64
		status, statusInd, current string
		power, powerInd, bmc, want string
	)
	dest := []any{&l.ID, &l.Project, &status, &statusInd, &statusTS, &current, &power, &powerInd, &powerTS, &bmc, &want, &l.HardwareDigest}
	if updating {
		dest = append(dest, &updateInd, &updateTS)
	}
	if err := rows.Scan(dest...); err != nil {
		return l, err
	}
	l.Status = eim.StatusValue{Text: status, Indicator: eim.StatusIndication(statusInd), Timestamp: uint64(statusTS)}
	l.Power = eim.HostPower{Current: eim.PowerState(current),
		Status: eim.StatusValue{Text: power, Indicator: eim.StatusIndication(powerInd), Timestamp: uint64(powerTS)}}
	l.BmcKind, l.DesiredPowerState = eim.BaremetalControllerKind(bmc), eim.PowerState(want)
	l.Updating, l.UpdateTimestamp = updateInd == string(eim.StatusInProgress), uint64(updateTS)
	return l, nil
}

// writeLiveness writes ch over l, the liveness just read: only the
// columns ch names, and only while the row still shows what l shows of
// them (it does: the row is locked, or SQLite has one writer; the
// conditions keep the write honest all the same).
func (t *tx) writeLiveness(ctx context.Context, l eim.HostLiveness, ch eim.LivenessChange) error {
	if err := t.writable(); err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	c := codecOf(eim.KindHost)
	w := &eim.Host{Meta: eim.Meta{ResourceID: l.ID}}
	old := &eim.Host{Meta: eim.Meta{ResourceID: l.ID}}
	var fields []string
	var when []eim.Cond
	if ch.Status != nil {
		w.HostStatus, w.HostStatusIndicator, w.HostStatusTimestamp = ch.Status.Text, ch.Status.Indicator, ch.Status.Timestamp
		old.HostStatus, old.HostStatusIndicator, old.HostStatusTimestamp = l.Status.Text, l.Status.Indicator, l.Status.Timestamp
		fields = append(fields, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp")
		when = append(when, eim.Cond{Field: "hostStatus", Value: l.Status.Text}, eim.Cond{Field: "hostStatusIndicator", Value: l.Status.Indicator})
	}
	if p := ch.Power; p != nil {
		w.CurrentPowerState, w.PowerStatus, w.PowerStatusIndicator, w.PowerStatusTimestamp = p.Current, p.Status.Text, p.Status.Indicator, p.Status.Timestamp
		old.CurrentPowerState, old.PowerStatus, old.PowerStatusIndicator, old.PowerStatusTimestamp = l.Power.Current, l.Power.Status.Text, l.Power.Status.Indicator, l.Power.Status.Timestamp
		fields = append(fields, "currentPowerState", "powerStatus", "powerStatusIndicator", "powerStatusTimestamp")
		when = append(when, eim.Cond{Field: "currentPowerState", Value: l.Power.Current}, eim.Cond{Field: "powerStatus", Value: l.Power.Status.Text},
			eim.Cond{Field: "powerStatusIndicator", Value: l.Power.Status.Indicator})
	}
	a := &args{pg: t.s.d.pg}
	sets := make([]string, 0, len(fields)+1)
	written := make([]*column, 0, len(fields))
	for _, name := range fields {
		col, err := c.writableColumn(name)
		if err != nil {
			return err
		}
		v, err := col.value(w)
		if err != nil {
			return err
		}
		written = append(written, col)
		sets = append(sets, col.name+" = "+a.add(v))
	}
	now := eim.NewTime(t.s.now()).UnixMilli()
	sets = append(sets, setUpdatedAt(a.add(now), a.add(now)))
	where := []string{"id = " + a.add(l.ID)}
	if t.project != "" {
		where = append(where, "project = "+a.add(t.project))
	}
	for _, cond := range when {
		f, err := c.conditionField(cond.Field)
		if err != nil {
			return err
		}
		p, err := t.condOn(c, f, cond, a)
		if err != nil {
			return err
		}
		where = append(where, p)
	}
	q := "UPDATE " + c.table + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ") + " " + updateReturning
	rows, err := t.queryBuilt(ctx, q, a.list)
	if err != nil {
		return t.fail(t.writeError(ctx, c, w, fmt.Errorf("update %s of host: %w", strings.Join(fields, ", "), err)))
	}
	if err := t.updatedWith(ctx, c, w, rows, true, nil); err != nil {
		return err
	}
	t.addAudit(ctx, w.Project, eim.KindHost, l.ID, eim.OpUpdated, diffChanges(written, old, w))
	return nil
}

// unspecified returns ch with its statuses' missing indicators as
// STATUS_INDICATION_UNSPECIFIED, as the inventory's writes store them.
func unspecified(ch eim.LivenessChange) eim.LivenessChange {
	if ch.Status != nil && ch.Status.Indicator == "" {
		st := *ch.Status
		st.Indicator = eim.StatusUnspecified
		ch.Status = &st
	}
	if ch.Power != nil && ch.Power.Status.Indicator == "" {
		p := *ch.Power
		p.Status.Indicator = eim.StatusUnspecified
		ch.Power = &p
	}
	return ch
}

// HostsInStatus implements eim.HostBeats: the (project, host_status)
// index serves it.
func (b hostBeats) HostsInStatus(ctx context.Context, project, status string, before uint64, offset, limit int) ([]eim.HostLiveness, error) {
	if project == "" {
		return nil, eim.Errorf(eim.EINVALID, "project: required")
	}
	if limit <= 0 {
		return nil, eim.Errorf(eim.EINVALID, "limit: must be positive")
	}
	if offset < 0 {
		return nil, eim.Errorf(eim.EINVALID, "offset: must not be negative")
	}
	var out []eim.HostLiveness
	err := b.s.View(ctx, project, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = out[:0]
		rows, err := t.query(ctx, "SELECT "+livenessCols+" FROM hosts h WHERE h.project = ? AND h.host_status = ? AND h.host_status_timestamp <= ?"+
			" ORDER BY h.host_status_timestamp, h.id LIMIT ? OFFSET ?", project, status, int64(before), limit, offset)
		if err != nil {
			return t.s.d.translate(fmt.Errorf("hosts in status %q: %w", status, err), nil)
		}
		defer rows.Close()
		for rows.Next() {
			l, err := scanLiveness(rows, false)
			if err != nil {
				return fmt.Errorf("hosts in status %q: %w", status, err)
			}
			out = append(out, l)
		}
		if err := rows.Err(); err != nil {
			return t.s.d.translate(fmt.Errorf("hosts in status %q: %w", status, err), nil)
		}
		return nil
	})
	return out, err
}
