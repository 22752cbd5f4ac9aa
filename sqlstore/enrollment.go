package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// The enrollment lobby (eim.EnrollmentStore): the tables
// enrollment_requests and enrollment_rules (migration 0024), scoped to the
// project like the resource tables (row-level security on PostgreSQL).
// Decisions, deletions and rules are audited (KindEnrollment,
// KindEnrollmentRule); a device's calls are not (they are not changes
// anyone made). Nothing here puts an event in the change feed.

var _ eim.EnrollmentStore = (*Store)(nil)

const enrollmentCols = "project, id, identity_key, uuid, serial_number, macs, hostname, hardware, labels, installed, state, reason, decided_by, decided_at, rule_id, host_id, approval, attempts, first_seen, last_seen"

func scanEnrollment(sc interface{ Scan(...any) error }) (*eim.EnrollmentRequest, error) {
	var (
		r                                  eim.EnrollmentRequest
		key, macs, hw, labels, state, appr string
		decided, first, last               int64
	)
	if err := sc.Scan(&r.Project, &r.ID, &key, &r.UUID, &r.SerialNumber, &macs, &r.Hostname, &hw, &labels, &r.Installed,
		&state, &r.Reason, &r.DecidedBy, &decided, &r.RuleID, &r.HostID, &appr, &r.Attempts, &first, &last); err != nil {
		return nil, err
	}
	r.State = eim.EnrollmentState(state)
	for _, f := range []struct {
		name, s string
		v       any
	}{{"macs", macs, &r.MACs}, {"hardware", hw, &r.Hardware}, {"labels", labels, &r.Labels}, {"approval", appr, &r.Approval}} {
		if err := json.Unmarshal([]byte(f.s), f.v); err != nil {
			return nil, fmt.Errorf("enrollment request %s: %s: %w", r.ID, f.name, err)
		}
	}
	if decided != 0 {
		t := eim.TimeFromUnixMilli(decided)
		r.DecidedAt = &t
	}
	r.FirstSeen, r.LastSeen = eim.TimeFromUnixMilli(first), eim.TimeFromUnixMilli(last)
	return &r, nil
}

// queryEnrollments runs a SELECT of requests in t.
func (s *Store) queryEnrollments(ctx context.Context, t *tx, where string, args ...any) ([]*eim.EnrollmentRequest, error) {
	rows, err := t.query(ctx, "SELECT "+enrollmentCols+" FROM enrollment_requests WHERE "+where, args...)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read enrollment requests: %w", err), nil))
	}
	defer rows.Close()
	var out []*eim.EnrollmentRequest
	for rows.Next() {
		r, err := scanEnrollment(rows)
		if err != nil {
			return nil, t.fail(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read enrollment requests: %w", err), nil))
	}
	return out, nil
}

func (s *Store) oneEnrollment(ctx context.Context, t *tx, lock bool, where string, args ...any) (*eim.EnrollmentRequest, error) {
	if lock && s.d.pg {
		where += " FOR UPDATE"
	}
	rs, err := s.queryEnrollments(ctx, t, where, args...)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// RecordEnrollmentCall implements eim.EnrollmentStore.
func (s *Store) RecordEnrollmentCall(ctx context.Context, project string, call eim.EnrollmentCall) (*eim.EnrollmentRequest, bool, error) {
	in := call.Request
	if project == "" || in == nil || (in.UUID == "" && in.SerialNumber == "") {
		return nil, false, eim.Errorf(eim.EINVALID, "enrollment call: project and a UUID or serial number required")
	}
	now := eim.NewTime(call.Now)
	key := in.Key()
	var (
		out   *eim.EnrollmentRequest
		wrote bool
	)
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		out, wrote = nil, false
		old, err := s.oneEnrollment(ctx, t, true, "project = ? AND identity_key = ?", project, key)
		if err != nil {
			return err
		}
		if old == nil {
			r := *in
			r.Project, r.ID, r.State, r.Attempts = project, eim.NewID(eim.KindEnrollment), eim.EnrollmentPending, 1+call.Unsaved
			r.FirstSeen, r.LastSeen = now, now
			r.DecidedAt, r.DecidedBy, r.Reason, r.RuleID, r.HostID, r.Approval = nil, "", "", "", "", eim.EnrollmentApproval{}
			res, err := t.exec(ctx, "INSERT INTO enrollment_requests ("+enrollmentCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', 0, '', '', '{}', ?, ?, ?) ON CONFLICT (project, identity_key) DO NOTHING",
				project, r.ID, key, r.UUID, r.SerialNumber, jsonText(nonNil(r.MACs)), r.Hostname, jsonText(r.Hardware), jsonText(r.Labels), r.Installed,
				string(r.State), r.Attempts, now.UnixMilli(), now.UnixMilli())
			if err != nil {
				return t.fail(s.d.translate(fmt.Errorf("record enrollment request: %w", err), nil))
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errRaced // another call of the device inserted it: read it again
			}
			out, wrote = &r, true
			return nil
		}
		// Within Quiet nothing is written, even when the device reports
		// other facts: a device cannot make a write per call.
		if call.Quiet > 0 && now.Sub(old.LastSeen.Time) < call.Quiet {
			out = old
			return nil
		}
		attempts := old.Attempts + 1 + call.Unsaved
		_, err = t.exec(ctx, "UPDATE enrollment_requests SET macs = ?, hostname = ?, hardware = ?, labels = ?, installed = ?, attempts = ?, last_seen = ? WHERE project = ? AND id = ?",
			jsonText(nonNil(in.MACs)), in.Hostname, jsonText(in.Hardware), jsonText(in.Labels), in.Installed, attempts, now.UnixMilli(), project, old.ID)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("record enrollment request: %w", err), nil))
		}
		r := *old
		r.MACs, r.Hostname, r.Hardware, r.Labels, r.Installed, r.Attempts, r.LastSeen = nonNil(in.MACs), in.Hostname, in.Hardware, in.Labels, in.Installed, attempts, now
		out, wrote = &r, true
		return nil
	})
	return out, wrote, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// FindEnrollmentRequest implements eim.EnrollmentStore.
