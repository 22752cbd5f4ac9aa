package filter_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

var pgPlaceholder = regexp.MustCompile(`\$(\d+)`)

// FuzzWhere: Where never panics, and returns either an EINVALID error or SQL
// that SQLite runs with exactly the returned arguments. The Postgres SQL
// must number its placeholders from argBase+1 up to argBase+len(args).
func FuzzWhere(f *testing.F) {
	for _, tc := range whereCases {
		f.Add(tc.filter)
	}
	db := openSQLite(f)
	db.insert(f, fixtures()...)
	kinds := []eim.Kind{eim.KindHost, eim.KindInstance, eim.KindRegion}
	f.Fuzz(func(t *testing.T, in string) {
		for _, k := range kinds {
			sql, args, err := filter.Where(filter.SQLite, k, in, argBase)
			if err != nil {
				var e *eim.Error
				if !errors.As(err, &e) || e.Code != eim.EINVALID {
					t.Fatalf("Where(%s, %q): got %v, want EINVALID", k, in, err)
				}
				continue
			}
			if got := strings.Count(sql, "?"); got != len(args) {
				t.Fatalf("Where(%s, %q): %d placeholders for %d args in %s", k, in, got, len(args), sql)
			}
			if _, err := db.ids(t, k, sql, args, ""); err != nil {
				t.Fatalf("Where(%s, %q): SQLite rejects the SQL: %v", k, in, err)
			}
			pg, pgArgs, err := filter.Where(filter.Postgres, k, in, argBase)
			if err != nil {
				t.Fatalf("Where(Postgres, %s, %q): %v, but SQLite accepted it", k, in, err)
			}
			seen := map[int]bool{}
			for _, m := range pgPlaceholder.FindAllStringSubmatch(pg, -1) {
				n, _ := strconv.Atoi(m[1])
				if n <= argBase || n > argBase+len(pgArgs) {
					t.Fatalf("Where(Postgres, %s, %q): placeholder $%d out of range in %s", k, in, n, pg)
				}
				seen[n] = true
			}
			if len(seen) != len(pgArgs) || strings.Contains(pg, "?") {
				t.Fatalf("Where(Postgres, %s, %q): %d placeholders for %d args in %s", k, in, len(seen), len(pgArgs), pg)
			}
		}
	})
}
