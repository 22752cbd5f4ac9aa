package intern_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim/internal/intern"
)

func TestOfRoundTrip(t *testing.T) {
	for _, s := range []string{"", "Running", "No Connection", strings.Repeat("x", 70000), "RUNNING"} {
		r, ok := intern.Of(s)
		if !ok {
			t.Fatalf("Of(%.20q): table full", s)
		}
		if got := r.String(); got != s {
			t.Errorf("Of(%.20q).String() = %.20q, want the same", s, got)
		}
		again, _ := intern.Of(s)
		if again != r {
			t.Errorf("Of(%.20q) twice: %d then %d, want one Ref", s, r, again)
		}
		if f, ok := intern.Find(s); !ok || f != r {
			t.Errorf("Find(%.20q) = %d, %v; want %d, true", s, f, ok, r)
		}
	}
	if r, _ := intern.Of(""); r != 0 {
		t.Errorf(`Of("") = %d, want 0`, r)
	}
	if _, ok := intern.Find("never interned, this one"); ok {
		t.Error("Find of a value never interned reports it interned")
	}
}

// Refs made on one goroutine read back on others (go test -race).
func TestOfConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s := "concurrent-" + strconv.Itoa(i%500)
				r, ok := intern.Of(s)
				if !ok {
					t.Errorf("goroutine %d: Of(%q): table full", g, s)
					return
				}
				if got := r.String(); got != s {
					t.Errorf("goroutine %d: Of(%q).String() = %q", g, s, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// The table stops at MaxRefs values and says so; what it holds stays.
// (Last in the file: it fills the process's table.)
func TestOfFull(t *testing.T) {
	first, _ := intern.Of("first-of-the-full-test")
	full := false
	for i := 0; i < intern.MaxRefs+10; i++ {
		if _, ok := intern.Of("fill-" + strings.Repeat("y", i%7) + strconv.Itoa(i)); !ok {
			full = true
			break
		}
	}
	if !full {
		t.Fatalf("the table took more than %d values", intern.MaxRefs)
	}
	if n := intern.Len(); n != intern.MaxRefs {
		t.Errorf("Len() = %d when full, want %d", n, intern.MaxRefs)
	}
	if got := first.String(); got != "first-of-the-full-test" {
		t.Errorf("a Ref made before the table filled names %q", got)
	}
	if r, ok := intern.Of("first-of-the-full-test"); !ok || r != first {
		t.Errorf("Of of a value held, once full: %d, %v; want %d, true", r, ok, first)
	}
}
