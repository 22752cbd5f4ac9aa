package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// CountBy returns how many resources of kind k match q per combination of
// the values of fields: one GROUP BY query, which reads an index on the
// fields when there is one rather than the rows.
func (t *tx) CountBy(ctx context.Context, k eim.Kind, q eim.Query, fields ...string) ([]eim.Group, error) {
	c, err := t.codec(k)
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, eim.Errorf(eim.EINVALID, "count %s: no fields to group by", k)
	}
	cols := make([]string, len(fields))
	for i, name := range fields {
		f, ok := c.schema.Field(name)
		if !ok || !f.Stored() {
			return nil, eim.Errorf(eim.EINVALID, "%s: not a stored field of %s", name, k)
		}
		col := c.byColumn[f.Column]
		if col.kind != colString && col.kind != colEdge && col.kind != colJSON {
			return nil, eim.Errorf(eim.EINVALID, "%s: %s cannot be grouped by (not text, an enum, a reference or JSON)", name, k)
		}
		cols[i] = c.table + "." + col.name
	}
	a := &args{pg: t.s.d.pg}
	where, err := t.where(c, q, a)
	if err != nil {
		return nil, err
	}
	list := strings.Join(cols, ", ")
	rows, err := t.queryBuilt(ctx, "SELECT "+list+", COUNT(*) FROM "+c.table+where+" GROUP BY "+list, a.list)
	if err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("count %s by %s: %w", k, strings.Join(fields, ", "), err), nil))
	}
	defer rows.Close()
	var out []eim.Group
	vals := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols)+1)
	for i := range vals {
		dest[i] = &vals[i]
	}
	for rows.Next() {
		var g eim.Group
		dest[len(cols)] = &g.Count
		if err := rows.Scan(dest...); err != nil {
			return nil, t.fail(err)
		}
		g.Values = make([]string, len(cols))
		for i, v := range vals {
			g.Values[i] = v.String
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(fmt.Errorf("count %s by %s: %w", k, strings.Join(fields, ", "), err), nil))
	}
	return out, nil
}
