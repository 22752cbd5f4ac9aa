// Package filter compiles the list parameters of the northbound API into SQL:
// AIP-160 filters ("name=edge* AND site.region.name=eu") into a WHERE
// expression and AIP-132 orders ("name desc, resourceId") into an ORDER BY
// list, for SQLite and PostgreSQL.
//
// Field names, columns and edges come from eim.SchemaOf, and the SQL assumes
// the storage conventions of package sqlstore: one table per kind, `id`
// primary key, `project` tenant column, strings and enums TEXT (empty when
// unset), references NULL when absent, integers BIGINT, booleans BOOLEAN
// (PostgreSQL) or INTEGER 0/1 (SQLite), eim.Time as unix milliseconds, other
// slices and structs as JSON text (JSONB on PostgreSQL).
//
// What a filter may say:
//
//   - comparisons field op value with = != < <= > >=, combined with AND, OR
//     (which binds tighter than AND, as AIP-160 says), NOT or a leading -,
//     parentheses, and spaces (an implicit AND);
//   - has(ref) and has(ref.field) for presence, over forward references
//     (host.site) and back references (host.instance: the instance whose
//     host is this host);
//   - fields in camelCase or snake_case, nested over references up to five
//     levels (site.region.name), each level an uncorrelated IN subquery over
//     the reference column (hosts.site_id IN (SELECT t1.id FROM sites t1
//     WHERE …)) that the engine runs once and joins through the column's
//     index; site.resourceId compared with a full ID is the column itself;
//   - strings: = is a case-insensitive substring match in which * matches
//     any run, != its negation, "" an empty field; a full ID compared to
//     resourceId or a reference is plain equality;
//   - enums: exact names, checked against the enum's values (the
//     unspecified one also matches the unset, empty value);
//   - integers, booleans, and times (RFC 3339 or unix seconds);
//   - metadata='{"key":"k","value":"v"}' or '{"key":"k"}' for labels, or
//     several of them separated by commas for a resource holding them all,
//     and list=value for a list of strings that holds value.
//
// The ":" operator, functions other than has, and global text search are
// rejected with EINVALID, as are unknown fields, unstored fields and
// characters outside the original API's pattern (plus <, > and !).
//
// Parsing uses go.einride.tech/aip/filtering's Parser (its lexer and
// grammar, not its type checker): it parses the whole AIP-160 grammar,
// including has(site), single-quoted strings, `*` in
// values, `-` negation and implicit AND, and costs only the protobuf
// expression types it returns. This package walks the returned expression
// tree and type-checks every comparison against the kind's Schema itself.
package filter

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/eimhq/eim"
	"go.einride.tech/aip/filtering"
)

// Dialect is the SQL flavour.
type Dialect int

// The supported dialects.
const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// MaxLength is the longest filter or orderBy accepted, as in the original API.
const MaxLength = 1000

// maxDepth is how many edges a nested field may cross (site.region.name
// crosses two), as in the original API.
const maxDepth = 5

// Where compiles an AIP-160 filter for kind k into a SQL boolean expression
// over the kind's table, referenced by its table name (e.g.
// "hosts.desired_state"). Placeholders are "?" for SQLite and "$N" for
// Postgres, numbered from argBase+1. Nested paths over edges compile to
// uncorrelated IN subqueries over the reference columns, which select the
// rows a correlated EXISTS would and compose under OR and NOT, but let the
// engine use the columns' indexes. An empty filter yields "" and no args.
// Errors are *eim.Error EINVALID naming the problem.
func Where(d Dialect, k eim.Kind, filter string, argBase int) (sql string, args []any, err error) {
	s := eim.SchemaOf(k)
	if s == nil {
		return "", nil, eim.Errorf(eim.EINVALID, "filter: unknown kind %q", k)
	}
	return WhereSchema(d, s, filter, argBase)
}

