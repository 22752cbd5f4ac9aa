package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// sqlOps maps the filter's comparison operators to SQL.
var sqlOps = map[string]string{fnEq: "=", fnNe: "<>", fnLt: "<", fnLe: "<=", fnGt: ">", fnGe: ">="}

// predicate compiles "field op value" over the row of schema s named alias.
func (c *compiler) predicate(s *eim.Schema, alias, name string, f *eim.Field, op string, v literal) (string, error) {
	col := alias + "." + f.Column
	switch classify(f) {
	case kindString, kindID:
		return c.stringPredicate(s, col, f, op, v), nil
	case kindEnum:
		return c.enumPredicate(col, name, f, op, v)
	case kindInt:
		n, err := parseInt(name, v)
		if err != nil {
			return "", err
		}
		return col + " " + sqlOps[op] + " " + c.arg(n), nil
	case kindBool:
		return c.boolPredicate(col, name, op, v)
	case kindTime:
		ms, err := parseTime(name, v)
		if err != nil {
			return "", err
		}
		return col + " " + sqlOps[op] + " " + c.arg(ms), nil
	case kindMetadata:
		return c.metadataPredicate(col, name, op, v)
	case kindStrings:
		return c.listPredicate(col, name, op, v)
	}
	return "", eim.Errorf(eim.EINVALID, "filter: %s cannot be filtered", name)
}

// stringPredicate: = is a case-insensitive substring match in which * matches
// any run of characters; != is its negation; the others compare as text. A
// full ID compared to an ID-valued field is plain equality: the same rows
// (IDs have one length), but it uses the index.
func (c *compiler) stringPredicate(s *eim.Schema, col string, f *eim.Field, op string, v literal) string {
	nullable := f.Edge != nil
	if op != fnEq && op != fnNe {
		if nullable {
			col = "COALESCE(" + col + ", '')"
		}
		return col + " " + sqlOps[op] + " " + c.arg(v.text)
	}
	idKind := s.Kind
	if f.Edge != nil {
		idKind = f.Edge.Kind
	}
	isID := classify(f) == kindID && eim.ValidID(idKind, v.text)
	if s.Kind == eim.KindAudit && f.Column == "resource_id" {
		// The audit log's resourceId holds IDs of every kind.
		k, _, _ := strings.Cut(v.text, "-")
		isID = eim.ValidID(eim.Kind(k), v.text)
	}
	if isID {
		if op == fnEq {
			return col + " = " + c.arg(v.text)
		}
		if nullable {
			return "(" + col + " IS NULL OR " + col + " <> " + c.arg(v.text) + ")"
		}
		return col + " <> " + c.arg(v.text)
	}
	if nullable {
		col = "COALESCE(" + col + ", '')"
	}
	if v.text == "" {
		// An empty value asks for an empty field: a substring match with
		// it would select every row.
		return col + " " + sqlOps[op] + " ''"
	}
	like := "LIKE"
	if c.d == Postgres {
		like = "ILIKE" // SQLite's LIKE is case-insensitive already
	}
	if op == fnNe {
		like = "NOT " + like
	}
	return col + " " + like + " " + c.arg(likePattern(v.text)) + ` ESCAPE '\'`
}

