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
	q := "UPDATE " + c.table + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ") + " " + updateReturning
	// The audit log's old values of the columns written (see audit.go):
	// on PostgreSQL read, locked, by the UPDATE itself (a CTE whose
	// columns are renamed o_*, so that the statement's own names stay
	// the table's); on SQLite, whose RETURNING cannot name them, by a
	// narrow read before it (one writer: nothing comes in between).
	var (
		old   *scanner
		extra []any
	)
	if audited(k) {
		old = (&codec{schema: c.schema, kind: c.kind, table: c.table, cols: written}).newScanner()
		if t.s.d.pg {
			sel := make([]string, 0, len(written)+1)
			ret := make([]string, len(written))
			sel = append(sel, "id AS o_id")
			for i, col := range written {
				sel = append(sel, fmt.Sprintf("%s AS o_%d", col.name, i))
				ret[i] = fmt.Sprintf("o.o_%d", i)
			}
			cte := "WITH o AS (SELECT " + strings.Join(sel, ", ") + " FROM " + c.table + " WHERE id = " + a.add(m.ResourceID)
			if t.project != "" {
				cte += " AND project = " + a.add(t.project)
			}
			q = cte + " FOR UPDATE) UPDATE " + c.table + " SET " + strings.Join(sets, ", ") + " FROM o WHERE " + c.table + ".id = o.o_id AND " +
				strings.Join(where, " AND ") + " " + updateReturning + ", " + strings.Join(ret, ", ")
			extra = old.dest
		} else {
			found, err := t.currentCols(ctx, c, old, m.ResourceID)
			if err != nil {
				return err
			}
			if !found {
				old = nil
			}
		}
	}
	rows, err := t.queryBuilt(ctx, q, a.list)
	if err != nil {
		return t.fail(t.writeError(ctx, c, r, fmt.Errorf("update %s of %s: %w", strings.Join(fields, ", "), k, err)))
	}
	if err := t.updatedWith(ctx, c, r, rows, guarded, extra); err != nil {
		return err
	}
	if old != nil {
		prev, err := old.decode()
		if err != nil {
			return t.fail(err)
		}
		t.addAudit(ctx, m.Project, k, m.ResourceID, eim.OpUpdated, diffChanges(written, prev, r))
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
