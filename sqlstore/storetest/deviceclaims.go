package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// testDeviceClaims: the onboarding module's typed operations read a
// device's registrations across projects as a few columns (by UUID
// without regard to case, by serial number, the earliest first, with
// their statuses, Secure Boot state and their instance's state and
// security feature), write only what the decision changes, through the
// runner given, and record it as the inventory's field writes do.
func testDeviceClaims(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	run := &countingRunner{s: s}
	dc := s.DeviceClaims(run)
	onb := eim.WithActor(ctx(t), eim.ModuleActor("onboarding"))
	const uuid = "4c4c4544-0000-4000-8000-00000000aa01"
	a := create(t, s, p1, &eim.Host{Name: "a", UUID: strings.ToUpper(uuid), SerialNumber: "SNAAAAA1", DesiredState: eim.HostStateOnboarded,
		RegistrationStatus: "Host is Registered", RegistrationStatusIndicator: eim.StatusIdle, RegistrationStatusTimestamp: 10,
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: 11,
		OnboardingStatus: "Onboarded", OnboardingStatusIndicator: eim.StatusIdle, OnboardingStatusTimestamp: 12,
		SecureBootState: eim.SecureBootStateEnabled, SecureBootStateTimestamp: 13}).(*eim.Host)
	ai := create(t, s, p1, &eim.Instance{Name: "a", HostID: a.ResourceID, CurrentState: eim.InstanceStateRunning,
		SecurityFeature: eim.SecurityFeatureSecureBootFDE}).(*eim.Instance)
	b := create(t, s, p2, &eim.Host{Name: "b", UUID: uuid, DesiredState: eim.HostStateRegistered}).(*eim.Host)

	set, err := dc.Claims(ctx(t), uuid, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(set.ByUUID) != 2 || len(set.BySerial) != 0 {
		t.Fatalf("Claims by uuid: got %d by UUID, %d by serial; want 2, 0", len(set.ByUUID), len(set.BySerial))
	}
	got, want := *set.ByUUID[0], eim.DeviceClaim{ID: a.ResourceID, Project: p1, UUID: strings.ToUpper(uuid), SerialNumber: "SNAAAAA1",
		DesiredState: eim.HostStateOnboarded, CurrentState: a.CurrentState,
		InstanceState: eim.InstanceStateRunning, InstanceID: ai.ResourceID, SecurityFeature: eim.SecurityFeatureSecureBootFDE,
		Registration: eim.StatusValue{Text: "Host is Registered", Indicator: eim.StatusIdle, Timestamp: 10},
		HostStatus:   eim.StatusValue{Text: "Running", Indicator: eim.StatusIdle, Timestamp: 11},
		Onboarding:   eim.StatusValue{Text: "Onboarded", Indicator: eim.StatusIdle, Timestamp: 12},
		SecureBoot:   eim.SecureBootStateEnabled, SecureBootAt: 13}
	if got != want {
		t.Errorf("first claim: got %+v, want %+v", got, want)
	}
	if in := set.ByUUID[0].Instance(); in == nil || in.ResourceID != ai.ResourceID || in.SecurityFeature != eim.SecurityFeatureSecureBootFDE {
		t.Errorf("first claim's instance: got %+v, want %s with %s", in, ai.ResourceID, eim.SecurityFeatureSecureBootFDE)
	}
	if c := set.ByUUID[1]; c.ID != b.ResourceID || c.Project != p2 || c.InstanceState != "" || c.InstanceID != "" || c.Instance() != nil ||
		c.DesiredState != eim.HostStateRegistered || c.SecureBoot != b.SecureBootState || c.SecureBootAt != 0 {
		t.Errorf("second claim: got %+v, want host %s of %s without an instance, its Secure Boot state not reported", c, b.ResourceID, p2)
	}
	if set, err := dc.Claims(ctx(t), strings.ToUpper(uuid), "SNAAAAA1"); err != nil || len(set.ByUUID) != 2 || len(set.BySerial) != 1 || set.BySerial[0].ID != a.ResourceID {
		t.Errorf("Claims by an upper-case uuid and a serial: got %+v, %v; want 2 by UUID, host a by serial", set, err)
	}
	_, err = dc.Claims(ctx(t), "", "")
	wantCode(t, err, eim.EINVALID)
	_, err = dc.Claims(ctx(t), "not-a-uuid", "")
	wantCode(t, err, eim.EINVALID)
	if set, err := dc.Claims(ctx(t), "", "SNNOBODY1"); err != nil || len(set.BySerial) != 0 {
		t.Errorf("Claims of an unknown serial: got %+v, %v; want none", set, err)
	}

	// Credentials issued to a host registered by serial, the device's UUID
	// filling in, and a registration status: written as the inventory's
	// field writes wrote them (a twin host in the other project gets
	// those).
	const serial = "SNCCCCC1"
	typed := create(t, s, p1, &eim.Host{Name: "typed", SerialNumber: serial, DesiredState: eim.HostStateOnboarded}).(*eim.Host)
	generic := create(t, s, p2, &eim.Host{Name: "generic", SerialNumber: serial, DesiredState: eim.HostStateOnboarded}).(*eim.Host)
	const devUUID = "4c4c4544-0000-4000-8000-00000000cc01"
	hash := strings.Repeat("ab", 32)
	reg := eim.StatusValue{Text: "Host is Registered", Indicator: eim.StatusIdle, Timestamp: 20}
	onboarded := eim.StatusValue{Text: "Onboarded", Indicator: eim.StatusIdle, Timestamp: 20}
	err = dc.RecordDiscover(onb, "", serial, func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
		for _, c := range set.BySerial {
			if c.ID == typed.ResourceID {
				return []eim.ClaimChange{{Project: c.Project, ID: c.ID, Registration: &reg,
					Credentials: &eim.IssuedCredentials{SecretHash: hash, Status: onboarded, UUID: devUUID, SerialNumber: serial}}}, nil
			}
		}
		return nil, fmt.Errorf("host typed is not among the claims %+v", set.BySerial)
	})
	if err != nil {
		t.Fatalf("RecordDiscover: %v", err)
	}
	if run.n.Load() == 0 {
		t.Errorf("the runner ran no transaction")
	}
	update(t, s, p2, func(tx eim.Tx) error {
		w := &eim.Host{Meta: eim.Meta{ResourceID: generic.ResourceID}, RegistrationStatus: reg.Text, RegistrationStatusIndicator: reg.Indicator, RegistrationStatusTimestamp: reg.Timestamp}
		if err := tx.UpdateFields(onb, w, "registrationStatus", "registrationStatusIndicator", "registrationStatusTimestamp"); err != nil {
			return err
		}
		w = &eim.Host{Meta: eim.Meta{ResourceID: generic.ResourceID}, NodeSecretHash: hash, NodeCredGen: 1, CurrentState: eim.HostStateOnboarded,
			OnboardingStatus: onboarded.Text, OnboardingStatusIndicator: onboarded.Indicator, OnboardingStatusTimestamp: onboarded.Timestamp, UUID: devUUID}
		return tx.UpdateFieldsIf(onb, w, []eim.Cond{{Field: "desiredState", Value: eim.HostStateOnboarded}, {Field: "node_cred_gen", Value: int64(0)}, {Field: "uuid", Value: ""}},
			"node_secret_hash", "node_cred_gen", "currentState", "onboardingStatus", "onboardingStatusIndicator", "onboardingStatusTimestamp", "uuid")
	})
	sameWrites(t, s, p1, typed.ResourceID, p2, generic.ResourceID)
	r, _ := get(t, s, p1, eim.KindHost, typed.ResourceID)
	if h := r.(*eim.Host); h.NodeSecretHash != hash || h.NodeCredGen != 1 || h.CurrentState != eim.HostStateOnboarded || h.UUID != devUUID ||
		h.OnboardingStatus != "Onboarded" || h.RegistrationStatus != reg.Text || h.Name != "typed" {
		t.Errorf("stored host: got hash %q gen %d current %q uuid %q onboarding %q registration %q name %q", h.NodeSecretHash, h.NodeCredGen,
			h.CurrentState, h.UUID, h.OnboardingStatus, h.RegistrationStatus, h.Name)
	}

	// A Secure Boot mismatch: the state reported, the host status over
	// the one read and the onboarding status that says why, written as
	// the inventory's field writes wrote them, and read back.
	const sbSerial = "SNDDDDD1"
	sbTyped := create(t, s, p1, &eim.Host{Name: "sb-typed", SerialNumber: sbSerial, DesiredState: eim.HostStateOnboarded,
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: 5}).(*eim.Host)
	sbGeneric := create(t, s, p2, &eim.Host{Name: "sb-generic", SerialNumber: sbSerial, DesiredState: eim.HostStateOnboarded,
		HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: 5}).(*eim.Host)
	sbReport := eim.SecureBootReport{State: eim.SecureBootStateDisabled, At: 30}
	flagged := eim.StatusValue{Text: eim.SecureBootMismatch, Indicator: eim.StatusError, Timestamp: 30}
	why := eim.StatusValue{Text: eim.SecureBootMismatch + ": the node booted with Secure Boot disabled", Indicator: eim.StatusError, Timestamp: 30}
	err = dc.RecordDiscover(onb, "", sbSerial, func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
		for _, c := range set.BySerial {
			if c.ID == sbTyped.ResourceID {
				if c.HostStatus.Text != "Running" || c.SecureBoot != sbTyped.SecureBootState || c.SecureBootAt != 0 {
					return nil, fmt.Errorf("claim sb-typed: got host status %+v, Secure Boot %q at %d; want Running, %q at 0", c.HostStatus, c.SecureBoot, c.SecureBootAt, sbTyped.SecureBootState)
				}
				return []eim.ClaimChange{{Project: c.Project, ID: c.ID, SecureBoot: &sbReport, HostStatus: &flagged, Onboarding: &why}}, nil
			}
		}
		return nil, fmt.Errorf("host sb-typed is not among the claims %+v", set.BySerial)
	})
	if err != nil {
		t.Fatalf("RecordDiscover of a Secure Boot mismatch: %v", err)
	}
	update(t, s, p2, func(tx eim.Tx) error {
		w := &eim.Host{Meta: eim.Meta{ResourceID: sbGeneric.ResourceID}, SecureBootState: sbReport.State, SecureBootStateTimestamp: sbReport.At}
		if err := tx.UpdateFields(onb, w, "secureBootState", "secureBootStateTimestamp"); err != nil {
			return err
		}
		w = &eim.Host{Meta: eim.Meta{ResourceID: sbGeneric.ResourceID}, HostStatus: flagged.Text, HostStatusIndicator: flagged.Indicator, HostStatusTimestamp: flagged.Timestamp}
		if err := tx.UpdateFieldsIf(onb, w, []eim.Cond{{Field: "hostStatus", Value: "Running"}, {Field: "hostStatusIndicator", Value: eim.StatusIdle}},
			"hostStatus", "hostStatusIndicator", "hostStatusTimestamp"); err != nil {
			return err
		}
		w = &eim.Host{Meta: eim.Meta{ResourceID: sbGeneric.ResourceID}, OnboardingStatus: why.Text, OnboardingStatusIndicator: why.Indicator, OnboardingStatusTimestamp: why.Timestamp}
		return tx.UpdateFields(onb, w, "onboardingStatus", "onboardingStatusIndicator", "onboardingStatusTimestamp")
	})
	sameWrites(t, s, p1, sbTyped.ResourceID, p2, sbGeneric.ResourceID)
	set, err = dc.Claims(ctx(t), "", sbSerial)
	if err != nil || len(set.BySerial) != 2 {
		t.Fatalf("Claims after the mismatch: got %+v, %v; want 2 by serial", set, err)
	}
	c := set.BySerial[0]
	if c.ID != sbTyped.ResourceID {
		c = set.BySerial[1] // registered in the same second
	}
	if c.ID != sbTyped.ResourceID || c.HostStatus != flagged || c.Onboarding != why ||
		c.SecureBoot != sbReport.State || c.SecureBootAt != sbReport.At || c.CredGen != 0 {
		t.Errorf("claim sb-typed after the mismatch: got %+v; want host status %+v, onboarding %+v, Secure Boot %+v, no credentials", c, flagged, why, sbReport)
	}
	r, _ = get(t, s, p1, eim.KindHost, sbTyped.ResourceID)
	if h := r.(*eim.Host); h.SecureBootState != sbReport.State || h.SecureBootStateTimestamp != sbReport.At || h.HostStatus != flagged.Text ||
		h.OnboardingStatus != why.Text || h.OnboardingStatusIndicator != eim.StatusError || h.CurrentState == eim.HostStateOnboarded {
		t.Errorf("stored host sb-typed: got Secure Boot %q at %d, host status %q, onboarding %q %q, current %q", h.SecureBootState,
			h.SecureBootStateTimestamp, h.HostStatus, h.OnboardingStatus, h.OnboardingStatusIndicator, h.CurrentState)
	}

	// Fixed: the host status goes back over the flagged one read, and the
	// credentials carry the onboarding status.
	booting := eim.StatusValue{Text: "Booting", Indicator: eim.StatusInProgress, Timestamp: 40}
	err = dc.RecordDiscover(onb, "", sbSerial, func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
		return []eim.ClaimChange{{Project: p1, ID: sbTyped.ResourceID, SecureBoot: &eim.SecureBootReport{State: eim.SecureBootStateEnabled, At: 40},
			HostStatus: &booting, Credentials: &eim.IssuedCredentials{SecretHash: hash, Status: onboarded}}}, nil
	})
	if err != nil {
		t.Fatalf("RecordDiscover of a fixed Secure Boot: %v", err)
	}
	r, _ = get(t, s, p1, eim.KindHost, sbTyped.ResourceID)
	if h := r.(*eim.Host); h.SecureBootState != eim.SecureBootStateEnabled || h.SecureBootStateTimestamp != 40 || h.HostStatus != booting.Text ||
		h.HostStatusIndicator != booting.Indicator || h.OnboardingStatus != onboarded.Text || h.NodeCredGen != 1 {
		t.Errorf("stored host sb-typed after the fix: got Secure Boot %q at %d, host status %q %q, onboarding %q, generation %d", h.SecureBootState,
			h.SecureBootStateTimestamp, h.HostStatus, h.HostStatusIndicator, h.OnboardingStatus, h.NodeCredGen)
	}

	// Concurrent issues each write over the generation the one before
	// wrote: none is lost.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			errs <- dc.RecordDiscover(ctx(t), devUUID, "", func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
				for _, c := range set.ByUUID {
					if c.ID == typed.ResourceID {
						return []eim.ClaimChange{{Project: c.Project, ID: c.ID, Credentials: &eim.IssuedCredentials{SecretHash: hash, Status: onboarded}}}, nil
					}
				}
				return nil, fmt.Errorf("host typed is not among the claims by UUID")
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent RecordDiscover: %v", err)
		}
	}
	if r, _ := get(t, s, p1, eim.KindHost, typed.ResourceID); r.(*eim.Host).NodeCredGen != 9 {
		t.Errorf("credential generation after 8 concurrent issues: got %d, want 9", r.(*eim.Host).NodeCredGen)
	}

	// Refused: credentials for a host not to be onboarded, a host that is
	// not among the claims, bad values, a decision's error. Nothing is
	// written.
	rev, _ := s.Revision(ctx(t))
	for _, tc := range []struct {
		name  string
		ch    eim.ClaimChange
		code  string
		field string
	}{
		{"not to be onboarded", eim.ClaimChange{Project: p2, ID: b.ResourceID, Credentials: &eim.IssuedCredentials{SecretHash: hash, Status: onboarded}}, eim.EPRECONDITION, ""},
		{"not a claim", eim.ClaimChange{Project: p1, ID: typed.ResourceID, Registration: &reg}, eim.EINVALID, "hostId"},
		{"bad hash", eim.ClaimChange{Project: p1, ID: a.ResourceID, Credentials: &eim.IssuedCredentials{SecretHash: "ABC", Status: onboarded}}, eim.EINVALID, "secretHash"},
		{"bad status", eim.ClaimChange{Project: p1, ID: a.ResourceID, Registration: &eim.StatusValue{Text: "x", Indicator: "IDLE"}}, eim.EINVALID, "registrationStatusIndicator"},
		{"bad host status", eim.ClaimChange{Project: p1, ID: a.ResourceID, HostStatus: &eim.StatusValue{Text: "x", Indicator: "IDLE"}}, eim.EINVALID, "hostStatusIndicator"},
		{"bad onboarding status", eim.ClaimChange{Project: p1, ID: a.ResourceID, Onboarding: &eim.StatusValue{Text: "\xff"}}, eim.EINVALID, "onboardingStatus"},
		{"onboarding status twice", eim.ClaimChange{Project: p1, ID: a.ResourceID, Onboarding: &why,
			Credentials: &eim.IssuedCredentials{SecretHash: hash, Status: onboarded}}, eim.EINVALID, "onboardingStatus"},
		{"bad Secure Boot state", eim.ClaimChange{Project: p1, ID: a.ResourceID, SecureBoot: &eim.SecureBootReport{State: "ON", At: 1}}, eim.EINVALID, "secureBootState"},
		{"unspecified Secure Boot state", eim.ClaimChange{Project: p1, ID: a.ResourceID,
			SecureBoot: &eim.SecureBootReport{State: eim.SecureBootStateUnspecified, At: 1}}, eim.EINVALID, "secureBootState"},
		{"Secure Boot without a time", eim.ClaimChange{Project: p1, ID: a.ResourceID,
			SecureBoot: &eim.SecureBootReport{State: eim.SecureBootStateEnabled}}, eim.EINVALID, "secureBootStateTimestamp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dc.RecordDiscover(onb, uuid, "", func(eim.DeviceClaimSet) ([]eim.ClaimChange, error) { return []eim.ClaimChange{tc.ch}, nil })
			wantCode(t, err, tc.code)
			if tc.field != "" && !strings.HasPrefix(eim.ErrorMessage(err), tc.field+":") {
				t.Errorf("error: got %q, want it to name %s", eim.ErrorMessage(err), tc.field)
			}
		})
	}
	err = dc.RecordDiscover(onb, uuid, "", func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
		return []eim.ClaimChange{{Project: p1, ID: a.ResourceID, Registration: &reg}}, eim.Errorf(eim.EPRECONDITION, "refused")
	})
	wantCode(t, err, eim.EPRECONDITION)
	if rev2, _ := s.Revision(ctx(t)); rev2 != rev {
		t.Errorf("revision after refused changes: got %d, want %d", rev2, rev)
	}

	// A runner over another store is refused, not trusted.
	err = s.DeviceClaims(foreignRunner{}).RecordDiscover(ctx(t), uuid, "", func(eim.DeviceClaimSet) ([]eim.ClaimChange, error) { return nil, nil })
	wantCode(t, err, eim.EINTERNAL)
}