func (s *Store) FindEnrollmentRequest(ctx context.Context, project, id string) (*eim.EnrollmentRequest, error) {
	return s.findEnrollment(ctx, project, "enrollment request "+id, "project = ? AND id = ?", project, id)
}

// FindEnrollmentRequestOfHost implements eim.EnrollmentStore.
func (s *Store) FindEnrollmentRequestOfHost(ctx context.Context, project, hostID string) (*eim.EnrollmentRequest, error) {
	if hostID == "" {
		return nil, eim.Errorf(eim.ENOTFOUND, "no enrollment request of host %q", hostID)
	}
	return s.findEnrollment(ctx, project, "enrollment request of host "+hostID, "project = ? AND host_id = ? AND state = 'APPROVED'", project, hostID)
}

func (s *Store) findEnrollment(ctx context.Context, project, what, where string, args ...any) (*eim.EnrollmentRequest, error) {
	var r *eim.EnrollmentRequest
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		r, err = s.oneEnrollment(ctx, etx.(*tx), false, where, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, eim.Errorf(eim.ENOTFOUND, "%s not found", what)
	}
	return r, nil
}

// ListEnrollmentRequests implements eim.EnrollmentStore.
func (s *Store) ListEnrollmentRequests(ctx context.Context, project string, q eim.EnrollmentQuery) ([]*eim.EnrollmentRequest, int, error) {
	where, args := []string{"project = ?"}, []any{project}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if q.UUID != "" {
		where, args = append(where, "uuid = ?"), append(args, strings.ToLower(q.UUID))
	}
	if q.Serial != "" {
		where, args = append(where, "serial_number = ?"), append(args, q.Serial)
	}
	cond := strings.Join(where, " AND ")
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	var (
		out   []*eim.EnrollmentRequest
		total int
	)
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		var err error
		out, err = s.queryEnrollments(ctx, t, cond+fmt.Sprintf(" ORDER BY first_seen DESC, id LIMIT %d OFFSET %d", limit, max(q.Offset, 0)), args...)
		if err != nil {
			return err
		}
		rows, err := t.query(ctx, "SELECT COUNT(*) FROM enrollment_requests WHERE "+cond, args...)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("count enrollment requests: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(&total); err != nil {
				return t.fail(err)
			}
		}
		return rows.Err()
	})
	return out, total, err
}

