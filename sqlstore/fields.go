package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// Field-scoped writes (Tx.UpdateFields).
//
// An UPDATE that sets only the named columns, from the resource's values,
// with no read of the row before it: on PostgreSQL, where write
// transactions run at READ COMMITTED (pgWriteTx), a concurrent writer of
// other columns of the row only makes it wait for that writer's commit,
// after which it writes its columns onto the row as that writer left it;
// neither is run again. What a writer decided on and must still hold when
// it writes it names as conditions (UpdateFieldsIf), which the statement
// checks on the row it writes.

// UpdateFields writes the named fields of r.
func (t *tx) UpdateFields(ctx context.Context, r eim.Resource, fields ...string) error {
	return t.updateFields(ctx, r, nil, fields)
}

// UpdateFieldsIf writes the named fields of r while the stored row meets
// when.
func (t *tx) UpdateFieldsIf(ctx context.Context, r eim.Resource, when []eim.Cond, fields ...string) error {
	return t.updateFields(ctx, r, when, fields)
}

func (t *tx) updateFields(ctx context.Context, r eim.Resource, when []eim.Cond, fields []string) error {
	if err := t.writable(); err != nil {
		return err
	}
	if r == nil {
		return eim.Errorf(eim.EINVALID, "resource is missing")
	}
	k := r.ResourceKind()
	c, err := t.codec(k)
	if err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	m := r.Base()
	if err := eim.CheckID(k, "resourceId", m.ResourceID); err != nil {
		return err
	}
	if len(fields) == 0 {
		return eim.Errorf(eim.EINVALID, "fields: name at least one field of %s to write", k)
	}
	a := &args{pg: t.s.d.pg}
	sets := make([]string, 0, len(fields)+1)
	var written []*column
	for _, name := range fields {
		col, err := c.writableColumn(name)
		if err != nil {
			return err
		}
		if slices.Contains(written, col) {
			continue
		}
		written = append(written, col)
		v, err := col.value(r)
		if err != nil {
			return err
		}
		sets = append(sets, col.name+" = "+a.add(v))
	}
	now := eim.NewTime(t.s.now()).UnixMilli()
	sets = append(sets, setUpdatedAt(a.add(now), a.add(now)))
	where := []string{"id = " + a.add(m.ResourceID)}
	if t.project != "" {
		where = append(where, "project = "+a.add(t.project))
	}
	// A cached kind's row may come from the refCache, from before another
	// process's change: the write names the version it read (as Update).
	guarded := len(when) > 0
	if prev := m.Timestamps.UpdatedAt; cachedKinds[k] && !prev.IsZero() {
		where = append(where, "updated_at = "+a.add(prev.UnixMilli()))
		guarded = true
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
	t.forget(k, m.ResourceID, false)
	var old eim.Resource
	if audited(k) {
		if old, err = t.current(ctx, c, m.ResourceID); err != nil {
			return err
		}
	}
	q := "UPDATE " + c.table + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ") + " " + updateReturning
	rows, err := t.queryBuilt(ctx, q, a.list)
	if err != nil {
		return t.fail(t.writeError(ctx, c, r, fmt.Errorf("update %s of %s: %w", strings.Join(fields, ", "), k, err)))
	}
	if err := t.updated(ctx, c, r, rows, guarded); err != nil {
		return err
	}
	if old != nil {
		t.addAudit(ctx, m.Project, k, m.ResourceID, eim.OpUpdated, diffChanges(written, old, r))
	}
	return nil
}

// writableColumn resolves a field name of UpdateFields: a stored field's
// JSON name (or its snake_case form), or the column of a stored field
// hidden from the API. What the store keeps itself is refused.
func (c *codec) writableColumn(name string) (*column, error) {
	col := c.namedColumn(name)
	if col == nil {
		return nil, eim.Errorf(eim.EINVALID, "fields: %q is not a stored field of %s", name, c.kind)
	}
	switch col.name {
	case "id", "project", "created_at", "updated_at":
		return nil, eim.Errorf(eim.EINVALID, "fields: %s is kept by the store, not written", name)
	}
	return col, nil
}

// conditionField resolves the field of a condition of UpdateFieldsIf, as
// writableColumn does (the store's own columns included).
func (c *codec) conditionField(name string) (*eim.Field, error) {
	col := c.namedColumn(name)
	if col == nil {
		return nil, eim.Errorf(eim.EINVALID, "when: %q is not a stored field of %s", name, c.kind)
	}
	return col.field, nil
}

func (c *codec) namedColumn(name string) *column {
	if f, ok := c.schema.Field(name); ok && f.Stored() {
		return c.byColumn[f.Column]
	}
	if col := c.byColumn[name]; col != nil && col.field.Name == "" {
		return col
	}
	return nil
}
