package sqlstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

// List returns one page of resources of kind k matching q and the number
// matching q regardless of paging.
func (t *tx) List(ctx context.Context, k eim.Kind, q eim.Query) ([]eim.Resource, int, error) {
	c, err := t.codec(k)
	if err != nil {
		return nil, 0, err
	}
	if err := t.check(); err != nil {
		return nil, 0, err
	}
	if q.Limit < 0 || q.Offset < 0 {
		return nil, 0, eim.Errorf(eim.EINVALID, "limit and offset must not be negative")
	}
	a := &args{pg: t.s.d.pg}
	where, err := t.where(c, q, a)
	if err != nil {
		return nil, 0, err
	}
	order, err := filter.OrderBy(k, q.OrderBy)
	if err != nil {
		return nil, 0, err
	}
	// SQLite, a first page of a filtered list: when the count is read from
	// an index alone, count first. No match needs no page, and matches that
	// fit in the page are found through the index that filters them and
	// sorted, rather than by walking every row in the page's order: SQLite
	// picks the index that orders a page over the one that filters it,
	// whatever the share of rows that match, and for a rare match it walks
	// them all (a page of the "No Connection" hosts among 100,000 read every
	// wide row: 130–360 ms, where their count takes 26 ms).
	total := -1
	if !t.s.d.pg && q.Offset == 0 && q.Limit > 0 && !q.NoTotal && (q.Filter != "" || len(q.Where) > 0 || len(q.Any) > 0) {
		covered, err := t.s.coveredCount(ctx, t, c, where, a.list)
		if err != nil {
			return nil, 0, err
		}
		if covered {
			if total, err = t.count(ctx, c, where, a.list); err != nil {
				return nil, 0, err
			}
			if total == 0 {
				return nil, 0, nil
			}
			if total <= q.Limit {
				order = unindexedOrder(order)
			}
		}
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(c.selectList)
	b.WriteString(" FROM ")
	b.WriteString(c.table)
	nWhere := len(a.list)
	if q.Offset > 0 && q.Limit > 0 {
		// A deferred join: the rows skipped by the offset are walked in
		// an index (id only) rather than read in full and thrown away,
		// which is what made later pages of a large fleet slow.
		b.WriteString(" WHERE " + c.table + ".id IN (SELECT " + c.table + ".id FROM " + c.table + where + " ORDER BY " + order)
		b.WriteString(" LIMIT " + a.add(q.Limit) + " OFFSET " + a.add(q.Offset) + ")")
		b.WriteString(" ORDER BY " + order)
	} else {
		b.WriteString(where)
		b.WriteString(" ORDER BY ")
		b.WriteString(order)
		if q.Limit > 0 {
			b.WriteString(" LIMIT " + a.add(q.Limit))
		} else if q.Offset > 0 && !t.s.d.pg {
			b.WriteString(" LIMIT -1")
		}
		if q.Offset > 0 {
			b.WriteString(" OFFSET " + a.add(q.Offset))
		}
	}
	rows, err := t.queryBuilt(ctx, b.String(), a.list)
	if err != nil {
		return nil, 0, t.fail(t.s.d.translate(fmt.Errorf("list %s: %w", k, err), nil))
	}
	items, err := t.scanAll(c, rows, "")
	if err != nil {
		return nil, 0, err
	}
	if total >= 0 {
		return items, total, nil
	}
	// The page tells the total when it is not cut by the limit.
	if len(items) > 0 || q.Offset == 0 {
		if q.Limit == 0 || len(items) < q.Limit {
			return items, q.Offset + len(items), nil
		}
	}
	if q.NoTotal {
		return items, -1, nil
	}
	total, err = t.count(ctx, c, where, a.list[:nWhere])
	if err != nil {
		return nil, 0, err
	}
	return items, total, nil
}

// unindexedOrder turns "hosts.name DESC, hosts.id" into "+hosts.name DESC,
// +hosts.id": the same order (a unary + keeps a column's value and its
// collation), which SQLite will not take from an index, so it plans for the
// WHERE clause alone.
func unindexedOrder(order string) string {
	keys := strings.Split(order, ", ")
	for i, k := range keys {
		keys[i] = "+" + k
	}
	return strings.Join(keys, ", ")
}

// coveredCount reports whether SQLite counts rows of c matching where from
// an index alone, without reading the table's rows: then a count costs
// little next to the page. The answer depends on the statement's shape
// only (SQLite plans with unbound parameters), and is kept per statement.
func (s *Store) coveredCount(ctx context.Context, t *tx, c *codec, where string, args []any) (bool, error) {
	stmt := "SELECT COUNT(*) FROM " + c.table + where
	if v, ok := s.covered.Load(stmt); ok {
		return v.(bool), nil
	}
	rows, err := t.queryBuilt(ctx, "EXPLAIN QUERY PLAN "+stmt, args)
	if err != nil {
		return false, t.fail(s.d.translate(fmt.Errorf("plan count of %s: %w", c.kind, err), nil))
	}
	defer rows.Close()
	covered := true
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return false, t.fail(fmt.Errorf("plan count of %s: %w", c.kind, err))
		}
		// The outer table (subqueries use aliases t1, t2…).
		if (strings.HasPrefix(detail, "SEARCH "+c.table+" ") || strings.HasPrefix(detail, "SCAN "+c.table)) &&
			!strings.Contains(detail, "COVERING INDEX") {
			covered = false
		}
	}
	if err := rows.Err(); err != nil {
		return false, t.fail(s.d.translate(fmt.Errorf("plan count of %s: %w", c.kind, err), nil))
	}
	s.covered.Store(stmt, covered)
	return covered, nil
}