// likePattern makes a substring pattern of a filter value: LIKE's own
// metacharacters are escaped and * becomes %.
func likePattern(v string) string {
	var b strings.Builder
	b.WriteByte('%')
	for _, r := range v {
		switch r {
		case '%', '_', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '*':
			b.WriteByte('%')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('%')
	return b.String()
}

// enumPredicate matches an enum exactly. The unspecified value also matches
// the empty string, which is how an unset enum is stored.
func (c *compiler) enumPredicate(col, name string, f *eim.Field, op string, v literal) (string, error) {
	values := enumValues(f)
	if op != fnEq && op != fnNe {
		return "", eim.Errorf(eim.EINVALID, "filter: %s is an enumeration: only = and != apply, not %s", name, op)
	}
	val := ""
	for _, x := range values {
		if strings.EqualFold(x, v.text) {
			val = x
		}
	}
	if val == "" && v.text != "" {
		return "", eim.Errorf(eim.EINVALID, "filter: %s: %q is not one of %s", name, v.text, strings.Join(values, ", "))
	}
	if val == "" || val == values[0] {
		in := " IN ("
		if op == fnNe {
			in = " NOT IN ("
		}
		return col + in + c.arg("") + ", " + c.arg(values[0]) + ")", nil
	}
	return col + " " + sqlOps[op] + " " + c.arg(val), nil
}

func parseInt(name string, v literal) (int64, error) {
	t := v.text
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimPrefix(t, "-")
	var n uint64
	var err error
	if h, ok := strings.CutPrefix(strings.ToLower(t), "0x"); ok {
		n, err = strconv.ParseUint(h, 16, 64)
	} else {
		n, err = strconv.ParseUint(t, 10, 64)
	}
	if err != nil || n > math.MaxInt64 || (v.isNum && !v.isInt) {
		return 0, eim.Errorf(eim.EINVALID, "filter: %s: %q is not an integer", name, v.text)
	}
	if neg {
		return -int64(n), nil
	}
	return int64(n), nil
}

func (c *compiler) boolPredicate(col, name, op string, v literal) (string, error) {
	if op != fnEq && op != fnNe {
		return "", eim.Errorf(eim.EINVALID, "filter: %s is a boolean: only = and != apply, not %s", name, op)
	}
	b, err := strconv.ParseBool(strings.ToLower(v.text))
	if err != nil || !strings.EqualFold(v.text, strconv.FormatBool(b)) {
		return "", eim.Errorf(eim.EINVALID, "filter: %s: %q is not true or false", name, v.text)
	}
	var arg any = b
	if c.d == SQLite {
		arg = 0
		if b {
			arg = 1
		}
	}
	return col + " " + sqlOps[op] + " " + c.arg(arg), nil
}

// parseTime reads an RFC 3339 time or unix seconds as unix milliseconds.
func parseTime(name string, v literal) (int64, error) {
	if v.isInt || (v.quoted && v.text != "" && strings.Trim(v.text, "0123456789") == "") {
		sec, err := strconv.ParseInt(v.text, 10, 64)
		if err == nil && sec > -1e12 && sec < 1e12 {
			return sec * 1000, nil
		}
	} else if t, err := time.Parse(time.RFC3339Nano, v.text); err == nil {
		return t.UnixMilli(), nil
	}
	return 0, eim.Errorf(eim.EINVALID, "filter: %s: %q is not an RFC 3339 time or unix seconds", name, v.text)
}

// jsonArray is a JSON column as SQLite's json_each reads it: anything that
// is not valid JSON (an empty string) reads as an empty array.
func jsonArray(col string) string {
	return "CASE WHEN json_valid(" + col + ") THEN " + col + " ELSE '[]' END"
}

// metadataPredicate matches labels: metadata='{"key":"k","value":"v"}', or
// only the key, or several of either separated by commas
// ('{"key":"k1","value":"v1"},{"key":"k2"}', as the original's clients send
// them), which match a resource holding every one of them. Keys and values
// compare exactly, against the resource's own labels (not inherited ones).
func (c *compiler) metadataPredicate(col, name, op string, v literal) (string, error) {
	if op != fnEq && op != fnNe {
		return "", eim.Errorf(eim.EINVALID, "filter: %s: only = and != apply, not %s", name, op)
	}
	type item struct {
		Key   *string `json:"key"`
		Value *string `json:"value"`
	}
	var items []item
	dec := json.NewDecoder(strings.NewReader("[" + v.text + "]"))
	dec.DisallowUnknownFields()
	err := dec.Decode(&items)
	if err == nil && dec.More() {
		err = errors.New("trailing data")
	}
	if err == nil && len(items) == 0 {
		err = errors.New("no label")
	}
	for _, it := range items {
		if err == nil && (it.Key == nil || *it.Key == "") {
			err = errors.New("no key")
		}
	}
	if err != nil {
		return "", eim.Errorf(eim.EINVALID, `filter: %s: want '{"key":"k","value":"v"}' or '{"key":"k"}', or several of them separated by commas, got %q`, name, v.text)
	}
	var sql string
	if c.d == Postgres {
		// Containment of an array: every probe is in the labels.
		probes := make([]any, 0, len(items))
		for _, it := range items {
			probe := map[string]string{"key": *it.Key}
			if it.Value != nil {
				probe["value"] = *it.Value
			}
			probes = append(probes, probe)
		}
		sql = col + " @> " + c.arg(mustJSON(probes)) + "::jsonb"
	} else {
		terms := make([]string, 0, len(items))
		for _, it := range items {
			t := c.newAlias()
			term := "EXISTS (SELECT 1 FROM json_each(" + jsonArray(col) + ") " + t +
				" WHERE json_extract(" + t + ".value, '$.key') = " + c.arg(*it.Key)
			if it.Value != nil {
				term += " AND json_extract(" + t + ".value, '$.value') = " + c.arg(*it.Value)
			}
			terms = append(terms, term+")")
		}
		sql = strings.Join(terms, " AND ")
		if len(terms) > 1 {
			sql = "(" + sql + ")"
		}
	}
	if op == fnNe {
		sql = "NOT COALESCE(" + sql + ", FALSE)"
	}
	return sql, nil
}

// listPredicate: a list of strings "equals" a value when it holds it.
func (c *compiler) listPredicate(col, name, op string, v literal) (string, error) {
	if op != fnEq && op != fnNe {
		return "", eim.Errorf(eim.EINVALID, "filter: %s is a list: only = (contains) and != apply, not %s", name, op)
	}
	var sql string
	if c.d == Postgres {
		sql = col + " @> " + c.arg(mustJSON([]string{v.text})) + "::jsonb"
	} else {
		t := c.newAlias()
		sql = "EXISTS (SELECT 1 FROM json_each(" + jsonArray(col) + ") " + t + " WHERE " + t + ".value = " + c.arg(v.text) + ")"
	}
	if op == fnNe {
		sql = "NOT COALESCE(" + sql + ", FALSE)"
	}
	return sql, nil
}

// present compiles has(field): the field holds a non-zero value.
func (c *compiler) present(alias, name string, f *eim.Field) (string, error) {
	col := alias + "." + f.Column
	switch classify(f) {
	case kindString, kindID:
		return "COALESCE(" + col + ", '') <> ''", nil
	case kindEnum:
		return "COALESCE(" + col + ", '') NOT IN (" + c.arg("") + ", " + c.arg(enumValues(f)[0]) + ")", nil
	case kindInt, kindTime:
		return "COALESCE(" + col + ", 0) <> 0", nil
	case kindBool:
		if c.d == Postgres {
			return "COALESCE(" + col + ", FALSE)", nil
		}
		return "COALESCE(" + col + ", 0) <> 0", nil
	case kindMetadata, kindStrings:
		if c.d == Postgres {
			return "CASE WHEN jsonb_typeof(" + col + ") = 'array' THEN jsonb_array_length(" + col + ") > 0 ELSE FALSE END", nil
		}
		return "json_array_length(" + jsonArray(col) + ") > 0", nil
	}
	return "", eim.Errorf(eim.EINVALID, "filter: has(%s) is not supported", name)
}

// mustJSON marshals values that always marshal (strings, maps of strings).
func mustJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSpace(b.String())
}
