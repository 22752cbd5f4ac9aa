package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/eimhq/eim"
)

// Hosts' BMCs (eim.BMCStore): the table bmcs, scoped to the project like
// the resource tables (row-level security on PostgreSQL). Writes are
// audited (KindBMC, the host's ID) with the password redacted, and each
// put and delete puts a KindBMC event (the host's ID) in the change feed:
// the oob module's follower keeps from them which hosts have a BMC, so
// that the events of hosts without one cost it no read. What the poll
// records (RecordBMCFound) puts none.

var _ eim.BMCStore = (*Store)(nil)

const bmcCols = "project, host_id, protocol, address, system_id, username, password, ca_cert, insecure, power_policy, capabilities, reachable, created_at, updated_at"

func scanBMC(sc interface{ Scan(...any) error }) (*eim.BMC, error) {
	var (
		b                          eim.BMC
		proto, policy, caps, reach string
		created, updated           int64
	)
	if err := sc.Scan(&b.Project, &b.HostID, &proto, &b.Address, &b.SystemID, &b.Username, &b.SealedPassword,
		&b.CACert, &b.Insecure, &policy, &caps, &reach, &created, &updated); err != nil {
		return nil, err
	}
	b.Protocol, b.PowerPolicy = eim.BMCProtocol(proto), eim.PowerPolicy(policy)
	if err := json.Unmarshal([]byte(caps), &b.Capabilities); err != nil {
		return nil, fmt.Errorf("bmc of %s: capabilities: %w", b.HostID, err)
	}
	if err := json.Unmarshal([]byte(reach), &b.Reachable); err != nil {
		return nil, fmt.Errorf("bmc of %s: reachable: %w", b.HostID, err)
	}
	b.CreatedAt, b.UpdatedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated)
	return &b, nil
}

// getBMC reads the BMC of a host in t (locked on PostgreSQL when lock);
// nil when there is none.
func (s *Store) getBMC(ctx context.Context, t *tx, project, hostID string, lock bool) (*eim.BMC, error) {
	q := "SELECT " + bmcCols + " FROM bmcs WHERE project = ? AND host_id = ?"
	if lock && s.d.pg {
		q += " FOR UPDATE"
	}
	rows, err := t.query(ctx, q, project, hostID)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read bmc: %w", err), nil))
	}
	defer rows.Close()
	var b *eim.BMC
	for rows.Next() {
		if b, err = scanBMC(rows); err != nil {
			return nil, t.fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read bmc: %w", err), nil))
	}
	return b, nil
}

// PutBMC implements eim.BMCStore.
func (s *Store) PutBMC(ctx context.Context, b *eim.BMC) error {
	if b.Project == "" || b.HostID == "" {
		return eim.Errorf(eim.EINVALID, "bmc: project and host required")
	}
	now := eim.NewTime(s.now())
	return s.run(ctx, b.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM hosts WHERE project = ? AND id = ?", b.Project, b.HostID) {
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", b.HostID)
		}
		old, err := s.getBMC(ctx, t, b.Project, b.HostID, true)
		if err != nil {
			return err
		}
		sealed := b.SealedPassword
		if sealed == "" {
			if old == nil {
				return eim.Errorf(eim.EINVALID, "password: required (the host has no BMC yet)")
			}
			sealed = old.SealedPassword
		}
		created := now
		if old != nil {
			created = old.CreatedAt
		}
		if old == nil {
			// Two first puts of a host's BMC race (PostgreSQL: FOR UPDATE
			// locks no row that does not exist yet): the one that did not
			// insert runs again, and replaces what the other wrote.
			var res sql.Result
			res, err = t.exec(ctx, "INSERT INTO bmcs ("+bmcCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, host_id) DO NOTHING",
				b.Project, b.HostID, string(b.Protocol), b.Address, b.SystemID, b.Username, sealed, b.CACert, b.Insecure, string(b.PowerPolicy), "{}", "{}", created.UnixMilli(), now.UnixMilli())
			if err == nil {
				if n, _ := res.RowsAffected(); n == 0 {
					return errRaced
				}
			}
		} else {
			_, err = t.exec(ctx, "UPDATE bmcs SET protocol = ?, address = ?, system_id = ?, username = ?, password = ?, ca_cert = ?, insecure = ?, power_policy = ?, capabilities = ?, reachable = ?, updated_at = ? WHERE project = ? AND host_id = ?",
				string(b.Protocol), b.Address, b.SystemID, b.Username, sealed, b.CACert, b.Insecure, string(b.PowerPolicy), "{}", "{}", now.UnixMilli(), b.Project, b.HostID)
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("put bmc: %w", err), nil))
		}
		op, ch := eim.OpCreated, bmcChanges(old, b, sealed)
		if old != nil {
			op = eim.OpUpdated
		}
		t.addAudit(ctx, b.Project, eim.KindBMC, b.HostID, op, ch)
		t.addEvent(b.Project, eim.KindBMC, b.HostID, op)
		b.SealedPassword, b.CreatedAt, b.UpdatedAt = sealed, created, now
		b.Capabilities, b.Reachable = eim.BMCCapabilities{}, eim.BMCReachable{}
		return nil
	})
}

