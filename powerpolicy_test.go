package eim_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestEffectivePowerPolicy(t *testing.T) {
	const u, r, a = eim.PowerPolicyUnset, eim.PowerPolicyReport, eim.PowerPolicyAlwaysOn
	for _, tc := range []struct{ bmc, site, project, want eim.PowerPolicy }{
		{u, u, u, r},
		{u, u, a, a},
		{u, r, a, r},
		{u, a, r, a},
		{r, a, a, r},
		{a, r, r, a},
	} {
		if got := eim.EffectivePowerPolicy(tc.bmc, tc.site, tc.project); got != tc.want {
			t.Errorf("BMC %q, site %q, project %q: got %s, want %s", tc.bmc, tc.site, tc.project, got, tc.want)
		}
	}
}

func TestParsePowerPolicy(t *testing.T) {
	for in, want := range map[string]eim.PowerPolicy{"": "", "ALWAYS_ON": "ALWAYS_ON", " always_on ": "ALWAYS_ON", "Report": "REPORT"} {
		if got, err := eim.ParsePowerPolicy("powerPolicy", in); err != nil || got != want {
			t.Errorf("%q: got %q, %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"ON", "ALWAYS-ON", "always"} {
		_, err := eim.ParsePowerPolicy("powerPolicy", in)
		if eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), "powerPolicy: ") {
			t.Errorf("%q: got %v, want EINVALID naming powerPolicy", in, err)
		}
	}
}
