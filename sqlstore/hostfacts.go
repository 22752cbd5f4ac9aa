package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/eimhq/eim"
)

// The per-host view's reads (eim.HostFacts): the columns of hosts and
// instances the view keeps, selected by name and scanned into plain
// values. A changed host read back whole (Tx.GetMany) decodes its
// hundred fields by reflection, the hardware lists from JSON, to keep a
// quarter of them: for a fleet's creates, that read was the view's
// whole cost.

var _ eim.HostFacts = hostFacts{}

// hostFacts runs its reads in view's transactions.
type hostFacts struct {
	s    *Store
	view eim.TxViewer
}

// HostFacts implements eim.Store.
func (s *Store) HostFacts(view eim.TxViewer) eim.HostFacts {
	if view == nil {
		view = s
	}
	return hostFacts{s: s, view: view}
}

// hostRowCols are the columns of an eim.HostRow, in scanHostRow's order.
const hostRowCols = "id, project, COALESCE(site_id, ''), name, serial_number, uuid, hostname, boot_id, hardware_digest, " +
	"node_secret_hash, node_cred_gen, desired_state, current_state, " +
	"host_status, host_status_indicator, host_status_timestamp, " +
	"onboarding_status, onboarding_status_indicator, onboarding_status_timestamp, " +
	"registration_status, registration_status_indicator, registration_status_timestamp, " +
	"bmc_kind, desired_power_state, current_power_state, power_status, power_status_timestamp, created_at"

// instanceRowCols are the columns of an eim.InstanceRow, in
// scanInstanceRow's order.
const instanceRowCols = "id, project, COALESCE(host_id, ''), COALESCE(os_id, ''), current_state, instance_status_timestamp, " +
	"provisioning_status, provisioning_status_indicator, provisioning_status_timestamp, " +
	"update_status, update_status_indicator, update_status_timestamp, os_update_available <> '', created_at"

// Hosts implements eim.HostFacts.
func (f hostFacts) Hosts(ctx context.Context, project string, ids []string) ([]eim.HostRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []eim.HostRow
	err := f.in(ctx, project, func(t *tx) error {
		a := &args{pg: t.s.d.pg}
		q := "SELECT " + hostRowCols + " FROM hosts WHERE " + t.s.d.inList("id", a.add(t.s.d.listArg(ids)))
		if t.project != "" {
			q += " AND project = " + a.add(t.project)
		}
		rows, err := t.queryBuilt(ctx, q, a.list)
		if err != nil {
			return t.fail(t.s.d.translate(fmt.Errorf("read hosts: %w", err), nil))
		}
		out, err = t.scanHostRows(rows, len(ids))
		return err
	})
	return out, err
}

// HostsAfter implements eim.HostFacts.
func (f hostFacts) HostsAfter(ctx context.Context, after string, limit int) ([]eim.HostRow, error) {
	var out []eim.HostRow
	err := f.in(ctx, "", func(t *tx) error {
		rows, err := t.query(ctx, "SELECT "+hostRowCols+" FROM hosts WHERE id > ? ORDER BY id LIMIT ?", after, limit)
		if err != nil {
			return t.fail(t.s.d.translate(fmt.Errorf("read hosts: %w", err), nil))
		}
		out, err = t.scanHostRows(rows, limit)
		return err
	})
	return out, err
}

// Instances implements eim.HostFacts.
func (f hostFacts) Instances(ctx context.Context, ids []string) ([]eim.InstanceRow, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []eim.InstanceRow
	err := f.in(ctx, "", func(t *tx) error {
		a := &args{pg: t.s.d.pg}
		q := "SELECT " + instanceRowCols + " FROM instances WHERE " + t.s.d.inList("id", a.add(t.s.d.listArg(ids)))
		rows, err := t.queryBuilt(ctx, q, a.list)
		if err != nil {
			return t.fail(t.s.d.translate(fmt.Errorf("read instances: %w", err), nil))
		}
		out, err = t.scanInstanceRows(rows, len(ids))
		return err
	})
	return out, err
}

