package racecheck

import (
	"os/exec"
	"testing"
)

// A child built by Build reports its race exactly when this test runs under
// the race detector, and Reported finds the report in its output.
func TestBuildCarriesTheDetector(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	bin, err := Build(goTool, "github.com/eimhq/eim/internal/racecheck/testdata/racy", t.TempDir(), "racy")
	if err != nil {
		t.Fatal(err)
	}
	// A race-built program that reported a race exits with status 66;
	// the output is what matters here.
	out, _ := exec.Command(bin).CombinedOutput()
	if got := Reported(out); got != Enabled {
		t.Errorf("race reported: %v, want %v (the test binary built with -race: %v); output:\n%s", got, Enabled, Enabled, out)
	}
}

func TestReported(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"", false},
		{"eim: serving API on http://127.0.0.1:1\n", false},
		{"==================\nWARNING: DATA RACE\nWrite at 0x00c000012345 by goroutine 7:\n", true},
	} {
		if got := Reported([]byte(c.out)); got != c.want {
			t.Errorf("Reported(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}
