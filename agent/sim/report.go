package sim

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// Outcomes of a node, the keys of Report.Final.
const (
	OutcomeRunning = "running" // its reboot action was accepted, then it reported in from its installed OS
	OutcomeFailed  = "failed"  // its workflow FAILED (an injected failure)
	OutcomeStuck   = "stuck"   // neither, when the run ended (deadline or error)
)

// Report is the result of a fleet run, printed as JSON.
type Report struct {
	Nodes int `json:"nodes"`
	// Final counts nodes per outcome (running, failed, stuck).
	Final map[string]int `json:"final"`
	// Injected counts the faults the run injected: "fail" (nodes whose
	// action fails) and "reboot" (nodes that rebooted mid-workflow).
	Injected map[string]int `json:"injected"`
	// Unexpected counts nodes whose outcome is not the one injected: a node
	// without an injected failure that is not running, or one with an
	// injected failure that did not end failed.
	Unexpected int `json:"unexpected"`
	// Phases holds, per phase, percentiles of the seconds nodes spent in it
	// (from entering it until the next phase; repeated visits, e.g. after a
	// reboot, add up). "total" is from a node's start until it was running.
	Phases      map[string]Stats `json:"phases"`
	WallSeconds float64          `json:"wallSeconds"`
	// Errors are a few distinct errors of stuck nodes, with their counts.
	Errors map[string]int `json:"errors,omitempty"`
	// Hold is the heartbeats after Day 0 (Options.Hold).
	Hold *HoldReport `json:"hold,omitempty"`
	// Seeded tells that the nodes were provisioned before the run
	// (Options.Nodes): there was no Day 0, and WallSeconds is the time to
	// the first node's first heartbeat.
	Seeded bool `json:"seeded,omitempty"`

	order []string // phases in the order nodes went through them
}

// PhaseOrder returns the report's phases in the order nodes went through
// them, "total" last.
func PhaseOrder(r *Report) []string {
	var out []string
	seen := make(map[string]bool)
	for _, p := range append(r.order, slices.Sorted(maps.Keys(r.Phases))...) {
		if _, ok := r.Phases[p]; ok && !seen[p] && p != "total" {
			seen[p] = true
			out = append(out, p)
		}
	}
	if _, ok := r.Phases["total"]; ok {
		out = append(out, "total")
	}
	return out
}

// Stats summarises durations in seconds.
type Stats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, or 0 for an empty slice.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summarize computes Stats of durations, rounded to the millisecond.
func Summarize(ds []time.Duration) Stats {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = d.Seconds()
	}
	sort.Float64s(xs)
	r := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	return Stats{
		Count: len(xs),
		P50:   r(Percentile(xs, 50)),
		P95:   r(Percentile(xs, 95)),
		P99:   r(Percentile(xs, 99)),
		Max:   r(Percentile(xs, 100)),
	}
}

// event is a node entering a phase.
type event struct {
	phase string
	at    time.Time
}

// phaseDurations turns a node's ordered phase events into the time spent in
// each phase (the last event is an end mark, e.g. "running", and gets none).
func phaseDurations(evs []event) map[string]time.Duration {
	out := make(map[string]time.Duration)
	for i := 0; i+1 < len(evs); i++ {
		out[evs[i].phase] += evs[i+1].at.Sub(evs[i].at)
	}
	return out
}

// maxErrors bounds the distinct errors a report lists.
const maxErrors = 10

// buildReport assembles the report from every node's record.
func buildReport(nodes []*node, wall time.Duration) *Report {
	rep := &Report{
		Nodes:       len(nodes),
		Final:       map[string]int{OutcomeRunning: 0, OutcomeFailed: 0, OutcomeStuck: 0},
		Injected:    map[string]int{"fail": 0, "reboot": 0},
		Phases:      make(map[string]Stats),
		WallSeconds: math.Round(wall.Seconds()*1000) / 1000,
	}
	per := make(map[string][]time.Duration)
	seenPhase := make(map[string]bool)
	for _, n := range nodes {
		rep.Final[n.outcome]++
		if n.fail {
			rep.Injected["fail"]++
		}
		if n.rebooted.Load() {
			rep.Injected["reboot"]++
		}
		want := OutcomeRunning
		if n.fail {
			want = OutcomeFailed
		}
		if n.outcome != want {
			rep.Unexpected++
		}
		if n.outcome == OutcomeStuck && n.err != nil {
			msg := n.err.Error()
			if _, ok := rep.Errors[msg]; ok || len(rep.Errors) < maxErrors {
				if rep.Errors == nil {
					rep.Errors = make(map[string]int)
				}
				rep.Errors[msg]++
			}
		}
		evs := n.events()
		for _, e := range evs {
			if !seenPhase[e.phase] {
				seenPhase[e.phase] = true
				rep.order = append(rep.order, e.phase)
			}
		}
		for p, d := range phaseDurations(evs) {
			per[p] = append(per[p], d)
		}
		if n.outcome == OutcomeRunning && len(evs) > 0 {
			per["total"] = append(per["total"], evs[len(evs)-1].at.Sub(evs[0].at))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(per)) {
		rep.Phases[p] = Summarize(per[p])
	}
	return rep
}
