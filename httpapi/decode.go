package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// Request bodies are decoded against the kind's eim.Schema rather than
// into the Go struct directly, so that:
//   - a field unknown to the schema is a 400 naming it;
//   - read-only fields are ignored (clients PUT back what they GET,
//     including status fields and nested objects), but their values must
//     have the JSON type the field has, as in the original, whose gateway
//     (protojson) refuses a wrong type on any field it knows: a 400 naming
//     the field, down into nested objects (checkReadOnly);
//   - the set of fields present is known (PATCH without fieldMask);
//   - camelCase and snake_case names are both accepted, as protojson does;
//   - 64-bit integers may be sent as JSON strings, as protojson allows
//     (the schemas declare them strings); 32-bit ones must be numbers.

// ignoredFields are names a client of the original may send back that our
// schema does not model: read-only in the original (or, for site.provider,
// a writable field we do not support). They are ignored if their values
// are of the JSON type the original declares (an object, here).
var ignoredFields = map[eim.Kind][]string{
	eim.KindSite: {"provider"},
}

// ignored reports whether key is a field of kind k that is ignored, and
// checks its value's type; name is the field's path in messages.
func ignored(k eim.Kind, key, name string, raw json.RawMessage) (bool, error) {
	switch {
	case key == "timestamps":
		return true, checkTimestamps(name, raw)
	case slices.Contains(ignoredFields[k], key):
		_, err := jsonObject(name, raw)
		return true, err
	}
	return false, nil
}

// decodeResource decodes a JSON object into a new resource of kind k and,
// for a kind with variants, of the variant: the other variants' fields are
// unknown to it. It returns the resource and the JSON names of the writable
// fields present (never nil, so that an empty PATCH changes nothing rather
// than everything).
func decodeResource(k eim.Kind, variant string, body []byte) (eim.Resource, []string, error) {
	s := eim.SchemaOf(k)
	r := s.New()
	if s.Variant != nil {
		s.Variant.Value(r).SetString(variant)
	}
	rv := reflect.ValueOf(r).Elem()
	fields := []string{}
	err := decodeObject(body, func(key string, raw json.RawMessage) error {
		f, ok := s.Field(key)
		if !ok || !f.In(variant) {
			if ok, err := ignored(k, key, key, raw); ok {
				return err
			}
			return eim.Errorf(eim.EINVALID, "unknown field %q", key)
		}
		if !f.Writable || f.Alias {
			return checkReadOnly(f.Name, f.Type, raw, 0)
		}
		if slices.Contains(fields, f.Name) {
			return eim.Errorf(eim.EINVALID, "field %q is given twice", f.Name)
		}
		fields = append(fields, f.Name)
		return setField(f.Name, rv.FieldByIndex(f.Index), raw)
	})
	if err != nil {
		return nil, nil, err
	}
	return r, fields, nil
}

// checkReadOnly checks the value of a read-only field of type t, without
// setting it: it must have the field's JSON type (an enum's value must be
// one of its names); a nested resource's known fields are checked the same
// way, its other members ignored. JSON null is accepted for any field.
//
// depth is the number of nested resources around the value; past
// maxNestedDepth values are not looked into (an answer nests a few levels:
// a member's instance's host's site's region's parent), so that a body
// nesting objects deeply costs no more than a few passes over it.
func checkReadOnly(name string, t reflect.Type, raw json.RawMessage, depth int) error {
	if string(raw) == "null" || depth > maxNestedDepth {
		return nil
	}
	switch {
	case t == timeType:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want a string (a time)", name)
		}
	case t.Kind() == reflect.String && !t.Implements(enumType):
		// Not checked for printable text: it is not kept.
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want a string", name)
		}
	case t.Kind() == reflect.Pointer && t.Implements(resourceType):
		return checkNested(name, reflect.Zero(t).Interface().(eim.Resource).ResourceKind(), raw, depth+1)
	case t.Kind() == reflect.Pointer:
		return checkReadOnly(name, t.Elem(), raw, depth)
	case t.Kind() == reflect.Slice && t != metadataType && t.Elem().Kind() != reflect.String:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want an array", name)
		}
		for i, it := range items {
			item := fmt.Sprintf("%s[%d]", name, i)
			var err error
			if t.Elem().Implements(resourceType) {
				err = checkReadOnly(item, t.Elem(), it, depth)
			} else if string(it) != "null" {
				_, err = jsonObject(item, it)
			}
			if err != nil {
				return err
			}
		}
	default:
		// Enums, numbers, booleans, metadata and string lists: decoded
		// into a scratch value, as a writable field's would be.
		return setField(name, reflect.New(t).Elem(), raw)
	}
	return nil
}