// WhereSchema is Where over a schema that is not a resource kind's (the
// audit log's, eim.AuditSchema), with the same storage conventions.
func WhereSchema(d Dialect, s *eim.Schema, filter string, argBase int) (sql string, args []any, err error) {
	if d != SQLite && d != Postgres {
		return "", nil, eim.Errorf(eim.EINTERNAL, "filter: unknown dialect %v", d)
	}
	if err := checkChars("filter", filter, isFilterChar); err != nil {
		return "", nil, err
	}
	lead := len(filter) - len(strings.TrimLeft(filter, " "))
	filter = strings.TrimSpace(filter)
	if filter == "" {
		return "", nil, nil
	}
	var p filtering.Parser
	p.Init(filter)
	parsed, err := p.Parse()
	if err != nil {
		return "", nil, syntaxError(err, filter, lead)
	}
	c := &compiler{
		d:      d,
		base:   argBase,
		filter: filter,
		lead:   lead,
		pos:    parsed.GetSourceInfo().GetPositions(),
		conj:   true,
	}
	sql, err = c.expr(s, s.Table, parsed.GetExpr())
	if err != nil {
		return "", nil, err
	}
	return sql, c.args, nil
}

// isFilterChar reports whether r may appear in a filter: the original API's
// pattern ^[a-zA-Z-_0-9.,:/=*(){}"' ]+$ plus the comparison operators.
func isFilterChar(r rune) bool {
	return isOrderChar(r) || strings.ContainsRune(`:/=*(){}"'<>!`, r)
}

// isOrderChar reports whether r may appear in an orderBy: the original API's
// pattern ^[a-zA-Z-_0-9., ]+$.
func isOrderChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-_., ", r)
}

// checkChars enforces the length limit and the character set of a query
// parameter, naming the first offending character and its position.
func checkChars(param, v string, ok func(rune) bool) error {
	if len(v) > MaxLength {
		return eim.Errorf(eim.EINVALID, "%s: %d characters, at most %d allowed", param, len(v), MaxLength)
	}
	for i, r := range v {
		if !ok(r) {
			return eim.Errorf(eim.EINVALID, "%s: character %q at position %d is not allowed", param, r, i+1)
		}
	}
	return nil
}

// parseFailure is implemented by the parser's and lexer's errors.
type parseFailure interface {
	Position() filtering.Position
	Message() string
}

// tokenNames spells the parser's token names out.
var tokenNames = strings.NewReplacer("trailing token WS", "space", "token WS", "space", "token NUM", "number", "token STRING", "string", "token TEXT", "name")

// syntaxError turns a parser error into an EINVALID naming the position and
// the most specific message in the parser's chain of wrapped errors.
// filter is the parsed (trimmed) filter and lead the number of spaces
// trimmed from its start, to report positions in the filter as sent.
func syntaxError(err error, filter string, lead int) error {
	var last parseFailure
	var cause error
	for e := err; e != nil; e = errors.Unwrap(e) {
		if pf, ok := e.(parseFailure); ok {
			last = pf
			cause = nil
		} else if cause == nil {
			cause = e
		}
	}
	if last == nil {
		return eim.Errorf(eim.EINVALID, "filter: syntax error: %v", err)
	}
	msg := last.Message()
	switch {
	case errors.Is(cause, io.EOF):
		msg = "unexpected end of filter"
	case cause != nil:
		msg += ": " + cause.Error()
	}
	msg = tokenNames.Replace(msg)
	if off := int(last.Position().Offset); off < len(filter) {
		near := strings.TrimSpace(filter[off:])
		if len(near) > 20 {
			near = near[:20] + "…"
		}
		msg += fmt.Sprintf(" (near %q)", near)
	}
	if strings.Contains(msg, "token -") {
		msg += `; quote values that contain "-", e.g. name="edge-01"`
	}
	return eim.Errorf(eim.EINVALID, "filter: syntax error at position %d: %s", int(last.Position().Column)+lead, msg)
}