// bmcChanges are the audit record's fields of a put of b over old (nil:
// none), the password redacted.
func bmcChanges(old, b *eim.BMC, sealed string) map[string]eim.Change {
	ch := map[string]eim.Change{}
	field := func(name string, o, n any) {
		oj, nj := jsonNull, mustJSON(n)
		if old != nil {
			oj = mustJSON(o)
		}
		if string(oj) != string(nj) {
			ch[name] = eim.Change{Old: oj, New: nj}
		}
	}
	var o eim.BMC
	if old != nil {
		o = *old
	}
	field("protocol", o.Protocol, b.Protocol)
	field("address", o.Address, b.Address)
	field("systemId", o.SystemID, b.SystemID)
	field("username", o.Username, b.Username)
	field("caCert", o.CACert, b.CACert)
	field("insecure", o.Insecure, b.Insecure)
	field("powerPolicy", o.PowerPolicy, b.PowerPolicy)
	switch {
	case old == nil:
		ch["password"] = eim.Change{Old: jsonNull, New: json.RawMessage(eim.Redacted)}
	case old.SealedPassword != sealed:
		ch["password"] = eim.Change{Old: json.RawMessage(eim.Redacted), New: json.RawMessage(eim.Redacted)}
	}
	return ch
}

// GetBMC implements eim.BMCStore.
func (s *Store) GetBMC(ctx context.Context, project, hostID string) (*eim.BMC, error) {
	var b *eim.BMC
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		b, err = s.getBMC(ctx, etx.(*tx), project, hostID, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, eim.Errorf(eim.ENOTFOUND, "host %s has no BMC", hostID)
	}
	return b, nil
}

// DeleteBMC implements eim.BMCStore.
func (s *Store) DeleteBMC(ctx context.Context, project, hostID string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "DELETE FROM bmcs WHERE project = ? AND host_id = ?", project, hostID)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete bmc: %w", err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "host %s has no BMC", hostID)
		}
		t.addAudit(ctx, project, eim.KindBMC, hostID, eim.OpDeleted, nil)
		t.addEvent(project, eim.KindBMC, hostID, eim.OpDeleted)
		return nil
	})
}

// ListBMCs implements eim.BMCStore.
func (s *Store) ListBMCs(ctx context.Context, project string) ([]*eim.BMC, error) {
	var out []*eim.BMC
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, "SELECT "+bmcCols+" FROM bmcs WHERE project = ? ORDER BY host_id", project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("list bmcs: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			b, err := scanBMC(rows)
			if err != nil {
				return t.fail(err)
			}
			out = append(out, b)
		}
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("list bmcs: %w", err), nil))
		}
		return nil
	})
	return out, err
}

// RecordBMCFound implements eim.BMCStore.
func (s *Store) RecordBMCFound(ctx context.Context, project, hostID string, caps *eim.BMCCapabilities, reach eim.BMCReachable) error {
	q, args := "UPDATE bmcs SET reachable = ?", []any{string(mustJSON(reach))}
	if caps != nil {
		q += ", capabilities = ?"
		args = append(args, string(mustJSON(caps)))
	}
	q += " WHERE project = ? AND host_id = ?"
	args = append(args, project, hostID)
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, q, args...)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("record bmc state: %w", err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "host %s has no BMC", hostID)
		}
		return nil
	})
}
