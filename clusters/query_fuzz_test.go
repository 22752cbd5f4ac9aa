package clusters

import (
	"slices"
	"strings"
	"testing"
)

// FuzzQuery: any filter or orderBy a caller sends is parsed without a
// panic; a list that sorts is ordered by its first key.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"name=k3s", `"name=foo* OR kubernetes_version=v1.27.5"`, "name=a AND version=v0 OR description=x",
		"name asc, version desc", "name,kubernetesVersion desc", `"name"`, ",", "name desc desc", "=", "name= OR"} {
		f.Add(s)
	}
	type item struct{ name, version string }
	fields := map[string]field[item]{
		"name":    {get: func(i item) string { return i.name }},
		"version": {get: func(i item) string { return i.version }, cmp: func(a, b string) int { return strings.Compare(a, b) }},
	}
	f.Fuzz(func(t *testing.T, q string) {
		items := []item{{"b", "v1"}, {"a", "v2"}, {"c", "v0"}, {"a", "v1"}}
		if match, err := parseFilter(q, fields); err == nil {
			for _, it := range items {
				if first, again := match(it), match(it); first != again {
					t.Fatalf("filter %q: not deterministic", q)
				}
			}
		}
		if err := orderBy(q, fields, items); err == nil {
			first := strings.Fields(strings.Split(strings.Trim(strings.TrimSpace(q), `"`), ",")[0])
			if len(first) == 0 {
				first = []string{"name"}
			}
			keys := make([]string, len(items))
			for i, it := range items {
				keys[i] = fields[first[0]].get(it)
			}
			if len(first) == 2 && strings.EqualFold(first[1], "desc") {
				slices.Reverse(keys)
			}
			if !slices.IsSorted(keys) {
				t.Fatalf("orderBy %q: %v not ordered by %s", q, items, first[0])
			}
		}
	})
}
