package filter

import (
	"strings"

	"github.com/eimhq/eim"
)

// OrderBy compiles an AIP-132 order ("name desc, resourceId") into a SQL
// ORDER BY list (without the keywords), always ending with the table's id as
// tie-breaker so that pages are stable. "" → "<table>.id".
//
// Keys are top-level stored scalar fields, camelCase or snake_case, each
// optionally followed by asc or desc. References sort absent (NULL) first
// in ascending order on both engines. The SQL is the same for both
// dialects; text sorts by the database's collation (byte order in SQLite).
func OrderBy(k eim.Kind, orderBy string) (string, error) {
	s := eim.SchemaOf(k)
	if s == nil {
		return "", eim.Errorf(eim.EINVALID, "orderBy: unknown kind %q", k)
	}
	if err := checkChars("orderBy", orderBy, isOrderChar); err != nil {
		return "", err
	}
	idKey := s.Table + ".id"
	if strings.TrimSpace(orderBy) == "" {
		return idKey, nil
	}
	var keys []string
	lastIsID := false
	for i, part := range strings.Split(orderBy, ",") {
		words := strings.Fields(part)
		if len(words) == 0 {
			return "", eim.Errorf(eim.EINVALID, "orderBy: empty key at position %d", i+1)
		}
		if len(words) > 2 {
			return "", eim.Errorf(eim.EINVALID, "orderBy: %q: want \"field\", \"field asc\" or \"field desc\"", strings.TrimSpace(part))
		}
		desc := false
		if len(words) == 2 {
			switch strings.ToLower(words[1]) {
			case "asc":
			case "desc":
				desc = true
			default:
				return "", eim.Errorf(eim.EINVALID, "orderBy: %q: direction must be asc or desc, not %q", strings.TrimSpace(part), words[1])
			}
		}
		f, err := orderField(s, words[0])
		if err != nil {
			return "", err
		}
		key := s.Table + "." + f.Column
		switch {
		case desc && f.Edge != nil:
			key += " DESC NULLS LAST"
		case desc:
			key += " DESC"
		case f.Edge != nil:
			key += " ASC NULLS FIRST"
		}
		keys = append(keys, key)
		lastIsID = f.Column == "id"
	}
	if !lastIsID {
		keys = append(keys, idKey)
	}
	return strings.Join(keys, ", "), nil
}

// orderField resolves a sort key: a top-level stored scalar field.
func orderField(s *eim.Schema, name string) (*eim.Field, error) {
	if strings.Contains(name, ".") {
		n, ok := strings.CutPrefix(name, "timestamps.")
		if f := findField(s, n); ok && f != nil && f.Stored() && f.Type == timeType {
			return f, nil
		}
		if f := refIDField(s, name); f != nil {
			return f, nil
		}
		return nil, eim.Errorf(eim.EINVALID, "orderBy: %q: nested fields cannot be sorted on, except the ID of a reference (site.resourceId)", name)
	}
	f := findField(s, name)
	if f != nil && f.Alias {
		f, _ = s.Field("resourceId")
	}
	if f == nil || !f.Stored() {
		if f != nil || findEdge(s, name) != nil {
			return nil, eim.Errorf(eim.EINVALID, "orderBy: %q of %s is not stored and cannot be sorted on", name, s.Table)
		}
		return nil, unknownField("orderBy", s, name, name)
	}
	switch classify(f) {
	case kindMetadata, kindStrings, kindOther:
		return nil, eim.Errorf(eim.EINVALID, "orderBy: %q of %s is a list and cannot be sorted on", name, s.Table)
	}
	return f, nil
}

// refIDField resolves "<reference>.<its ID>" ("site.resourceId",
// "site.siteID", "site.resource_id"), which clients built for the original
// send to sort by a reference, to the stored reference field (siteId): the
// only nested key that needs no join.
func refIDField(s *eim.Schema, name string) *eim.Field {
	ref, sub, _ := strings.Cut(name, ".")
	e := findEdge(s, ref)
	if e == nil || e.Back {
		return nil
	}
	ts := eim.SchemaOf(e.Kind)
	if ts == nil {
		return nil
	}
	if tf := findField(ts, sub); tf == nil || (tf.Name != "resourceId" && !tf.Alias) {
		return nil
	}
	for _, f := range s.Fields {
		if f.Edge != nil && f.Edge.Name == e.Name && f.Stored() {
			return f
		}
	}
	return nil
}
