package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// body is a request body built from flags: JSON values by wire field name.
type body map[string]json.RawMessage

// fieldValue converts a command-line value into the JSON of kind k's field.
// Strings and enums are taken as they are; numbers and booleans parsed;
// lists ([]string, metadata) take a JSON array or comma-separated items
// ("a,b" or "key=value,key2=value2"); other types need JSON.
func fieldValue(k eim.Kind, name string, vals []string) (json.RawMessage, error) {
	return fieldValueOf(k, name, vals, false)
}

// fieldValueOf is fieldValue; whole takes each value of a list as one item
// (values that may hold commas, such as package sources).
func fieldValueOf(k eim.Kind, name string, vals []string, whole bool) (json.RawMessage, error) {
	f, err := writableField(k, name)
	if err != nil {
		return nil, err
	}
	last := vals[len(vals)-1]
	bad := func(want string) error {
		return usagef("%s: %q is not %s", name, last, want)
	}
	t := f.Type
	switch {
	case t == reflect.TypeFor[eim.Metadata]():
		return listValue(name, vals, func(item string) (any, error) {
			k, v, ok := strings.Cut(item, "=")
			if !ok || k == "" {
				return nil, usagef("%s: %q is not key=value", name, item)
			}
			return eim.MetadataItem{Key: k, Value: v}, nil
		})
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String && whole:
		return json.Marshal(vals)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return listValue(name, vals, func(item string) (any, error) { return item, nil })
	case t.Kind() == reflect.String:
		return json.Marshal(last)
	case t.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(last)
		if err != nil {
			return nil, bad("true or false")
		}
		return json.Marshal(b)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(last, 10, t.Bits())
		if err != nil {
			return nil, bad(fmt.Sprintf("an integer of %d bits", t.Bits()))
		}
		return json.Marshal(n)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		n, err := strconv.ParseUint(last, 10, t.Bits())
		if err != nil {
			return nil, bad(fmt.Sprintf("a non-negative integer of %d bits", t.Bits()))
		}
		return json.Marshal(n)
	}
	if !json.Valid([]byte(last)) {
		return nil, bad("JSON")
	}
	return json.RawMessage(last), nil
}

func listValue(name string, vals []string, item func(string) (any, error)) (json.RawMessage, error) {
	if len(vals) == 1 && strings.HasPrefix(strings.TrimSpace(vals[0]), "[") {
		if !json.Valid([]byte(vals[0])) {
			return nil, usagef("%s: %q is not a JSON array", name, vals[0])
		}
		return json.RawMessage(vals[0]), nil
	}
	out := []any{}
	for _, v := range vals {
		if v == "" {
			continue
		}
		for part := range strings.SplitSeq(v, ",") {
			x, err := item(part)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
	}
	return json.Marshal(out)
}

// writableField returns the field the API lets users set.
func writableField(k eim.Kind, name string) (*eim.Field, error) {
	s := eim.SchemaOf(k)
	f, ok := s.Field(name)
	if !ok || !f.Writable {
		var names []string
		for _, f := range s.Fields {
			if f.Writable && f.Name != "" {
				names = append(names, f.Name)
			}
		}
		slices.Sort(names)
		what := "unknown"
		if ok {
			what = "read-only"
		}
		return nil, usagef("field %q of %s is %s; writable fields: %s", name, k, what, strings.Join(names, ", "))
	}
	return f, nil
}

// fieldFlags collects create flags: each sets one wire field.
type fieldFlags struct {
	kind  eim.Kind
	vals  map[string][]string
	order []string
	whole map[string]bool // list fields whose values are whole items
}

func newFieldFlags(k eim.Kind) *fieldFlags {
	return &fieldFlags{kind: k, vals: map[string][]string{}, whole: map[string]bool{}}
}

func (ff *fieldFlags) add(field, v string) {
	if _, ok := ff.vals[field]; !ok {
		ff.order = append(ff.order, field)
	}
	ff.vals[field] = append(ff.vals[field], v)
}

// into converts the collected values and sets them in b, overriding.
func (ff *fieldFlags) into(b body) error {
	for _, name := range ff.order {
		raw, err := fieldValueOf(ff.kind, name, ff.vals[name], ff.whole[name])
		if err != nil {
			return err
		}
		b[name] = raw
	}
	return nil
}

// fieldFlag is the flag.Value of one field.
type fieldFlag struct {
	ff   *fieldFlags
	spec flagSpec
}

func (f *fieldFlag) String() string { return "" }

func (f *fieldFlag) Set(v string) error {
	switch {
	case f.spec.file && strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return err
		}
		v = string(b)
	case f.spec.time:
		if _, err := strconv.ParseUint(v, 10, 32); err != nil {
			t, terr := time.Parse(time.RFC3339, v)
			if terr != nil {
				return fmt.Errorf("want Unix seconds or an RFC 3339 time")
			}
			v = strconv.FormatInt(t.Unix(), 10)
		}
	}
	if f.spec.item {
		f.ff.whole[f.spec.field] = true
	}
	if prev := f.ff.vals[f.spec.field]; f.spec.lines && len(prev) > 0 {
		prev[len(prev)-1] = strings.TrimSuffix(prev[len(prev)-1], "\n") + "\n" + v
		return nil
	}
	f.ff.add(f.spec.field, v)
	return nil
}

// setFlags collects repeated --set field=value.
type setFlags struct{ ff *fieldFlags }

func (s setFlags) String() string { return "" }

func (s setFlags) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want field=value, got %q", v)
	}
	if _, err := writableField(s.ff.kind, name); err != nil {
		return err
	}
	s.ff.add(name, val)
	return nil
}

// readBodyFile reads a JSON object from path ("-" for stdin).
func readBodyFile(path string, stdin func() ([]byte, error)) (body, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = stdin()
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	b := body{}
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, usagef("--file %s: not a JSON object: %v", path, err)
	}
	return b, nil
}
