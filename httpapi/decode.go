package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
//   - read-only fields are skipped without looking at their values (clients
//     PUT back what they GET, including status fields and nested objects);
//   - the set of fields present is known (PATCH without fieldMask);
//   - camelCase and snake_case names are both accepted, as protojson does;
//   - 64-bit integers may be sent as JSON strings, as protojson allows
//     (the schemas declare them strings); 32-bit ones must be numbers.

// ignoredFields are names a client of the original may send back that our
// schema does not model: read-only in the original (or, for site.provider,
// a writable field we do not support). They are accepted and ignored.
var ignoredFields = map[eim.Kind][]string{
	eim.KindHost: {"hostStorages", "host_storages", "hostNics", "host_nics", "hostUsbs", "host_usbs", "hostGpus", "host_gpus"},
	eim.KindSite: {"provider"},
}

func ignored(k eim.Kind, name string) bool {
	return name == "timestamps" || slices.Contains(ignoredFields[k], name)
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
			if ignored(k, key) {
				return nil
			}
			return eim.Errorf(eim.EINVALID, "unknown field %q", key)
		}
		if !f.Writable || f.Alias {
			// Read-only: ignored, but an enum's value must still be one
			// of its names (or empty).
			return checkReadOnly(f.Name, rv.FieldByIndex(f.Index), raw)
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

// checkReadOnly checks the value of a read-only field that is an enum,
// without setting it.
func checkReadOnly(name string, v reflect.Value, raw json.RawMessage) error {
	if !v.Type().Implements(enumType) {
		return nil
	}
	return setField(name, reflect.New(v.Type()).Elem(), raw)
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

var (
	enumType     = reflect.TypeFor[eim.Enum]()
	metadataType = reflect.TypeFor[eim.Metadata]()
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
