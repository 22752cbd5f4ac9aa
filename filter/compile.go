package filter

import (
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	expr "google.golang.org/genproto/googleapis/api/expr/v1alpha1"
)

// compiler holds the state of one Where call: the arguments collected so
// far and the counter that makes subquery aliases unique.
type compiler struct {
	d      Dialect
	base   int
	args   []any
	alias  int
	filter string          // the filter, trimmed
	lead   int             // spaces trimmed from its start
	pos    map[int64]int32 // expression id → offset in filter
	// conj is set while compiling a term of the top-level AND chain, which
	// the filter's rows must all satisfy (not under OR or NOT).
	conj bool
}

// arg records an argument and returns its placeholder.
func (c *compiler) arg(v any) string {
	c.args = append(c.args, v)
	if c.d == Postgres {
		return "$" + strconv.Itoa(c.base+len(c.args))
	}
	return "?"
}

// newAlias returns a table alias unique within the expression.
func (c *compiler) newAlias() string {
	c.alias++
	return "t" + strconv.Itoa(c.alias)
}

// at returns the 1-based position of e in the filter, for messages.
func (c *compiler) at(e *expr.Expr) int {
	return c.lead + int(c.pos[e.GetId()]) + 1
}

// The function names the parser gives the AIP-160 operators.
const (
	fnAnd   = "AND"
	fnOr    = "OR"
	fnNot   = "NOT"
	fnFuzzy = "FUZZY" // implicit AND: terms separated by spaces
	fnHas   = ":"
	fnEq    = "="
	fnNe    = "!="
	fnLt    = "<"
	fnLe    = "<="
	fnGt    = ">"
	fnGe    = ">="
)

// expr compiles a boolean expression over the row of schema s named alias.
func (c *compiler) expr(s *eim.Schema, alias string, e *expr.Expr) (string, error) {
	call := e.GetCallExpr()
	if call == nil {
		return "", c.bareValue(e)
	}
	if call.GetTarget() != nil {
		return "", eim.Errorf(eim.EINVALID, "filter: method call %q at position %d is not supported", call.GetFunction(), c.at(e))
	}
	args := call.GetArgs()
	switch fn := call.GetFunction(); fn {
	case fnAnd, fnFuzzy, fnOr:
		if len(args) != 2 {
			return "", eim.Errorf(eim.EINVALID, "filter: malformed %s at position %d", fn, c.at(e))
		}
		conj := c.conj
		if fn == fnOr {
			c.conj = false
		}
		l, err := c.expr(s, alias, args[0])
		if err != nil {
			return "", err
		}
		r, err := c.expr(s, alias, args[1])
		if err != nil {
			return "", err
		}
		c.conj = conj
		op := " AND "
		if fn == fnOr {
			op = " OR "
		}
		return "(" + l + op + r + ")", nil
	case fnNot:
		if len(args) != 1 {
			return "", eim.Errorf(eim.EINVALID, "filter: malformed NOT at position %d", c.at(e))
		}
		conj := c.conj
		c.conj = false
		x, err := c.expr(s, alias, args[0])
		if err != nil {
			return "", err
		}
		c.conj = conj
		// COALESCE keeps NOT two-valued should a column hold NULL.
		return "NOT COALESCE(" + x + ", FALSE)", nil
	case fnHas:
		return "", eim.Errorf(eim.EINVALID, `filter: the ":" (has) operator at position %d is not supported; use = for a substring match or has(field)`, c.at(e))
	case fnEq, fnNe, fnLt, fnLe, fnGt, fnGe:
		if len(args) != 2 {
			return "", eim.Errorf(eim.EINVALID, "filter: malformed comparison at position %d", c.at(e))
		}
		return c.comparison(s, alias, fn, args[0], args[1])
	case "has":
		if len(args) != 1 {
			return "", eim.Errorf(eim.EINVALID, "filter: has() at position %d takes one field, got %d arguments", c.at(e), len(args))
		}
		return c.has(s, alias, args[0])
	default:
		return "", eim.Errorf(eim.EINVALID, "filter: unsupported function %q at position %d (supported: has)", fn, c.at(e))
	}
}

