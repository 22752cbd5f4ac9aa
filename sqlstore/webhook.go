package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// Webhooks and their delivery queue (eim.Store). The tables are the
// store's own role's (no tenant grant on PostgreSQL): every statement
// names the project. A webhook's creation and deletion are audited like a
// resource's, with its secret redacted.

const webhookCols = "id, project, url, event_types, secret, created_at"

func scanWebhook(sc interface{ Scan(...any) error }) (*eim.Webhook, error) {
	var (
		w      eim.Webhook
		types  []byte
		create int64
	)
	if err := sc.Scan(&w.ID, &w.Project, &w.URL, &types, &w.Secret, &create); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(types, &w.EventTypes); err != nil {
		return nil, fmt.Errorf("webhook %s: event types: %w", w.ID, err)
	}
	w.CreatedAt = eim.TimeFromUnixMilli(create)
	return &w, nil
}

// CreateWebhook implements eim.Store.
func (s *Store) CreateWebhook(ctx context.Context, w *eim.Webhook) error {
	if w.Project == "" {
		return eim.Errorf(eim.EINVALID, "project: required")
	}
	types, err := json.Marshal(w.EventTypes)
	if err != nil {
		return err
	}
	if w.ID == "" {
		w.ID = eim.NewID(eim.KindWebhook)
	}
	w.CreatedAt = eim.NewTime(s.now())
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", w.Project) {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", w.Project)
		}
		if _, err := t.exec(ctx, "INSERT INTO webhooks ("+webhookCols+") VALUES (?, ?, ?, ?, ?, ?)",
			w.ID, w.Project, w.URL, string(types), w.Secret, w.CreatedAt.UnixMilli()); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("create webhook: %w", err), nil))
		}
		t.addAudit(ctx, w.Project, eim.KindWebhook, w.ID, eim.OpCreated, map[string]eim.Change{
			"url":        {Old: jsonNull, New: mustJSON(w.URL)},
			"eventTypes": {Old: jsonNull, New: json.RawMessage(types)},
			"secret":     {Old: jsonNull, New: json.RawMessage(eim.Redacted)},
		})
		return nil
	})
}

// UpdateWebhook implements eim.Store.
func (s *Store) UpdateWebhook(ctx context.Context, w *eim.Webhook) error {
	types, err := json.Marshal(w.EventTypes)
	if err != nil {
		return err
	}
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		q := "SELECT " + webhookCols + " FROM webhooks WHERE id = ? AND project = ?"
		if s.d.pg {
			q += " FOR UPDATE"
		}
		rows, err := t.query(ctx, q, w.ID, w.Project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update webhook: %w", err), nil))
		}
		var old *eim.Webhook
		for rows.Next() {
			if old, err = scanWebhook(rows); err != nil {
				rows.Close()
				return t.fail(err)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update webhook: %w", err), nil))
		}
		if old == nil {
			return eim.Errorf(eim.ENOTFOUND, "webhook %s not found", w.ID)
		}
		if _, err := t.exec(ctx, "UPDATE webhooks SET url = ?, event_types = ?, secret = ? WHERE id = ? AND project = ?",
			w.URL, string(types), w.Secret, w.ID, w.Project); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update webhook: %w", err), nil))
		}
		if _, err := t.exec(ctx, "UPDATE webhook_deliveries SET url = ?, secret = ? WHERE webhook_id = ? AND state = ?",
			w.URL, w.Secret, w.ID, string(eim.DeliveryPending)); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update webhook: %w", err), nil))
		}
		ch := map[string]eim.Change{}
		if old.URL != w.URL {
			ch["url"] = eim.Change{Old: mustJSON(old.URL), New: mustJSON(w.URL)}
		}
		if oldTypes := mustJSON(old.EventTypes); string(oldTypes) != string(types) {
			ch["eventTypes"] = eim.Change{Old: oldTypes, New: json.RawMessage(types)}
		}
		if old.Secret != w.Secret {
			ch["secret"] = eim.Change{Old: json.RawMessage(eim.Redacted), New: json.RawMessage(eim.Redacted)}
		}
		w.CreatedAt = old.CreatedAt
		t.addAudit(ctx, w.Project, eim.KindWebhook, w.ID, eim.OpUpdated, ch)
		return nil
	})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// FindWebhook implements eim.Store.
func (s *Store) FindWebhook(ctx context.Context, project, id string) (*eim.Webhook, error) {
	w, err := scanWebhook(s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT "+webhookCols+" FROM webhooks WHERE id = ? AND project = ?"), id, project))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "webhook %s not found", id)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("find webhook: %w", err), nil)
	}
	return w, nil
}