// DecideEnrollment implements eim.EnrollmentStore.
func (s *Store) DecideEnrollment(ctx context.Context, project, id string, d eim.EnrollmentDecision, admit func(eim.Tx, *eim.EnrollmentRequest) (string, error)) (*eim.EnrollmentRequest, error) {
	if d.State != eim.EnrollmentApproved && d.State != eim.EnrollmentDenied {
		return nil, eim.Errorf(eim.EINVALID, "decision: %q must be APPROVED or DENIED", d.State)
	}
	at := eim.NewTime(d.At)
	var out *eim.EnrollmentRequest
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		old, err := s.oneEnrollment(ctx, t, true, "project = ? AND id = ?", project, id)
		if err != nil {
			return err
		}
		if old == nil {
			return eim.Errorf(eim.ENOTFOUND, "enrollment request %s not found", id)
		}
		if old.State == eim.EnrollmentApproved {
			return eim.Errorf(eim.EPRECONDITION, "enrollment request %s is approved already (host %s); delete the host to enroll the device again", id, old.HostID)
		}
		if old.State == d.State {
			return eim.Errorf(eim.EPRECONDITION, "enrollment request %s is %s already", id, old.State)
		}
		r := *old
		r.State, r.DecidedBy, r.DecidedAt, r.RuleID, r.Reason = d.State, d.By, &at, d.RuleID, d.Reason
		r.Approval, r.HostID = eim.EnrollmentApproval{}, ""
		if d.State == eim.EnrollmentApproved {
			r.Approval, r.Reason = d.Approval, ""
			if admit != nil {
				if r.HostID, err = admit(etx, &r); err != nil {
					return err
				}
			}
		}
		_, err = t.exec(ctx, "UPDATE enrollment_requests SET state = ?, reason = ?, decided_by = ?, decided_at = ?, rule_id = ?, host_id = ?, approval = ? WHERE project = ? AND id = ?",
			string(r.State), r.Reason, r.DecidedBy, at.UnixMilli(), r.RuleID, r.HostID, jsonText(r.Approval), project, id)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("decide enrollment request: %w", err), nil))
		}
		ch := map[string]eim.Change{"state": {Old: mustJSON(old.State), New: mustJSON(r.State)}}
		for name, v := range map[string]string{"reason": r.Reason, "hostId": r.HostID, "ruleId": r.RuleID} {
			if v != "" {
				ch[name] = eim.Change{Old: jsonNull, New: mustJSON(v)}
			}
		}
		if d.State == eim.EnrollmentApproved {
			ch["approval"] = eim.Change{Old: jsonNull, New: mustJSON(r.Approval)}
		}
		t.addAudit(ctx, project, eim.KindEnrollment, id, eim.OpUpdated, ch)
		out = &r
		return nil
	})
	return out, err
}

// ReopenEnrollment implements eim.EnrollmentStore.
func (s *Store) ReopenEnrollment(ctx context.Context, project, id, hostID, reason string) (bool, error) {
	var done bool
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		done = false
		res, err := t.exec(ctx, "UPDATE enrollment_requests SET state = 'PENDING', reason = ?, decided_by = '', decided_at = 0, rule_id = '', host_id = '', approval = '{}' WHERE project = ? AND id = ? AND state = 'APPROVED' AND host_id = ?",
			reason, project, id, hostID)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("reopen enrollment request: %w", err), nil))
		}
		if n, _ := res.RowsAffected(); n > 0 {
			done = true
			t.addAudit(ctx, project, eim.KindEnrollment, id, eim.OpUpdated, map[string]eim.Change{
				"state":  {Old: mustJSON(eim.EnrollmentApproved), New: mustJSON(eim.EnrollmentPending)},
				"hostId": {Old: mustJSON(hostID), New: jsonNull},
				"reason": {Old: jsonNull, New: mustJSON(reason)}})
		}
		return nil
	})
	return done, err
}

// DeleteEnrollmentRequest implements eim.EnrollmentStore.
func (s *Store) DeleteEnrollmentRequest(ctx context.Context, project, id string) error {
	return s.deleteLobbyRow(ctx, project, "enrollment_requests", eim.KindEnrollment, "enrollment request", id)
}

func (s *Store) deleteLobbyRow(ctx context.Context, project, table string, k eim.Kind, what, id string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "DELETE FROM "+table+" WHERE project = ? AND id = ?", project, id)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete %s: %w", what, err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "%s %s not found", what, id)
		}
		t.addAudit(ctx, project, k, id, eim.OpDeleted, nil)
		return nil
	})
}

const ruleCols = "project, id, name, kind, serial_numbers, match_labels, token_hash, site_id, metadata, created_at"

func scanRule(sc interface{ Scan(...any) error }) (*eim.EnrollmentRule, error) {
	var (
		r                         eim.EnrollmentRule
		kind, serials, labels, md string
		created                   int64
	)
	if err := sc.Scan(&r.Project, &r.ID, &r.Name, &kind, &serials, &labels, &r.TokenHash, &r.SiteID, &md, &created); err != nil {
		return nil, err
	}
	r.Kind = eim.EnrollmentRuleKind(kind)
	for _, f := range []struct {
		name, s string
		v       any
	}{{"serialNumbers", serials, &r.SerialNumbers}, {"matchLabels", labels, &r.MatchLabels}, {"metadata", md, &r.Metadata}} {
		if err := json.Unmarshal([]byte(f.s), f.v); err != nil {
			return nil, fmt.Errorf("enrollment rule %s: %s: %w", r.ID, f.name, err)
		}
	}
	r.CreatedAt = eim.TimeFromUnixMilli(created)
	return &r, nil
}

