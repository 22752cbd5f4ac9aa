package hostview_test

import (
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
)

// hostRow is a row with every field the view keeps set from a few
// values, for the round trips below.
func hostRow(own, shared string, ts uint64, secret string) *eim.Host {
	return &eim.Host{
		Meta: eim.Meta{ResourceID: "host-0000abcd" + own, Project: "p" + shared,
			Timestamps: eim.Timestamps{CreatedAt: eim.Time{Time: time.UnixMilli(1_700_000_000_123)}}},
		Name: "n" + own, SerialNumber: own, UUID: own + "u", Hostname: own + own, BootID: "b" + own, HardwareDigest: own + "d",
		NodeSecretHash: secret, NodeCredGen: int64(ts) + 1,
		SiteID: shared, DesiredState: eim.HostState("D" + shared), CurrentState: eim.HostStateOnboarded,
		HostStatus: shared + "s", HostStatusIndicator: eim.StatusIdle, HostStatusTimestamp: ts,
		BmcKind: eim.BaremetalControllerKind(shared), DesiredPowerState: eim.PowerState(shared + "p"), CurrentPowerState: eim.PowerState(shared + "c"),
		PowerStatus: shared, PowerStatusTimestamp: ts + 1,
		OnboardingStatus: "o" + shared, OnboardingStatusIndicator: eim.StatusIndication(shared), OnboardingStatusTimestamp: ts / 2,
		RegistrationStatus: "r" + shared, RegistrationStatusIndicator: eim.StatusError, RegistrationStatusTimestamp: ts,
	}
}

func instRow(shared string, ts uint64, avail string) *eim.Instance {
	return &eim.Instance{
		Meta:         eim.Meta{ResourceID: "inst-0000abcd", Timestamps: eim.Timestamps{CreatedAt: eim.Time{Time: time.UnixMilli(1_700_000_001_000)}}},
		OSID:         "os-" + shared,
		CurrentState: eim.InstanceState("S" + shared), InstanceStatusTimestamp: ts,
		ProvisioningStatus: shared, ProvisioningStatusIndicator: eim.StatusInProgress, ProvisioningStatusTimestamp: ts + 7,
		UpdateStatus: "u" + shared, UpdateStatusIndicator: eim.StatusIndication(shared), OsUpdateAvailable: avail,
	}
}

// checkHost compares every field a record gives with its row's.
func checkHost(t *testing.T, r *eim.Host, in *eim.Instance, h *hostview.Host) {
	t.Helper()
	type pair struct {
		name      string
		got, want any
	}
	ps := []pair{
		{"ID", h.ID(), r.ResourceID}, {"Project", h.Project(), r.Project}, {"SiteID", h.SiteID(), r.SiteID},
		{"Name", h.Name(), r.Name}, {"SerialNumber", h.SerialNumber(), r.SerialNumber}, {"UUID", h.UUID(), r.UUID},
		{"Hostname", h.Hostname(), r.Hostname}, {"BootID", h.BootID(), r.BootID}, {"HardwareDigest", h.HardwareDigest(), r.HardwareDigest},
		{"NodeSecretHash", h.NodeSecretHash(), r.NodeSecretHash}, {"HasSecret", h.HasSecret(), r.NodeSecretHash != ""},
		{"NodeCredGen", h.NodeCredGen(), r.NodeCredGen},
		{"DesiredState", h.DesiredState(), r.DesiredState}, {"CurrentState", h.CurrentState(), r.CurrentState},
		{"HostStatus", h.HostStatus(), r.HostStatus}, {"HostStatusIndicator", h.HostStatusIndicator(), r.HostStatusIndicator},
		{"HostStatusTimestamp", h.HostStatusTimestamp(), r.HostStatusTimestamp},
		{"BmcKind", h.BmcKind(), r.BmcKind}, {"DesiredPowerState", h.DesiredPowerState(), r.DesiredPowerState},
		{"CurrentPowerState", h.CurrentPowerState(), r.CurrentPowerState}, {"PowerStatus", h.PowerStatus(), r.PowerStatus},
		{"PowerStatusTimestamp", h.PowerStatusTimestamp(), r.PowerStatusTimestamp},
		{"OnboardingStatus", h.OnboardingStatus(), r.OnboardingStatus}, {"OnboardingStatusIndicator", h.OnboardingStatusIndicator(), r.OnboardingStatusIndicator},
		{"OnboardingStatusTimestamp", h.OnboardingStatusTimestamp(), r.OnboardingStatusTimestamp},
		{"RegistrationStatus", h.RegistrationStatus(), r.RegistrationStatus}, {"RegistrationStatusIndicator", h.RegistrationStatusIndicator(), r.RegistrationStatusIndicator},
		{"RegistrationStatusTimestamp", h.RegistrationStatusTimestamp(), r.RegistrationStatusTimestamp},
		{"CreatedAt", h.CreatedAt(), r.Timestamps.CreatedAt.UnixMilli()},
		{"Credentials", h.Credentials(), eim.NodeCredentials{HostID: r.ResourceID, Project: r.Project, DesiredState: r.DesiredState, SecretHash: r.NodeSecretHash, Gen: r.NodeCredGen}},
	}
	if in == nil {
		ps = append(ps, pair{"Instance", h.Instance() == nil, true})
	} else if i := h.Instance(); i == nil {
		t.Fatalf("Instance() = nil, want the instance %s", in.ResourceID)
	} else {
		ps = append(ps,
			pair{"Instance.ID", i.ID(), in.ResourceID}, pair{"Instance.OSID", i.OSID(), in.OSID},
			pair{"Instance.CurrentState", i.CurrentState(), in.CurrentState},
			pair{"Instance.InstanceStatusTimestamp", i.InstanceStatusTimestamp(), in.InstanceStatusTimestamp},
			pair{"Instance.ProvisioningStatus", i.ProvisioningStatus(), in.ProvisioningStatus},
			pair{"Instance.ProvisioningStatusIndicator", i.ProvisioningStatusIndicator(), in.ProvisioningStatusIndicator},
			pair{"Instance.ProvisioningStatusTimestamp", i.ProvisioningStatusTimestamp(), in.ProvisioningStatusTimestamp},
			pair{"Instance.UpdateStatus", i.UpdateStatus(), in.UpdateStatus},
			pair{"Instance.UpdateStatusIndicator", i.UpdateStatusIndicator(), in.UpdateStatusIndicator},
			pair{"Instance.OSUpdateAvailable", i.OSUpdateAvailable(), in.OsUpdateAvailable != ""},
			pair{"Instance.CreatedAt", i.CreatedAt(), in.Timestamps.CreatedAt.UnixMilli()})
	}
	for _, p := range ps {
		if p.got != p.want {
			t.Errorf("%s: got %.60q, want %.60q", p.name, p.got, p.want)
		}
	}
}

const hexHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// Every field of a host and its instance reads back as its row had it,
// whether the record is compact or, for rows that do not fit, plain.
func TestHostRecordRoundTrip(t *testing.T) {
	long := strings.Repeat("é-long-", 3000) // 27,000 bytes
	cases := []struct {
		name               string
		own, shared        string
		ts                 uint64
		secret, updateText string
		noInstance         bool
	}{
		{name: "typical", own: "SN-0001", shared: "Running", ts: 1_764_700_000, secret: hexHash, updateText: "24.04.2"},
		{name: "empty strings", secret: "", noInstance: true},
		{name: "zero timestamps", own: "x", shared: "y"},
		{name: "long own strings (past 64 KiB together: plain)", own: long, shared: "s", ts: 5, secret: hexHash},
		{name: "long shared strings", own: "o", shared: long, ts: 5, secret: hexHash},
		{name: "timestamp past uint32 (plain)", own: "o", shared: "s", ts: math.MaxUint32 + 1, secret: hexHash},
		{name: "largest timestamp", own: "o", shared: "s", ts: math.MaxUint64 - 7},
		{name: "secret hash not hex (plain)", own: "o", shared: "s", secret: "hash"},
		{name: "secret hash upper-case hex (plain)", own: "o", shared: "s", secret: strings.ToUpper(hexHash)},
		{name: "secret hash short hex (plain)", own: "o", shared: "s", secret: "abcd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hostRow(c.own, c.shared, c.ts, c.secret)
			var in *eim.Instance
			if !c.noInstance {
				in = instRow(c.shared, c.ts, c.updateText)
			}
			checkHost(t, r, in, hostview.NewHost(r, in))
		})
	}
}

// Records share one copy of each shared value, and a host's own strings
// are its own.
func TestHostRecordShares(t *testing.T) {
	a := hostview.NewHost(hostRow("a", "Running", 1, hexHash), nil)
	b := hostview.NewHost(hostRow("b", "Running", 2, hexHash), nil)
	if a.HostStatus() != b.HostStatus() || unsafeData(a.HostStatus()) != unsafeData(b.HostStatus()) {
		t.Errorf("two records' equal statuses are two copies")
	}
	if a.Name() == b.Name() {
		t.Errorf("two hosts' names read the same: %q", a.Name())
	}
}

func FuzzHostRecord(f *testing.F) {
	f.Add("SN-1", "Running", uint64(1_764_700_000), hexHash, "")
	f.Add("", "", uint64(0), "", "x")
	f.Add("\x00\xff", "No Connection", uint64(math.MaxUint32), "HASH", "y")
	f.Add(strings.Repeat("z", 40000), "s", uint64(math.MaxUint32+1), hexHash[:62], "")
	f.Fuzz(func(t *testing.T, own, shared string, ts uint64, secret, avail string) {
		r := hostRow(own, shared, ts, secret)
		checkHost(t, r, nil, hostview.NewHost(r, nil))
		in := instRow(shared, ts, avail)
		checkHost(t, r, in, hostview.NewHost(r, in))
	})
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }
