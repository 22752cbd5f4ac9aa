package sim

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	for _, c := range []struct{ p, want float64 }{{50, 50}, {95, 95}, {99, 99}, {100, 100}, {0.1, 1}} {
		if got := Percentile(xs, c.p); got != c.want {
			t.Errorf("p%v of 1..100: got %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("p99 of one value: got %v, want 7", got)
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of none: got %v, want 0", got)
	}
	s := Summarize([]time.Duration{3 * time.Second, time.Second, 2 * time.Second, 1500 * time.Microsecond})
	if s.Count != 4 || s.P50 != 1 || s.P99 != 3 || s.Max != 3 {
		t.Errorf("summary: got %+v, want count 4, p50 1, p99 3, max 3", s)
	}
}

// fakeNode builds a node record from phases at the given offsets (ms).
func fakeNode(tr *tracker, base time.Time, fail bool, outcome string, phases ...any) *node {
	n := &node{t: tr, fail: fail}
	for i := 0; i < len(phases); i += 2 {
		at := base.Add(time.Duration(phases[i+1].(int)) * time.Millisecond)
		n.now = func() time.Time { return at }
		n.enter(phases[i].(string))
	}
	n.outcome = outcome
	return n
}

func TestBuildReport(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	tr := newTracker(3, base)
	nodes := []*node{
		fakeNode(tr, base, false, OutcomeRunning, "discover", 0, "onboarded", 100, "workflow", 150, "action:erase-disk", 200, "done", 400, "node", 400, OutcomeRunning, 500),
		fakeNode(tr, base, true, OutcomeFailed, "discover", 0, "onboarded", 300, "workflow", 350, "action:stream-image", 400, OutcomeFailed, 900),
		fakeNode(tr, base, false, OutcomeStuck, "discover", 0),
	}
	nodes[2].err = errTest("in phase discover: context deadline exceeded")
	rep := buildReport(nodes, 1234*time.Millisecond)
	if rep.Nodes != 3 || rep.Final[OutcomeRunning] != 1 || rep.Final[OutcomeFailed] != 1 || rep.Final[OutcomeStuck] != 1 {
		t.Errorf("final: got %+v", rep.Final)
	}
	if rep.Injected["fail"] != 1 || rep.Unexpected != 1 {
		t.Errorf("injected %v, unexpected %d: want fail 1, unexpected 1 (the stuck node)", rep.Injected, rep.Unexpected)
	}
	if d := rep.Phases["onboarded"]; d.Count != 2 || d.P50 != 0.05 {
		t.Errorf("onboarded phase: got %+v, want 2 nodes, p50 0.05", d)
	}
	if d := rep.Phases["discover"]; d.Count != 2 || d.P50 != 0.1 || d.Max != 0.3 {
		t.Errorf("discover phase: got %+v, want 2 nodes, p50 0.1, max 0.3", d)
	}
	if d := rep.Phases["total"]; d.Count != 1 || d.P99 != 0.5 {
		t.Errorf("total: got %+v, want one node at 0.5 s", d)
	}
	if rep.WallSeconds != 1.234 || rep.Errors["in phase discover: context deadline exceeded"] != 1 {
		t.Errorf("wall %v, errors %v", rep.WallSeconds, rep.Errors)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"nodes":3`, `"final":{`, `"running":1`, `"phases":{`, `"discover":{"count":2,"p50":0.1,"p95":0.3,"p99":0.3,"max":0.3}`, `"wallSeconds":1.234`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report JSON %s: missing %s", b, want)
		}
	}
	// The tracker followed the nodes: one running, one failed, one discovering.
	line := tr.line(base.Add(2 * time.Second))
	for _, want := range []string{"[  2.0s]", "waiting 0", "discover 1", "running 1", "failed 1", "0 running/s"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q: missing %q", line, want)
		}
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestCategory(t *testing.T) {
	for phase, want := range map[string]string{
		"discover": "discover", "onboarded": "onboarded", "workflow": "workflow",
		"action:stream-image": "actions", "done": "node", "node": "node", "restart": "discover",
		OutcomeRunning: OutcomeRunning, OutcomeFailed: OutcomeFailed, "something-new": "workflow",
	} {
		if got := category(phase); got != want {
			t.Errorf("category(%q): got %q, want %q", phase, got, want)
		}
	}
}

func TestProgressPrinter(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	for _, tty := range []bool{false, true} {
		var b syncBuf
		tr := newTracker(2, base)
		tr.move("waiting", "discover")
		p := &progress{w: &b, tty: tty, interval: time.Hour, t: tr, now: func() time.Time { return base.Add(time.Second) }}
		p.start()
		p.close()
		got := b.String()
		want := "[  1.0s] waiting 1 discover 1 onboarded 0 workflow 0 actions 0 node 0 running 0 · 0 running/s\n"
		if tty {
			want = "\r\033[K" + want
		}
		if got != want {
			t.Errorf("tty %v: got %q, want %q", tty, got, want)
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPhaseOrder(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	tr := newTracker(2, base)
	nodes := []*node{
		fakeNode(tr, base, false, OutcomeRunning, "discover", 0, "onboarded", 1, "workflow", 2, "action:zeta", 3, "action:alpha", 4, "done", 5, "node", 6, OutcomeRunning, 7),
		fakeNode(tr, base, false, OutcomeRunning, "discover", 0, "onboarded", 1, "workflow", 2, "action:zeta", 3, "restart", 4, "discover", 5, "onboarded", 6, "workflow", 7, "action:alpha", 8, "done", 9, "node", 10, OutcomeRunning, 11),
	}
	got := strings.Join(PhaseOrder(buildReport(nodes, time.Second)), " ")
	want := "discover onboarded workflow action:zeta action:alpha done node restart total"
	if got != want {
		t.Errorf("phase order: got %q, want %q", got, want)
	}
}