// ListWebhooks implements eim.Store.
func (s *Store) ListWebhooks(ctx context.Context, project string) ([]*eim.Webhook, error) {
	q, vals := "SELECT "+webhookCols+" FROM webhooks", []any{}
	if project != "" {
		q, vals = q+" WHERE project = ?", append(vals, project)
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind(q+" ORDER BY created_at, id"), vals...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("list webhooks: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("list webhooks: %w", err), nil)
	}
	return out, nil
}

// DeleteWebhook implements eim.Store.
func (s *Store) DeleteWebhook(ctx context.Context, project, id string) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "DELETE FROM webhooks WHERE id = ? AND project = ?", id, project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete webhook: %w", err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "webhook %s not found", id)
		}
		if _, err := t.exec(ctx, "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND state = ?", id, string(eim.DeliveryPending)); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete webhook: %w", err), nil))
		}
		t.addAudit(ctx, project, eim.KindWebhook, id, eim.OpDeleted, nil)
		return nil
	})
}

// DeleteWebhooksOf implements eim.Store.
func (s *Store) DeleteWebhooksOf(ctx context.Context, project string) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		for _, q := range []string{"DELETE FROM webhooks WHERE project = ?", "DELETE FROM webhook_cursors WHERE project = ?"} {
			if _, err := t.exec(ctx, q, project); err != nil {
				return t.fail(s.d.translate(fmt.Errorf("delete webhooks of %s: %w", project, err), nil))
			}
		}
		return nil
	})
}

// AuditCursors implements eim.Store.
func (s *Store) AuditCursors(ctx context.Context, project string, resourceIDs []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(resourceIDs) == 0 {
		return out, nil
	}
	a := &args{pg: s.d.pg}
	q := "SELECT resource_id, seq FROM webhook_cursors WHERE project = " + a.add(project) + " AND " + s.d.inList("resource_id", a.add(s.d.listArg(resourceIDs)))
	rows, err := s.rdb.QueryContext(ctx, q, a.list...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("audit cursors: %w", err), nil)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  string
			seq int64
		)
		if err := rows.Scan(&id, &seq); err != nil {
			return nil, err
		}
		out[id] = seq
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("audit cursors: %w", err), nil)
	}
	return out, nil
}

// AuditAfter implements eim.Store.
func (s *Store) AuditAfter(ctx context.Context, project string, after map[string]int64) ([]eim.AuditRecord, error) {
	if len(after) == 0 {
		return nil, nil
	}
	a := &args{pg: s.d.pg}
	q := "SELECT seq, project, at, principal, action, kind, resource_id, changes FROM audit_log WHERE project = " + a.add(project)
	ors := make([]string, 0, len(after))
	for id, seq := range after {
		ors = append(ors, "(resource_id = "+a.add(id)+" AND seq > "+a.add(seq)+")")
	}
	q += " AND (" + strings.Join(ors, " OR ") + ") ORDER BY seq"
	rows, err := s.rdb.QueryContext(ctx, q, a.list...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("audit records: %w", err), nil)
	}
	defer rows.Close()
	var out []eim.AuditRecord
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("audit records: %w", err), nil)
	}
	return out, nil
}

// QueueEvents implements eim.Store.
func (s *Store) QueueEvents(ctx context.Context, project string, moves []eim.CursorMove) (int, error) {
	var queued int
	err := s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		queued = 0
		ids := make([]string, len(moves))
		for i, m := range moves {
			ids[i] = m.ResourceID
		}
		a := &args{pg: s.d.pg}
		q := "SELECT resource_id, seq FROM webhook_cursors WHERE project = " + a.add(project) + " AND " + s.d.inList("resource_id", a.add(s.d.listArg(ids)))
		if s.d.pg {
			q += " FOR UPDATE"
		}
		rows, err := t.queryBuilt(ctx, q, a.list)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read audit cursors: %w", err), nil))
		}
		cur := map[string]int64{}
		for rows.Next() {
			var (
				id  string
				seq int64
			)
			if err := rows.Scan(&id, &seq); err != nil {
				rows.Close()
				return t.fail(err)
			}
			cur[id] = seq
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read audit cursors: %w", err), nil))
		}
		var hooks []*eim.Webhook
		for _, m := range moves {
			at, ok := cur[m.ResourceID]
			if at != m.From {
				continue // applied already (a batch handled again after a failure)
			}
			if len(m.Events) > 0 && hooks == nil {
				if hooks, err = t.webhooksOf(ctx, project); err != nil {
					return err
				}
			}
			for _, ev := range m.Events {
				if err := t.enqueue(ctx, hooks, project, m.ResourceID, ev); err != nil {
					return err
				}
				queued++
			}
			switch {
			case m.Upto < 0:
				_, err = t.exec(ctx, "DELETE FROM webhook_cursors WHERE project = ? AND resource_id = ?", project, m.ResourceID)
			case !ok:
				_, err = t.exec(ctx, "INSERT INTO webhook_cursors (project, resource_id, seq) VALUES (?, ?, ?)", project, m.ResourceID, m.Upto)
			default:
				_, err = t.exec(ctx, "UPDATE webhook_cursors SET seq = ? WHERE project = ? AND resource_id = ?", m.Upto, project, m.ResourceID)
			}
			if err != nil {
				return t.fail(s.d.translate(fmt.Errorf("save audit cursor: %w", err), nil))
			}
		}
		return nil
	})
	return queued, err
}