// Count returns how many resources of kind k match q.
func (t *tx) Count(ctx context.Context, k eim.Kind, q eim.Query) (int, error) {
	c, err := t.codec(k)
	if err != nil {
		return 0, err
	}
	if err := t.check(); err != nil {
		return 0, err
	}
	a := &args{pg: t.s.d.pg}
	where, err := t.where(c, q, a)
	if err != nil {
		return 0, err
	}
	return t.count(ctx, c, where, a.list)
}

// maxInlineList is the longest list condition SQLite gets as parameters.
const maxInlineList = 100

// inlineLen is the number of parameters a list of n values is given: the
// next of 1, 2, 4, …, 64 and maxInlineList.
func inlineLen(n int) int {
	l := 1
	for l < n && l < 64 {
		l *= 2
	}
	if l < n {
		return maxInlineList
	}
	return l
}

// where renders " WHERE …" (or "") for the scope, the conditions and the
// filter of q.
func (t *tx) where(c *codec, q eim.Query, a *args) (string, error) {
	var preds []string
	if t.project != "" {
		preds = append(preds, c.table+".project = "+a.add(t.project))
	}
	for _, cond := range q.Where {
		p, err := t.cond(c, cond, a)
		if err != nil {
			return "", err
		}
		preds = append(preds, p)
	}
	if len(q.Any) > 0 {
		var alts []string
		for _, cond := range q.Any {
			p, err := t.cond(c, cond, a)
			if err != nil {
				return "", err
			}
			alts = append(alts, p)
		}
		preds = append(preds, "("+strings.Join(alts, " OR ")+")")
	}
	if q.Variant != "" {
		if c.schema.Variant == nil {
			return "", eim.Errorf(eim.EINVALID, "%s has no variants", c.kind)
		}
		preds = append(preds, c.table+"."+c.schema.Variant.Column+" = "+a.add(q.Variant))
	}
	if q.Filter != "" {
		f, fargs, err := filter.Where(t.s.d.filter, c.kind, q.Filter, len(a.list))
		if err != nil {
			return "", err
		}
		if f != "" {
			a.list = append(a.list, fargs...)
			preds = append(preds, "("+f+")")
		}
	}
	if len(preds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(preds, " AND "), nil
}

// cond renders one exact-match condition.
func (t *tx) cond(c *codec, cond eim.Cond, a *args) (string, error) {
	f, ok := c.schema.StoredField(cond.Field)
	if !ok || !f.Stored() {
		return "", eim.Errorf(eim.EINVALID, "%s: not a stored field of %s", cond.Field, c.kind)
	}
	return t.condOn(c, f, cond, a)
}

// condOn renders one exact-match condition on the stored field f.
func (t *tx) condOn(c *codec, f *eim.Field, cond eim.Cond, a *args) (string, error) {
	col := c.byColumn[f.Column]
	name := c.table + "." + col.name
	if f.Fold && col.kind == colString {
		return t.foldCond(name, cond, a)
	}
	switch v := cond.Value.(type) {
	case nil:
		return emptyPred(col, name), nil
	case []string:
		if len(v) == 0 {
			return "1 = 0", nil
		}
		if !t.s.d.pg && len(v) <= maxInlineList {
			// SQLite plans "col IN (SELECT value FROM json_each(?))" as a
			// walk of the whole project in id order with a bloom filter
			// (it cannot tell how many values the JSON holds); a list of
			// parameters gets the index on col.
			// Padded to a few lengths with the last value (harmless in
			// IN), so that the statement texts, which are prepared once
			// seen (see stmtCache), stay few.
			ps := make([]string, inlineLen(len(v)))
			for i := range ps {
				ps[i] = a.add(v[min(i, len(v)-1)])
			}
			return name + " IN (" + strings.Join(ps, ", ") + ")", nil
		}
		return t.s.d.inList(name, a.add(t.s.d.listArg(v))), nil
	}
	rv := reflect.ValueOf(cond.Value)
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.String {
		// A list of a named string type, e.g. []eim.HostState.
		vs := make([]string, rv.Len())
		for i := range vs {
			vs[i] = rv.Index(i).String()
		}
		return t.condOn(c, f, eim.Cond{Field: cond.Field, Value: vs}, a)
	}
	if col.kind == colString || col.kind == colEdge {
		if rv.Kind() != reflect.String {
			return "", eim.Errorf(eim.EINVALID, "%s: want a string, got %T", cond.Field, cond.Value)
		}
		if rv.String() == "" {
			return emptyPred(col, name), nil
		}
		if col.kind == colString {
			// The redundant term lets the planners use the partial
			// unique indexes "WHERE col <> ''" (hosts' uuid) for a
			// bound value; without it SQLite scans the table.
			return "(" + name + " = " + a.add(rv.String()) + " AND " + name + " <> '')", nil
		}
		return name + " = " + a.add(rv.String()), nil
	}
	// Other kinds: encode like a stored value of the field.
	holder := reflect.New(c.schema.Type)
	fv := holder.Elem().FieldByIndex(f.Index)
	if !rv.Type().ConvertibleTo(fv.Type()) || (rv.Kind() == reflect.String) != (fv.Kind() == reflect.String) {
		return "", eim.Errorf(eim.EINVALID, "%s: want a %s, got %T", cond.Field, fv.Type(), cond.Value)
	}
	fv.Set(rv.Convert(fv.Type()))
	val, err := col.value(holder.Interface().(eim.Resource))
	if err != nil {
		return "", err
	}
	return name + " = " + a.add(val), nil
}

// foldCond is cond for a field compared without regard to case (eim:"fold"):
// on lower(col), which the field's unique index covers.
func (t *tx) foldCond(name string, cond eim.Cond, a *args) (string, error) {
	lower := "lower(" + name + ")"
	switch v := cond.Value.(type) {
	case nil:
		return name + " = ''", nil
	case string:
		if v == "" {
			return name + " = ''", nil
		}
		// The redundant term lets the planners use the partial unique
		// index "WHERE col <> ''".
		return "(" + lower + " = " + a.add(strings.ToLower(v)) + " AND " + name + " <> '')", nil
	case []string:
		if len(v) == 0 {
			return "1 = 0", nil
		}
		vs := make([]string, len(v))
		for i, s := range v {
			vs[i] = strings.ToLower(s)
		}
		return "(" + t.s.d.inList(lower, a.add(t.s.d.listArg(vs))) + " AND " + name + " <> '')", nil
	}
	return "", eim.Errorf(eim.EINVALID, "%s: want a string, got %T", cond.Field, cond.Value)
}

func emptyPred(col *column, name string) string {
	switch col.kind {
	case colEdge:
		return name + " IS NULL"
	case colString:
		return name + " = ''"
	case colJSON:
		return name + " IN ('[]', '{}', 'null')"
	case colBool:
		return name + " = FALSE"
	default:
		return name + " = 0"
	}
}