// checkNested checks a nested resource of kind k, read-only: an object
// whose members the kind knows have their JSON types. Members it does not
// know are ignored: the original's nested messages have fields this
// server does not model, which a client may send back.
func checkNested(name string, k eim.Kind, raw json.RawMessage, depth int) error {
	members, err := jsonObject(name, raw)
	if err != nil {
		return err
	}
	s := eim.SchemaOf(k)
	for _, key := range slices.Sorted(maps.Keys(members)) {
		v := members[key]
		if f, ok := s.Field(key); ok {
			err = checkReadOnly(name+"."+f.Name, f.Type, v, depth)
		} else {
			_, err = ignored(k, key, name+"."+key, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTimestamps checks a timestamps object: createdAt and updatedAt are
// times (strings).
func checkTimestamps(name string, raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil
	}
	members, err := jsonObject(name, raw)
	if err != nil {
		return err
	}
	for _, key := range []string{"createdAt", "updatedAt"} {
		if v, ok := members[key]; ok {
			if err := checkReadOnly(name+"."+key, timeType, v, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonObject decodes raw, which must be a JSON object (or null, for none).
func jsonObject(name string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, eim.Errorf(eim.EINVALID, "%s: want an object", name)
	}
	return m, nil
}

// decodeObject checks that body is one JSON object of valid UTF-8 and calls
// fn for each member in order.
func decodeObject(body []byte, fn func(key string, raw json.RawMessage) error) error {
	if !utf8.Valid(body) {
		return eim.Errorf(eim.EINVALID, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return eim.Errorf(eim.EINVALID, "request body must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		key, ok := tok.(string)
		if !ok {
			return eim.Errorf(eim.EINVALID, "request body must be a JSON object")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntaxError(err)
		}
		if err := fn(key, raw); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return syntaxError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return eim.Errorf(eim.EINVALID, "request body has data after the JSON object")
	}
	return nil
}

func syntaxError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return eim.Errorf(eim.EINVALID, "request body is truncated JSON")
	}
	return eim.Errorf(eim.EINVALID, "request body is not valid JSON: %v", err)
}

// maxNestedDepth is how many nested resources deep checkReadOnly looks.
const maxNestedDepth = 8

var (
	enumType     = reflect.TypeFor[eim.Enum]()
	metadataType = reflect.TypeFor[eim.Metadata]()
	timeType     = reflect.TypeFor[eim.Time]()
	resourceType = reflect.TypeFor[eim.Resource]()
)

// setField decodes raw into v, the field called name.
func setField(name string, v reflect.Value, raw json.RawMessage) error {
	if string(raw) == "null" {
		v.SetZero() // protojson: null is the default value
		return nil
	}
	t := v.Type()
	switch {
	case t.Implements(enumType):
		vals := v.Interface().(eim.Enum).Values()
		var s string
		if json.Unmarshal(raw, &s) != nil || (s != "" && !slices.Contains(vals, s)) {
			return eim.Errorf(eim.EINVALID, "%s: want one of %v", name, vals)
		}
		v.SetString(s)
	case t.Kind() == reflect.String:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want a string", name)
		}
		if !printableText(s) {
			return eim.Errorf(eim.EINVALID, "%s: contains non-printable characters", name)
		}
		v.SetString(s)
	case t.Kind() == reflect.Bool:
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want a boolean", name)
		}
		v.SetBool(b)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64 && t.Bits() < 64 && len(raw) > 0 && raw[0] == '"':
		// protojson (the original's gateway) reads 64-bit integers from
		// strings, which the schemas declare as strings; those declared
		// integers (32-bit) must be numbers.
		return eim.Errorf(eim.EINVALID, "%s: want a number, not a string", name)
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(numberText(raw), 10, t.Bits())
		if err != nil {
			return eim.Errorf(eim.EINVALID, "%s: want an integer of %d bits", name, t.Bits())
		}
		v.SetInt(n)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		n, err := strconv.ParseUint(numberText(raw), 10, t.Bits())
		if err != nil {
			return eim.Errorf(eim.EINVALID, "%s: want a non-negative integer of %d bits", name, t.Bits())
		}
		v.SetUint(n)
	case t == metadataType:
		var md eim.Metadata
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&md) != nil {
			return eim.Errorf(eim.EINVALID, `%s: want an array of {"key","value"} objects`, name)
		}
		for i, it := range md {
			if !printableText(it.Key) || !printableText(it.Value) {
				return eim.Errorf(eim.EINVALID, "%s[%d]: contains non-printable characters", name, i)
			}
		}
		v.Set(reflect.ValueOf(md))
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		var ss []string
		if json.Unmarshal(raw, &ss) != nil {
			return eim.Errorf(eim.EINVALID, "%s: want an array of strings", name)
		}
		for i, s := range ss {
			if !printableText(s) {
				return eim.Errorf(eim.EINVALID, "%s[%d]: contains non-printable characters", name, i)
			}
		}
		sv := reflect.MakeSlice(t, len(ss), len(ss))
		for i, s := range ss {
			sv.Index(i).SetString(s)
		}
		v.Set(sv)
	default:
		return fmt.Errorf("httpapi: field %s of type %s has no decoder", name, t) // a schema bug: 500
	}
	return nil
}

// numberText returns the digits of a JSON number, or of a JSON string
// holding one (protojson accepts both for integers).
func numberText(raw json.RawMessage) string {
	if len(raw) >= 2 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	return string(raw)
}

// printableText reports whether s is free of control characters other
// than tab, newline and carriage return (multi-line values such as cloud-init
// configs and PEM certificates need them).
func printableText(s string) bool {
	for _, c := range s {
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return false
		}
	}
	return true
}

// fieldMask turns the fieldMask query parameter ("name,siteId" or
// "name,site_id") into JSON names of writable fields of the variant ("" for
// a kind without). Read-only paths are dropped, as read-only body fields
// are.
func fieldMask(k eim.Kind, variant, mask string) ([]string, error) {
	s := eim.SchemaOf(k)
	out := []string{}
	for _, p := range strings.Split(mask, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		f, ok := s.Field(p)
		if !ok || !f.In(variant) {
			return nil, eim.Errorf(eim.EINVALID, "fieldMask: unknown field %q", p)
		}
		if f.Writable && !f.Alias && !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out, nil
}

// decodeString, decodeBool and decodeUint decode one member of a body that
// is not a resource (registration, project).
func decodeString(name string, raw json.RawMessage, dst *string) error {
	return setField(name, reflect.ValueOf(dst).Elem(), raw)
}

func decodeBool(name string, raw json.RawMessage, dst *bool) error {
	return setField(name, reflect.ValueOf(dst).Elem(), raw)
}

func decodeUint(name string, raw json.RawMessage, bits int, dst *uint64) error {
	if string(raw) == "null" {
		*dst = 0
		return nil
	}
	if bits < 64 && len(raw) > 0 && raw[0] == '"' {
		return eim.Errorf(eim.EINVALID, "%s: want a number, not a string", name)
	}
	n, err := strconv.ParseUint(numberText(raw), 10, bits)
	if err != nil {
		return eim.Errorf(eim.EINVALID, "%s: want a non-negative integer of %d bits", name, bits)
	}
	*dst = n
	return nil
}
