package clusters

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// The lists' query parameters, as the original's: pageSize and offset,
// filter and orderBy.

// page reads pageSize (default 20, at most 100) and offset.
func page(r *http.Request) (size, offset int, err error) {
	size, offset = 20, 0
	q := r.URL.Query()
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return 0, 0, eim.Errorf(eim.EINVALID, "pageSize: %q is not a number from 0 to 100", v)
		}
		if n > 0 {
			size = n
		}
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, eim.Errorf(eim.EINVALID, "offset: %q is not a number from 0", v)
		}
		offset = n
	}
	return size, offset, nil
}

func pageOf[T any](items []T, size, offset int) []T {
	if offset >= len(items) {
		return []T{}
	}
	return items[offset:min(len(items), offset+size)]
}

// field is a field the filter and orderBy name: its value, and its
// order (by text when cmp is nil).
type field[T any] struct {
	get func(T) string
	cmp func(a, b string) int
}

// fieldNames lists fields' names for an error.
func fieldNames[T any](fields map[string]field[T]) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseFilter reads the original's filter: field=value terms joined by
// OR or AND (AND first), over fields; "" matches everything. A value
// matches any part of the field, as the original's (name=k3s finds
// baseline-k3s); a value ending in * matches as a prefix.
func parseFilter[T any](f string, fields map[string]field[T]) (func(T) bool, error) {
	f = strings.TrimSpace(strings.Trim(strings.TrimSpace(f), `"`))
	if f == "" {
		return func(T) bool { return true }, nil
	}
	type term struct {
		get    func(T) string
		value  string
		prefix bool
	}
	var ors [][]term
	for _, or := range splitWord(f, "OR") {
		var ands []term
		for _, t := range splitWord(or, "AND") {
			k, v, ok := strings.Cut(t, "=")
			k, v = strings.TrimSpace(k), strings.Trim(strings.TrimSpace(v), `"`)
			if k == "kubernetes_version" {
				k = "kubernetesVersion"
			}
			fd, known := fields[k]
			if !ok || !known {
				return nil, eim.Errorf(eim.EINVALID, "filter: %q is not field=value over %s", strings.TrimSpace(t), fieldNames(fields))
			}
			prefix := strings.HasSuffix(v, "*")
			ands = append(ands, term{get: fd.get, value: strings.TrimSuffix(v, "*"), prefix: prefix})
		}
		ors = append(ors, ands)
	}
	return func(x T) bool {
		for _, ands := range ors {
			all := true
			for _, t := range ands {
				got := t.get(x)
				if (t.prefix && !strings.HasPrefix(got, t.value)) || (!t.prefix && !strings.Contains(got, t.value)) {
					all = false
					break
				}
			}
			if all {
				return true
			}
		}
		return false
	}, nil
}

// splitWord splits s at the word w (any case) between spaces.
func splitWord(s, w string) []string {
	var out []string
	fs := strings.Fields(s)
	cur := []string{}
	for _, f := range fs {
		if strings.EqualFold(f, w) {
			out = append(out, strings.Join(cur, " "))
			cur = cur[:0]
			continue
		}
		cur = append(cur, f)
	}
	return append(out, strings.Join(cur, " "))
}

// orderBy sorts items by the original's orderBy: a comma-separated list
// of "field [asc|desc]" ("name asc, version desc", orch-cli's
// "name,kubernetesVersion desc"), the first field first; by name when
// empty.
func orderBy[T any](o string, fields map[string]field[T], items []T) error {
	o = strings.TrimSpace(strings.Trim(strings.TrimSpace(o), `"`))
	if o == "" {
		o = "name"
	}
	type key struct {
		field[T]
		desc bool
	}
	var keys []key
	for part := range strings.SplitSeq(o, ",") {
		words := strings.Fields(part)
		if len(words) == 0 || len(words) > 2 {
			return eim.Errorf(eim.EINVALID, "orderBy: %q is not a field and asc or desc (fields %s; several separated by commas)", strings.TrimSpace(part), fieldNames(fields))
		}
		fd, ok := fields[words[0]]
		if !ok {
			return eim.Errorf(eim.EINVALID, "orderBy: %q is not one of the fields %s", words[0], fieldNames(fields))
		}
		k := key{field: fd}
		if len(words) == 2 {
			switch strings.ToLower(words[1]) {
			case "asc":
			case "desc":
				k.desc = true
			default:
				return eim.Errorf(eim.EINVALID, "orderBy: %q after %s is not asc or desc", words[1], words[0])
			}
		}
		keys = append(keys, k)
	}
	slices.SortStableFunc(items, func(a, b T) int {
		for _, k := range keys {
			cmp := k.cmp
			if cmp == nil {
				cmp = strings.Compare
			}
			c := cmp(k.get(a), k.get(b))
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	return nil
}