// enqueue queues ev for each of hooks that subscribes to its type.
func (t *tx) enqueue(ctx context.Context, hooks []*eim.Webhook, project, resourceID string, ev eim.Notification) error {
	now := eim.NewTime(t.s.now()).UnixMilli()
	for _, w := range hooks {
		if !slices.Contains(w.EventTypes, ev.Type) {
			continue
		}
		if !ev.At.IsZero() && ev.At.Before(w.CreatedAt.Time) {
			continue // a change from before the webhook existed
		}
		// The delivery's ID is the event's per webhook, stable across
		// attempts.
		if _, err := t.exec(ctx, `INSERT INTO webhook_deliveries (id, project, webhook_id, event_type, resource_id, state, created_at, next_at, url, secret, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ev.ID+"-"+strings.TrimPrefix(w.ID, "webhook-"), project, w.ID, ev.Type, resourceID, string(eim.DeliveryPending), now, now, w.URL, w.Secret, string(ev.Body)); err != nil {
			return t.fail(t.s.d.translate(fmt.Errorf("queue delivery: %w", err), nil))
		}
	}
	return nil
}

const deliveryCols = "d.seq, d.id, d.project, d.webhook_id, d.event_type, d.resource_id, d.state, d.attempts, d.created_at, d.next_at, d.last_status, d.last_error, d.url, d.secret, d.body"

func scanDelivery(sc interface{ Scan(...any) error }) (*eim.Delivery, error) {
	var (
		d             eim.Delivery
		state, body   string
		created, next int64
	)
	if err := sc.Scan(&d.Seq, &d.ID, &d.Project, &d.WebhookID, &d.EventType, &d.ResourceID, &state, &d.Attempts, &created, &next, &d.LastStatus, &d.LastError, &d.URL, &d.Secret, &body); err != nil {
		return nil, err
	}
	d.State, d.Body = eim.DeliveryState(state), []byte(body)
	d.CreatedAt, d.NextAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(next)
	return &d, nil
}

// DueDeliveries implements eim.Store.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int, skip []string) ([]*eim.Delivery, error) {
	a := &args{pg: s.d.pg}
	q := "SELECT " + deliveryCols + " FROM webhook_deliveries d WHERE d.state = " + a.add(string(eim.DeliveryPending)) +
		" AND d.next_at <= " + a.add(eim.NewTime(now).UnixMilli()) +
		" AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.webhook_id = d.webhook_id AND e.resource_id = d.resource_id AND e.state = " + a.add(string(eim.DeliveryPending)) + " AND e.seq < d.seq)"
	if len(skip) > 0 {
		q += " AND NOT " + s.d.inList("d.webhook_id", a.add(s.d.listArg(skip)))
	}
	q += " ORDER BY d.seq LIMIT " + a.add(limit)
	rows, err := s.rdb.QueryContext(ctx, q, a.list...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("due deliveries: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("due deliveries: %w", err), nil)
	}
	return out, nil
}

// SaveDelivery implements eim.Store.
func (s *Store) SaveDelivery(ctx context.Context, d *eim.Delivery) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind("UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, last_status = ?, last_error = ? WHERE seq = ?"),
		string(d.State), d.Attempts, d.NextAt.UnixMilli(), d.LastStatus, d.LastError, d.Seq); err != nil {
		return s.d.translate(fmt.Errorf("save delivery: %w", err), nil)
	}
	return nil
}

// Deliveries implements eim.Store.
func (s *Store) Deliveries(ctx context.Context, project, webhookID string, limit, offset int) ([]*eim.Delivery, int, error) {
	var total int
	if err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT COUNT(*) FROM webhook_deliveries WHERE project = ? AND webhook_id = ?"), project, webhookID).Scan(&total); err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("deliveries: %w", err), nil)
	}
	q := "SELECT " + deliveryCols + " FROM webhook_deliveries d WHERE d.project = ? AND d.webhook_id = ? ORDER BY d.seq DESC"
	vals := []any{project, webhookID}
	if limit > 0 {
		q += " LIMIT ? OFFSET ?"
		vals = append(vals, limit, offset)
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind(q), vals...)
	if err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("deliveries: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.d.translate(fmt.Errorf("deliveries: %w", err), nil)
	}
	return out, total, nil
}

func (t *tx) webhooksOf(ctx context.Context, project string) ([]*eim.Webhook, error) {
	rows, err := t.query(ctx, "SELECT "+webhookCols+" FROM webhooks WHERE project = ? ORDER BY created_at, id", project)
	if err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read webhooks: %w", err), nil))
	}
	defer rows.Close()
	var out []*eim.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, t.fail(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("read webhooks: %w", err), nil))
	}
	return out, nil
}
