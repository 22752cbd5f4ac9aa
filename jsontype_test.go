package eim_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/eimhq/eim"
)

func TestJSONTypeProblem(t *testing.T) {
	type body struct {
		Name   string            `json:"name"`
		Policy eim.RolloutPolicy `json:"rolloutPolicy"`
	}
	for _, tc := range []struct{ in, want string }{
		{`{"rolloutPolicy":{"batches":[{"limit":true}]}}`, `rolloutPolicy.batches.limit: want a number or a percentage string (such as "10%")`},
		{`{"rolloutPolicy":{"batches":[{"limit":"1"},{"successThreshold":{}}]}}`, `rolloutPolicy.batches.successThreshold: want a number or a percentage string (such as "10%")`},
		{`{"rolloutPolicy":{"disruptionBudget":{"maxUnavailable":[1]}}}`, `rolloutPolicy.disruptionBudget.maxUnavailable: want a number or a percentage string (such as "10%")`},
		{`{"name":7}`, "name: want a string"},
	} {
		var b body
		err := json.Unmarshal([]byte(tc.in), &b)
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			t.Errorf("%s: got error %v, want a type error", tc.in, err)
			continue
		}
		if got := eim.JSONTypeProblem(te); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.in, got, tc.want)
		}
	}
}
