package oscatalog_test

import (
	"testing"

	"github.com/eimhq/eim/oscatalog"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"3.0.20250717.0718", "3.0.20250717.0718", 0},
		{"3.0.20250328.1439", "3.0.20250717.0718", -1},
		{"3.0.20250717.0718", "3.0.20250717.0719", -1},
		{"3.0.20250717.0718", "3.0.20250717.718", 0}, // leading zeros
		{"3.0.9", "3.0.10", -1},                      // numbers, not text
		{"3.0", "3.0.1", -1},                         // more pieces is newer
		{"22.04", "22.04.5", -1},
		{"1.0.0-rc1", "1.0.0", -1}, // a pre-release before its release
		{"1.0.0~beta", "1.0.0", -1},
		{"1.0-rc1", "1.0.1", -1},
		{"1.0.0-rc1", "1.0.0-rc2", -1},
		{"1.0.0+build5", "1.0.0", 1},
		{"3.0.1", "3.0.beta", 1}, // a number ranks above text
		{"v2", "v10", -1},
		{"2", "10", -1},
		{"99999999999999999999999", "100000000000000000000000", -1}, // beyond int64
		{"a", "b", -1},
	}
	for _, tt := range tests {
		if got := oscatalog.CompareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareVersions(%q, %q): got %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := oscatalog.CompareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareVersions(%q, %q): got %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// The order is a total preorder: antisymmetric and transitive over a mixed
// set, so a newest version is well defined.
func TestCompareVersionsOrder(t *testing.T) {
	vs := []string{"1", "1.0", "1.0.0", "1.0.0-rc1", "1.0.0~a", "1.0.1", "1.0.a", "1.0-rc", "01.0", "1.0.0+b", "2", "10", "1a", "1-", "1.", ".1", "~1"}
	for _, a := range vs {
		for _, b := range vs {
			ab, ba := oscatalog.CompareVersions(a, b), oscatalog.CompareVersions(b, a)
			if ab != -ba {
				t.Errorf("CompareVersions(%q, %q) = %d but (%q, %q) = %d", a, b, ab, b, a, ba)
			}
			for _, c := range vs {
				if ab <= 0 && oscatalog.CompareVersions(b, c) <= 0 && oscatalog.CompareVersions(a, c) > 0 {
					t.Errorf("not transitive: %q <= %q <= %q but %q > %q", a, b, c, a, c)
				}
			}
		}
	}
}
