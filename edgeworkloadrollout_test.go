package eim_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func TestRolloutPolicyCheck(t *testing.T) {
	base := func(p *eim.RolloutPolicy) *eim.EdgeWorkloadSpec {
		return &eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}},
			Pod:           eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/c:1"}}}},
			RolloutPolicy: p}
	}
	for _, tc := range []struct {
		name  string
		pol   *eim.RolloutPolicy
		field string // "" valid
	}{
		{"full", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "1"}, {Limit: "10%", Selector: &eim.LabelSelector{MatchLabels: map[string]string{"zone": "a"}},
			SuccessThreshold: "2", UpdateTimeout: "5m"}}, SuccessThreshold: "90%", UpdateTimeout: "2h",
			DisruptionBudget: &eim.DisruptionBudget{GroupBy: []string{"eim.io/site"}, MaxUnavailable: "25%"}, HonorMaintenanceWindows: true}, ""},
		{"empty", &eim.RolloutPolicy{}, ""},
		{"no limit", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{}}}, "rolloutPolicy.batches[0].limit"},
		{"zero limit", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "0"}}}, "rolloutPolicy.batches[0].limit"},
		{"percent above 100", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "150%"}}}, "rolloutPolicy.batches[0].limit"},
		{"word limit", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "half"}}}, "rolloutPolicy.batches[0].limit"},
		{"empty batch selector", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "1", Selector: &eim.LabelSelector{}}}}, "rolloutPolicy.batches[0].selector"},
		{"bad threshold", &eim.RolloutPolicy{SuccessThreshold: "-1"}, "rolloutPolicy.successThreshold"},
		{"bad batch threshold", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "1", SuccessThreshold: "x%"}}}, "rolloutPolicy.batches[0].successThreshold"},
		{"bad timeout", &eim.RolloutPolicy{UpdateTimeout: "soon"}, "rolloutPolicy.updateTimeout"},
		{"tiny timeout", &eim.RolloutPolicy{UpdateTimeout: "10ms"}, "rolloutPolicy.updateTimeout"},
		{"bad batch timeout", &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "1", UpdateTimeout: "9999h"}}}, "rolloutPolicy.batches[0].updateTimeout"},
		{"budget without max", &eim.RolloutPolicy{DisruptionBudget: &eim.DisruptionBudget{}}, "rolloutPolicy.disruptionBudget.maxUnavailable"},
		{"budget of zero", &eim.RolloutPolicy{DisruptionBudget: &eim.DisruptionBudget{MaxUnavailable: "0"}}, "rolloutPolicy.disruptionBudget.maxUnavailable"},
		{"bad group key", &eim.RolloutPolicy{DisruptionBudget: &eim.DisruptionBudget{MaxUnavailable: "1", GroupBy: []string{"not a key"}}}, "rolloutPolicy.disruptionBudget.groupBy[0]"},
		{"group key twice", &eim.RolloutPolicy{DisruptionBudget: &eim.DisruptionBudget{MaxUnavailable: "1", GroupBy: []string{"a", "a"}}}, "rolloutPolicy.disruptionBudget.groupBy[1]"},
	} {
		_, err := eim.CheckEdgeWorkloadSpec(base(tc.pol), eim.EdgeWorkloadPolicy{})
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: got %v, want valid", tc.name, err)
		case tc.field != "" && (eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), tc.field+":")):
			t.Errorf("%s: got %v, want EINVALID naming %s", tc.name, err, tc.field)
		}
	}
}

func TestIntOrPercent(t *testing.T) {
	var b eim.RolloutBatch
	if err := json.Unmarshal([]byte(`{"limit": 3}`), &b); err != nil || b.Limit != "3" {
		t.Fatalf("a number: got %q %v, want \"3\"", b.Limit, err)
	}
	if err := json.Unmarshal([]byte(`{"limit": "10%"}`), &b); err != nil || b.Limit != "10%" {
		t.Fatalf("a percentage: got %q %v", b.Limit, err)
	}
	if out, _ := json.Marshal(eim.RolloutBatch{Limit: "3"}); !strings.Contains(string(out), `"limit":3`) {
		t.Fatalf("a count is written as a number: got %s", out)
	}
	if err := json.Unmarshal([]byte(`{"limit": true}`), &b); err == nil {
		t.Fatal("a boolean limit: got no error")
	}
	for _, tc := range []struct {
		v     eim.IntOrPercent
		total int
		want  int
	}{{"10%", 10000, 1000}, {"10%", 5, 1}, {"33%", 10, 4}, {"3", 10, 3}, {"30", 10, 10}, {"100%", 7, 7}, {"1%", 0, 0}} {
		if got := tc.v.Of(tc.total); got != tc.want {
			t.Errorf("%s of %d: got %d, want %d", tc.v, tc.total, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v     eim.IntOrPercent
		ok, n int
		want  bool
	}{{"90%", 9, 10, true}, {"90%", 8, 10, false}, {"100%", 5, 5, true}, {"2", 2, 10, true}, {"5", 3, 3, true}, {"5", 2, 3, false}, {"90%", 0, 0, true}} {
		if got := tc.v.Met(tc.ok, tc.n); got != tc.want {
			t.Errorf("%s met by %d of %d: got %v, want %v", tc.v, tc.ok, tc.n, got, tc.want)
		}
	}
}

func TestRolloutPlan(t *testing.T) {
	p := &eim.RolloutPolicy{Batches: []eim.RolloutBatch{{Limit: "1", UpdateTimeout: "5m"}, {Limit: "50%", SuccessThreshold: "100%"}}, UpdateTimeout: "20m"}
	plan := p.Plan()
	if len(plan) != 3 {
		t.Fatalf("got %d batches, want 3 (two and the rest)", len(plan))
	}
	if plan[0].UpdateTimeout != 5*time.Minute || plan[0].SuccessThreshold != eim.DefaultRolloutSuccessThreshold {
		t.Errorf("batch 1: got %+v", plan[0])
	}
	if plan[1].UpdateTimeout != 20*time.Minute || plan[1].SuccessThreshold != "100%" {
		t.Errorf("batch 2: got %+v", plan[1])
	}
	if plan[2].Limit != "" || plan[2].UpdateTimeout != 20*time.Minute {
		t.Errorf("the last batch: got %+v, want the rest", plan[2])
	}
	if d := (&eim.RolloutPolicy{}).Plan(); len(d) != 1 || d[0].UpdateTimeout != eim.DefaultRolloutUpdateTimeout {
		t.Errorf("no batches: got %+v, want one of every device", d)
	}
}