// bareValue explains a term that is not a restriction (AIP-160's global
// text search, which the API does not offer).
func (c *compiler) bareValue(e *expr.Expr) error {
	v := e.GetIdentExpr().GetName()
	if v == "" {
		if p, ok := path(e); ok {
			v = strings.Join(p, ".")
		} else if k := e.GetConstExpr(); k != nil {
			v = c.raw(e)
		}
	}
	msg := "filter: %q at position %d is not a restriction; write field=value"
	switch strings.ToUpper(v) {
	case "AND", "OR", "NOT":
		msg += " (AND, OR and NOT must be upper case)"
	}
	return eim.Errorf(eim.EINVALID, msg, v, c.at(e))
}

// path returns the names of a member expression (site.region.name).
func path(e *expr.Expr) ([]string, bool) {
	switch {
	case e.GetIdentExpr() != nil:
		return []string{e.GetIdentExpr().GetName()}, true
	case e.GetSelectExpr() != nil:
		sel := e.GetSelectExpr()
		if sel.GetTestOnly() {
			return nil, false
		}
		p, ok := path(sel.GetOperand())
		if !ok {
			return nil, false
		}
		return append(p, sel.GetField()), true
	}
	return nil, false
}

// raw returns the source text of a literal that starts at e's position: the
// parser keeps numbers only as values, and "0012" must stay "0012" when it
// is compared to a string field.
func (c *compiler) raw(e *expr.Expr) string {
	start, ok := c.pos[e.GetId()]
	if !ok || int(start) >= len(c.filter) {
		return ""
	}
	end := int(start)
	for end < len(c.filter) && strings.IndexByte("-.0123456789abcdefxABCDEFX", c.filter[end]) >= 0 {
		end++
	}
	return c.filter[start:end]
}

// comparison compiles field op value.
func (c *compiler) comparison(s *eim.Schema, alias, op string, lhs, rhs *expr.Expr) (string, error) {
	names, ok := path(lhs)
	if !ok {
		return "", eim.Errorf(eim.EINVALID, "filter: the left side of %s at position %d must be a field name", op, c.at(lhs))
	}
	v, err := c.literal(rhs)
	if err != nil {
		return "", err
	}
	r, err := resolve(s, names)
	if err != nil {
		return "", err
	}
	if r.field == nil {
		return "", eim.Errorf(eim.EINVALID, "filter: %s is a reference; compare %s.resourceId or use has(%s)", r.name, r.name, r.name)
	}
	if n := len(r.steps); n > 0 && !r.steps[n-1].Back && r.field.Column == "id" &&
		(op == fnEq || op == fnNe) && eim.ValidID(r.schema.Kind, v.text) {
		last := r.steps[n-1]
		return c.nest(alias, r.steps[:n-1], func(a string) (string, error) {
			return c.edgeID(a, last, op, v.text), nil
		})
	}
	return c.nest(alias, r.steps, func(a string) (string, error) {
		return c.predicate(r.schema, a, r.name, r.field, op, v)
	})
}

// has compiles has(path): the reference or field at the end of path is set.
func (c *compiler) has(s *eim.Schema, alias string, arg *expr.Expr) (string, error) {
	names, ok := path(arg)
	if !ok {
		return "", eim.Errorf(eim.EINVALID, "filter: has() at position %d takes a field name", c.at(arg))
	}
	r, err := resolve(s, names)
	if err != nil {
		return "", err
	}
	return c.nest(alias, r.steps, func(a string) (string, error) {
		switch {
		case r.field != nil:
			return c.present(a, r.name, r.field)
		case r.edge.Back:
			return c.nest(a, []*eim.Edge{r.edge}, func(string) (string, error) { return "", nil })
		default:
			col := a + "." + r.edge.Column
			return "(" + col + " IS NOT NULL AND " + col + " <> '')", nil
		}
	})
}

// literal is the right side of a comparison.
type literal struct {
	text   string // the value as written, unquoted
	quoted bool   // written as a string
	isInt  bool   // written as an integer
	isNum  bool   // written as a number (integer or not)
	pos    int
}

func (c *compiler) literal(e *expr.Expr) (literal, error) {
	lit := literal{pos: c.at(e)}
	if k := e.GetConstExpr(); k != nil {
		switch k.GetConstantKind().(type) {
		case *expr.Constant_StringValue:
			lit.text, lit.quoted = k.GetStringValue(), true
		case *expr.Constant_Int64Value:
			lit.text, lit.isInt, lit.isNum = c.raw(e), true, true
		case *expr.Constant_DoubleValue:
			lit.text, lit.isNum = c.raw(e), true
		case *expr.Constant_BoolValue:
			lit.text = strconv.FormatBool(k.GetBoolValue())
		default:
			return lit, eim.Errorf(eim.EINVALID, "filter: unsupported value at position %d", lit.pos)
		}
		return lit, nil
	}
	// Unquoted text (HOST_STATE_ONBOARDED, true, edge*01) and dotted text.
	if p, ok := path(e); ok {
		lit.text = strings.Join(p, ".")
		return lit, nil
	}
	return lit, eim.Errorf(eim.EINVALID, "filter: the value at position %d must be a string, number or name", lit.pos)
}

// nest wraps inner, an expression over the row at the end of the edges,
// into IN subqueries that walk the edges from the row named alias. An inner
// that returns "" only tests that the edges lead somewhere.
//
// Each level is an uncorrelated subquery over the edge's column, which the
// engine evaluates once and then probes the column's index with (or hashes):
//
//	forward (host.site):    hosts.site_id IN (SELECT t1.id FROM sites t1 WHERE …)
//	back (host ← instance): hosts.id IN (SELECT t1.host_id FROM instances t1 WHERE … AND t1.host_id IS NOT NULL)
//
// A correlated EXISTS selects the same rows, but SQLite runs it once per row
// of the outer table (PostgreSQL does so under OR and NOT): a scan of
// 100,000 hosts for site.name="x". TestWherePlanUsesIndex holds SQLite's
// plans to the index.
//
// The subqueries need not compare projects: every reference column of
// sqlstore's schema (sqlstore/migrations/*/0001_init.sql) has a composite
// foreign key, (project, site_id) REFERENCES sites (project, id) and the
// like, so the row a forward edge leads to, and every row a back edge
// collects, is in the outer row's project. For the same reason a non-NULL
// forward column always leads to a row, which edgeID relies on.
//
// On PostgreSQL, a term of the top-level AND chain (c.conj) still pairs the
// projects, (hosts.project, hosts.site_id) IN (SELECT t1.project, t1.id …):
// the planner turns it into a join, infers t1.project = <the scope's
// project> and so can use the (project, …) indexes on the inner side too.
// Under OR and NOT the subquery becomes a hashed lookup, for which the
// single column is cheaper. SQLite probes its index through the single
// column and is slower with the pair.
//
// Three-valued logic: x IN (subquery) is NULL, not FALSE, when x is NULL
// and the subquery selects rows (and when the subquery selects a NULL
// besides). A WHERE clause rejects NULL as it rejects FALSE, AND and OR map
// NULL operands to a NULL or to the result FALSE would give, and NOT wraps
// its operand in COALESCE(…, FALSE); so the IN forms select exactly the rows
// EXISTS would.
func (c *compiler) nest(alias string, edges []*eim.Edge, inner func(alias string) (string, error)) (string, error) {
	if len(edges) == 0 {
		return inner(alias)
	}
	e := edges[0]
	to := eim.SchemaOf(e.Kind)
	t := c.newAlias()
	rest, err := c.nest(t, edges[1:], inner)
	if err != nil {
		return "", err
	}
	var conds []string
	if rest != "" {
		conds = append(conds, rest)
	}
	outer, sel := alias+"."+e.Column, t+".id"
	if e.Back {
		outer, sel = alias+".id", t+"."+e.Column
		conds = append(conds, sel+" IS NOT NULL")
	}
	if c.d == Postgres && c.conj {
		outer, sel = "("+alias+".project, "+outer+")", t+".project, "+sel
	}
	sql := outer + " IN (SELECT " + sel + " FROM " + to.Table + " " + t
	if len(conds) > 0 {
		sql += " WHERE " + strings.Join(conds, " AND ")
	}
	return sql + ")", nil
}

// edgeID compiles ref.resourceId = "<full ID>" (or !=), the last step of
// a path over forward edges, to a comparison of the reference column:
// hosts.site_id = ? rather than a subquery over sites. A non-NULL reference
// always leads to a row (see nest), so these are the rows the subquery
// would select: = holds where the column holds the ID; != where it holds
// another ID, and, like every comparison across an absent edge, not where
// it is NULL (col <> ? is then NULL, which selects nothing and which NOT
// turns into TRUE).
func (c *compiler) edgeID(alias string, e *eim.Edge, op string, id string) string {
	col := alias + "." + e.Column
	if op == fnEq {
		return col + " = " + c.arg(id)
	}
	return col + " <> " + c.arg(id)
}
