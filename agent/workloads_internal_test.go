package agent

import "testing"

func TestSuperseded(t *testing.T) {
	for _, tc := range []struct {
		v, applied string
		old        []string
		want       bool
	}{
		{"2", "1", nil, false},
		{"1", "2", nil, true},
		{"10", "9", nil, false},
		{"9", "10", nil, true},
		{"5", "5", []string{"5"}, false},
		{"b7e1", "c0de", []string{"b7e1"}, true},
		{"f00d", "c0de", []string{"b7e1"}, false},
		{"1", "", nil, false},
	} {
		if got := superseded(tc.v, tc.applied, tc.old); got != tc.want {
			t.Errorf("superseded(%q, applied %q, old %q) = %v, want %v", tc.v, tc.applied, tc.old, got, tc.want)
		}
	}
}