// InstancesAfter implements eim.HostFacts.
func (f hostFacts) InstancesAfter(ctx context.Context, after string, limit int) ([]eim.InstanceRow, error) {
	var out []eim.InstanceRow
	err := f.in(ctx, "", func(t *tx) error {
		rows, err := t.query(ctx, "SELECT "+instanceRowCols+" FROM instances WHERE id > ? ORDER BY id LIMIT ?", after, limit)
		if err != nil {
			return t.fail(t.s.d.translate(fmt.Errorf("read instances: %w", err), nil))
		}
		out, err = t.scanInstanceRows(rows, limit)
		return err
	})
	return out, err
}

// in runs fn in a read-only transaction of f's viewer, which must be
// over f's store.
func (f hostFacts) in(ctx context.Context, project string, fn func(*tx) error) error {
	return f.view.View(ctx, project, func(etx eim.Tx) error {
		t, ok := etx.(*tx)
		if !ok || t.s != f.s {
			return eim.Errorf(eim.EINTERNAL, "host facts: the viewer is not over this store")
		}
		return fn(t)
	})
}

func (t *tx) scanHostRows(rows *sql.Rows, hint int) ([]eim.HostRow, error) {
	defer rows.Close()
	out := make([]eim.HostRow, 0, min(hint, 2000))
	var (
		r                                 eim.HostRow
		desired, current, bmc, dpow, cpow string
		hstInd, onbInd, regInd            string
		hstTS, onbTS, regTS, powTS        int64
	)
	dest := []any{&r.ID, &r.Project, &r.SiteID, &r.Name, &r.SerialNumber, &r.UUID, &r.Hostname, &r.BootID, &r.HardwareDigest,
		&r.NodeSecretHash, &r.NodeCredGen, &desired, &current,
		&r.Status.Text, &hstInd, &hstTS,
		&r.Onboarding.Text, &onbInd, &onbTS,
		&r.Registration.Text, &regInd, &regTS,
		&bmc, &dpow, &cpow, &r.PowerStatus, &powTS, &r.CreatedAt}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, t.fail(fmt.Errorf("read hosts: %w", err))
		}
		r.DesiredState, r.CurrentState = eim.HostState(desired), eim.HostState(current)
		r.Status.Indicator, r.Status.Timestamp = eim.StatusIndication(hstInd), uint64(hstTS)
		r.Onboarding.Indicator, r.Onboarding.Timestamp = eim.StatusIndication(onbInd), uint64(onbTS)
		r.Registration.Indicator, r.Registration.Timestamp = eim.StatusIndication(regInd), uint64(regTS)
		r.BmcKind = eim.BaremetalControllerKind(bmc)
		r.DesiredPowerState, r.CurrentPowerState = eim.PowerState(dpow), eim.PowerState(cpow)
		r.PowerStatusTimestamp = uint64(powTS)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read hosts: %w", err), nil))
	}
	return out, nil
}

func (t *tx) scanInstanceRows(rows *sql.Rows, hint int) ([]eim.InstanceRow, error) {
	defer rows.Close()
	out := make([]eim.InstanceRow, 0, min(hint, 2000))
	var (
		r                        eim.InstanceRow
		current, provInd, updInd string
		stTS, provTS, updTS      int64
	)
	dest := []any{&r.ID, &r.Project, &r.HostID, &r.OSID, &current, &stTS,
		&r.Provisioning.Text, &provInd, &provTS,
		&r.Update.Text, &updInd, &updTS, &r.UpdateAvailable, &r.CreatedAt}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, t.fail(fmt.Errorf("read instances: %w", err))
		}
		r.CurrentState, r.StatusTimestamp = eim.InstanceState(current), uint64(stTS)
		r.Provisioning.Indicator, r.Provisioning.Timestamp = eim.StatusIndication(provInd), uint64(provTS)
		r.Update.Indicator, r.Update.Timestamp = eim.StatusIndication(updInd), uint64(updTS)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read instances: %w", err), nil))
	}
	return out, nil
}
