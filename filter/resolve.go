package filter

import (
	"reflect"
	"strings"

	"github.com/eimhq/eim"
)

// resolved is a field path (site.region.name) resolved against a schema.
type resolved struct {
	name   string      // the path as written, for messages
	steps  []*eim.Edge // the edges crossed, in order
	schema *eim.Schema // the schema at the end of the edges
	field  *eim.Field  // the field at the end, or nil when the path ends at an edge
	edge   *eim.Edge   // the edge at the end, when field is nil
}

// resolve walks names from schema s: every name but the last is an edge,
// the last a stored field or an edge. "timestamps.createdAt" names the
// flattened createdAt, as the wire nests it.
func resolve(s *eim.Schema, names []string) (*resolved, error) {
	r := &resolved{name: strings.Join(names, "."), schema: s}
	for i := 0; i < len(names); i++ {
		n := names[i]
		cur := r.schema
		if i == len(names)-2 && n == "timestamps" {
			if f := findField(cur, names[i+1]); f != nil && f.Stored() && f.Type == timeType {
				r.field = f
				return r, nil
			}
		}
		if i < len(names)-1 {
			e := findEdge(cur, n)
			if e == nil {
				if f := findField(cur, n); f != nil {
					return nil, eim.Errorf(eim.EINVALID, "filter: %s: %q of %s is not a reference and has no fields", r.name, n, cur.Table)
				}
				return nil, unknownField("filter", cur, n, r.name)
			}
			r.steps = append(r.steps, e)
			if len(r.steps) > maxDepth {
				return nil, eim.Errorf(eim.EINVALID, "filter: %s crosses more than %d references", r.name, maxDepth)
			}
			r.schema = eim.SchemaOf(e.Kind)
			continue
		}
		f := findField(cur, n)
		switch {
		case f != nil && f.Alias:
			// instanceID, siteID …: read-only echoes of resourceId.
			r.field, _ = cur.Field("resourceId")
		case f != nil && f.Stored():
			r.field = f
		case findEdge(cur, n) != nil:
			r.edge = findEdge(cur, n)
		case f != nil:
			return nil, eim.Errorf(eim.EINVALID, "filter: %s is not stored and cannot be filtered", r.name)
		default:
			return nil, unknownField("filter", cur, n, r.name)
		}
	}
	return r, nil
}

// findField looks a field up by its JSON name, its snake_case form, or
// (leniently) any spelling that differs only in case and underscores
// ("hostId" for "hostID").
func findField(s *eim.Schema, name string) *eim.Field {
	if f, ok := s.Field(name); ok {
		return f
	}
	n := fold(name)
	for _, f := range s.Fields {
		if f.Name != "" && fold(f.Name) == n {
			return f
		}
	}
	return nil
}

// findEdge looks an edge up by name, as findField does for fields.
func findEdge(s *eim.Schema, name string) *eim.Edge {
	if e, ok := s.Edge(name); ok {
		return e
	}
	n := fold(name)
	for _, e := range s.Edges {
		if fold(e.Name) == n {
			return e
		}
	}
	return nil
}

func fold(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

// unknownField names the unknown field and a few known ones.
func unknownField(param string, s *eim.Schema, n, full string) error {
	const few = 12
	var known []string
	for _, f := range s.Fields {
		if f.Stored() && f.Name != "" && classify(f) != kindOther {
			known = append(known, f.Name)
		}
	}
	for _, e := range s.Edges {
		known = append(known, e.Name)
	}
	list := strings.Join(known, ", ")
	if len(known) > few {
		list = strings.Join(known[:few], ", ") + ", …"
	}
	in := ""
	if full != n {
		in = " in " + full
	}
	return eim.Errorf(eim.EINVALID, "%s: unknown field %q for %s%s (known: %s)", param, n, s.Table, in, list)
}

// fieldKind is how a field is compared.
type fieldKind int

const (
	kindOther    fieldKind = iota
	kindString             // TEXT
	kindID                 // resourceId or a reference: TEXT, references NULL when absent
	kindEnum               // TEXT, one of the enum's values
	kindInt                // BIGINT
	kindBool               // BOOLEAN / INTEGER 0/1
	kindTime               // eim.Time as BIGINT unix milliseconds
	kindMetadata           // eim.Metadata as JSON
	kindStrings            // []string as JSON
)

var (
	timeType     = reflect.TypeFor[eim.Time]()
	metadataType = reflect.TypeFor[eim.Metadata]()
)

func classify(f *eim.Field) fieldKind {
	switch {
	case f.Type == timeType:
		return kindTime
	case f.Type == metadataType:
		return kindMetadata
	case f.Edge != nil || f.Column == "id":
		return kindID
	case f.IsEnum() && f.Type.Kind() == reflect.String:
		return kindEnum
	}
	switch f.Type.Kind() {
	case reflect.String:
		return kindString
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kindInt
	case reflect.Bool:
		return kindBool
	case reflect.Slice:
		if f.Type.Elem().Kind() == reflect.String {
			return kindStrings
		}
	}
	return kindOther
}

// enumValues returns the values of an enum field, the unspecified one first.
func enumValues(f *eim.Field) []string {
	return reflect.Zero(f.Type).Interface().(eim.Enum).Values()
}
