package onboarding

import (
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// decide and changes are pure over the claims: the Secure Boot state the
// device reports is recorded when due, a mismatch with the instance's
// security feature refuses the device and flags its host (once), and the
// device fixed goes back to Booting with its credentials.
func TestDecideSecureBoot(t *testing.T) {
	const uuid = "4c4c4544-0000-4000-8000-0000000000d1"
	now := time.Unix(1_000_000, 0)
	at := uint64(now.Unix())
	claim := func(feature eim.SecurityFeature, hostStatus, onboarding eim.StatusValue, sb eim.SecureBootState, sbAt uint64) *eim.DeviceClaim {
		return &eim.DeviceClaim{ID: "host-000000d1", Project: "p", UUID: uuid, DesiredState: eim.HostStateOnboarded,
			Registration: eim.StatusValue{Text: StatusRegistered, Indicator: eim.StatusIdle, Timestamp: 1},
			InstanceID:   "inst-000000d1", SecurityFeature: feature, HostStatus: hostStatus, Onboarding: onboarding,
			SecureBoot: sb, SecureBootAt: sbAt}
	}
	flagged := eim.StatusValue{Text: eim.SecureBootMismatch, Indicator: eim.StatusError, Timestamp: 5}
	why := eim.StatusValue{Text: eim.SecureBootMismatch + ": instance inst-000000d1 asks for …", Indicator: eim.StatusError, Timestamp: 5}
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name       string
		claim      *eim.DeviceClaim
		state      eim.SecureBootState
		installed  bool
		refused    bool
		sb         *eim.SecureBootReport // recorded
		hostStatus string                // written ("" none)
		onboarding string                // prefix of the onboarding status written by a refusal ("" none)
		creds      bool
	}{
		{"asks, disabled", claim(eim.SecurityFeatureSecureBootFDE, eim.StatusValue{}, eim.StatusValue{}, "", 0), eim.SecureBootStateDisabled, false,
			true, &eim.SecureBootReport{State: eim.SecureBootStateDisabled, At: at}, eim.SecureBootMismatch, eim.SecureBootMismatch + ": instance inst-000000d1", false},
		{"asks, disabled, flagged already", claim(eim.SecurityFeatureSecureBootFDE, flagged, eim.StatusValue{}, eim.SecureBootStateDisabled, at-1), eim.SecureBootStateDisabled, false,
			true, nil, "", eim.SecureBootMismatch + ": instance inst-000000d1", false},
		{"none, enforced", claim("SECURITY_FEATURE_NONE", eim.StatusValue{}, eim.StatusValue{}, eim.SecureBootStateEnabled, at-eim.SecureBootRefresh), eim.SecureBootStateEnabled, false,
			true, &eim.SecureBootReport{State: eim.SecureBootStateEnabled, At: at}, eim.SecureBootMismatch, eim.SecureBootMismatch, false},
		{"fixed", claim(eim.SecurityFeatureSecureBootFDE, flagged, why, eim.SecureBootStateDisabled, at-1), eim.SecureBootStateEnabled, false,
			false, &eim.SecureBootReport{State: eim.SecureBootStateEnabled, At: at}, StatusBooting, "", true},
		{"matches, recorded lately", claim(eim.SecurityFeatureSecureBootFDE, eim.StatusValue{}, eim.StatusValue{}, eim.SecureBootStateEnabled, at-1), eim.SecureBootStateEnabled, false,
			false, nil, "", "", true},
		{"not reported", claim(eim.SecurityFeatureSecureBootFDE, eim.StatusValue{}, eim.StatusValue{}, eim.SecureBootStateEnabled, 1), eim.SecureBootStateUnspecified, false,
			false, nil, "", "", true},
		{"installed", claim(eim.SecurityFeatureSecureBootFDE, eim.StatusValue{}, eim.StatusValue{}, "", 0), eim.SecureBootStateDisabled, true,
			false, &eim.SecureBootReport{State: eim.SecureBootStateDisabled, At: at}, "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := identity{uuid: uuid, secureBoot: c.state, installed: c.installed}
			d, err := decide(eim.DeviceClaimSet{ByUUID: []*eim.DeviceClaim{c.claim}}, id, "", now)
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			if got := d.sbMismatch != nil; got != c.refused {
				t.Fatalf("refused: got %v (%v), want %v", got, d.sbMismatch, c.refused)
			}
			if _, err := d.answer(&Service{}, "secret"); (err != nil) != c.refused {
				t.Errorf("answer: got error %v, want one: %v", err, c.refused)
			}
			chs := d.changes(id, hash, now)
			if len(chs) != 1 {
				if c.sb != nil || c.hostStatus != "" || c.onboarding != "" || c.creds {
					t.Fatalf("changes: got %d, want 1", len(chs))
				}
				return
			}
			ch := chs[0]
			if ch.Project != "p" || ch.ID != c.claim.ID {
				t.Errorf("change of %s/%s, want p/%s", ch.Project, ch.ID, c.claim.ID)
			}
			switch {
			case (ch.SecureBoot == nil) != (c.sb == nil):
				t.Errorf("Secure Boot recorded: got %+v, want %+v", ch.SecureBoot, c.sb)
			case c.sb != nil && *ch.SecureBoot != *c.sb:
				t.Errorf("Secure Boot recorded: got %+v, want %+v", *ch.SecureBoot, *c.sb)
			}
			gotHost := ""
			if ch.HostStatus != nil {
				gotHost = ch.HostStatus.Text
			}
			if gotHost != c.hostStatus {
				t.Errorf("host status written: got %q, want %q", gotHost, c.hostStatus)
			}
			if c.onboarding == "" && ch.Onboarding != nil {
				t.Errorf("onboarding status written: got %+v, want none", *ch.Onboarding)
			}
			if c.onboarding != "" && (ch.Onboarding == nil || !strings.HasPrefix(ch.Onboarding.Text, c.onboarding) || ch.Onboarding.Indicator != eim.StatusError) {
				t.Errorf("onboarding status written: got %+v, want %q… ERROR", ch.Onboarding, c.onboarding)
			}
			if got := ch.Credentials != nil; got != c.creds {
				t.Errorf("credentials issued: got %v, want %v", got, c.creds)
			}
			if err := ch.Check(c.claim); err != nil {
				t.Errorf("the change is not a valid one: %v", err)
			}
		})
	}
}