func (s *Store) queryRules(ctx context.Context, project, where string, args ...any) ([]*eim.EnrollmentRule, error) {
	var out []*eim.EnrollmentRule
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, "SELECT "+ruleCols+" FROM enrollment_rules WHERE "+where, args...)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read enrollment rules: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRule(rows)
			if err != nil {
				return t.fail(err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read enrollment rules: %w", err), nil))
		}
		return nil
	})
	return out, err
}

// CreateEnrollmentRule implements eim.EnrollmentStore.
func (s *Store) CreateEnrollmentRule(ctx context.Context, r *eim.EnrollmentRule) error {
	if r.Project == "" {
		return eim.Errorf(eim.EINVALID, "enrollment rule: project required")
	}
	r.ID, r.CreatedAt = eim.NewID(eim.KindEnrollmentRule), eim.NewTime(s.now())
	if r.SerialNumbers == nil {
		r.SerialNumbers = []string{}
	}
	return s.run(ctx, r.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		var n int
		if err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT COUNT(*) FROM enrollment_rules WHERE project = ?"), r.Project).Scan(&n); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("count enrollment rules: %w", err), nil))
		}
		if n >= eim.MaxEnrollmentRules {
			return eim.Errorf(eim.EPRECONDITION, "project %s has %d enrollment rules, the most it may have", r.Project, n)
		}
		if r.SiteID != "" && !t.exists(ctx, "SELECT 1 FROM sites WHERE project = ? AND id = ?", r.Project, r.SiteID) {
			return eim.Errorf(eim.EINVALID, "siteId: site %s not found", r.SiteID)
		}
		_, err := t.exec(ctx, "INSERT INTO enrollment_rules ("+ruleCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			r.Project, r.ID, r.Name, string(r.Kind), jsonText(r.SerialNumbers), jsonText(r.MatchLabels), r.TokenHash, r.SiteID, jsonText(r.Metadata), r.CreatedAt.UnixMilli())
		if err != nil {
			err = s.d.translate(fmt.Errorf("create enrollment rule: %w", err), nil)
			if eim.ErrorCode(err) == eim.ECONFLICT {
				err = eim.Errorf(eim.ECONFLICT, "name: the project has an enrollment rule named %q", r.Name)
			}
			return t.fail(err)
		}
		ch := map[string]eim.Change{"name": {Old: jsonNull, New: mustJSON(r.Name)}, "kind": {Old: jsonNull, New: mustJSON(r.Kind)}}
		if r.SiteID != "" {
			ch["siteId"] = eim.Change{Old: jsonNull, New: mustJSON(r.SiteID)}
		}
		if r.TokenHash != "" {
			ch["token"] = eim.Change{Old: jsonNull, New: json.RawMessage(eim.Redacted)}
		}
		t.addAudit(ctx, r.Project, eim.KindEnrollmentRule, r.ID, eim.OpCreated, ch)
		return nil
	})
}

// ListEnrollmentRules implements eim.EnrollmentStore.
func (s *Store) ListEnrollmentRules(ctx context.Context, project string) ([]*eim.EnrollmentRule, error) {
	return s.queryRules(ctx, project, "project = ? ORDER BY created_at, name", project)
}

// FindEnrollmentRule implements eim.EnrollmentStore.
func (s *Store) FindEnrollmentRule(ctx context.Context, project, id string) (*eim.EnrollmentRule, error) {
	rs, err := s.queryRules(ctx, project, "project = ? AND id = ?", project, id)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, eim.Errorf(eim.ENOTFOUND, "enrollment rule %s not found", id)
	}
	return rs[0], nil
}

// DeleteEnrollmentRule implements eim.EnrollmentStore.
func (s *Store) DeleteEnrollmentRule(ctx context.Context, project, id string) error {
	return s.deleteLobbyRow(ctx, project, "enrollment_rules", eim.KindEnrollmentRule, "enrollment rule", id)
}

// FindEnrollmentRuleByToken implements eim.EnrollmentStore.
func (s *Store) FindEnrollmentRuleByToken(ctx context.Context, hash string) (*eim.EnrollmentRule, error) {
	if hash == "" {
		return nil, eim.Errorf(eim.ENOTFOUND, "no enrollment rule has this token")
	}
	rs, err := s.queryRules(ctx, "", "token_hash = ? AND kind = 'TOKEN'", hash)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, eim.Errorf(eim.ENOTFOUND, "no enrollment rule has this token")
	}
	return rs[0], nil
}
