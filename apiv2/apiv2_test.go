package apiv2_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// A field that takes a count or a percentage names both in a type error,
// not the one Go stores it as.
func TestDecodeTypeError(t *testing.T) {
	var in struct {
		Name   string            `json:"name"`
		Policy eim.RolloutPolicy `json:"rolloutPolicy"`
	}
	for _, tc := range []struct{ body, want string }{
		{`{"rolloutPolicy":{"batches":[{"limit":true}]}}`, `rolloutPolicy.batches.limit: want a number or a percentage string (such as "10%")`},
		{`{"name":["x"]}`, "name: want a string"},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", "application/json")
		err := apiv2.DecodeStrict(r, &in)
		if eim.ErrorCode(err) != eim.EINVALID || eim.ErrorMessage(err) != tc.want {
			t.Errorf("%s: got %v, want %s %q", tc.body, err, eim.EINVALID, tc.want)
		}
	}
}
