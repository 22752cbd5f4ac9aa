package hostview

import (
	"strings"
	"sync/atomic"
	"unique"

	"github.com/eimhq/eim"
)

// Host is what the view holds of one host: the fields of its row that
// its readers use — the modules answering nodes, and the projections
// over the fleet (the UI's summaries, the exporter's series) — and its
// instance's. It is never changed once returned: a change of the host or
// of its instance makes a new one.
//
// It is compact: the values many hosts share (project, site, states,
// status texts) are interned, one copy per process, and the host's own
// strings (ID, name, serial, UUID, hostname, secret hash) share one
// allocation.
type Host struct {
	ID, Project  string
	SiteID       string
	DesiredState eim.HostState
	CurrentState eim.HostState
	// The host module's: the status it shows, the hardware digest and
	// the node's boot it keeps, and the power fields its in-band actions
	// follow.
	HostStatus           string
	HostStatusIndicator  eim.StatusIndication
	HardwareDigest       string
	BootID               string
	BmcKind              eim.BaremetalControllerKind
	DesiredPowerState    eim.PowerState
	CurrentPowerState    eim.PowerState
	PowerStatus          string
	PowerStatusTimestamp uint64
	// Node authentication's.
	NodeSecretHash string
	NodeCredGen    int64

	// The projections': what the fleet's pages and series show.
	Name, SerialNumber, UUID, Hostname string
	HostStatusTimestamp                uint64
	OnboardingStatus                   string
	OnboardingStatusIndicator          eim.StatusIndication
	OnboardingStatusTimestamp          uint64
	RegistrationStatus                 string
	RegistrationStatusIndicator        eim.StatusIndication
	RegistrationStatusTimestamp        uint64
	// CreatedAt is when the host was created, in unix milliseconds (0:
	// not known).
	CreatedAt int64
	// Instance is the host's instance; nil: it has none.
	Instance *Instance

	memo atomic.Pointer[memos]
}

// Instance is what the view holds of a host's instance. It is never
// changed once returned.
type Instance struct {
	ID                          string
	OSID                        string
	CurrentState                eim.InstanceState
	InstanceStatusTimestamp     uint64
	ProvisioningStatus          string
	ProvisioningStatusIndicator eim.StatusIndication
	ProvisioningStatusTimestamp uint64
	UpdateStatus                string
	UpdateStatusIndicator       eim.StatusIndication
	// OSUpdateAvailable: the instance's OS has an update (its
	// osUpdateAvailable text is not empty).
	OSUpdateAvailable bool
	// CreatedAt is when the instance was created, in unix milliseconds.
	CreatedAt int64
}

// factsOf returns what the view keeps of a host row (without its
// instance).
func factsOf(h *eim.Host) *Host {
	n := &Host{
		Project: intern(h.Project), SiteID: intern(h.SiteID),
		DesiredState: intern(h.DesiredState), CurrentState: intern(h.CurrentState),
		HostStatus: intern(h.HostStatus), HostStatusIndicator: intern(h.HostStatusIndicator), HardwareDigest: intern(h.HardwareDigest),
		BmcKind: intern(h.BmcKind), DesiredPowerState: intern(h.DesiredPowerState), CurrentPowerState: intern(h.CurrentPowerState),
		PowerStatus: intern(h.PowerStatus), PowerStatusTimestamp: h.PowerStatusTimestamp,
		NodeCredGen:         h.NodeCredGen,
		HostStatusTimestamp: h.HostStatusTimestamp,
		OnboardingStatus:    intern(h.OnboardingStatus), OnboardingStatusIndicator: intern(h.OnboardingStatusIndicator),
		OnboardingStatusTimestamp: h.OnboardingStatusTimestamp,
		RegistrationStatus:        intern(h.RegistrationStatus), RegistrationStatusIndicator: intern(h.RegistrationStatusIndicator),
		RegistrationStatusTimestamp: h.RegistrationStatusTimestamp,
		CreatedAt:                   unixMilli(h.Timestamps.CreatedAt),
	}
	pack([]*string{&n.ID, &n.Name, &n.SerialNumber, &n.UUID, &n.Hostname, &n.NodeSecretHash, &n.BootID},
		[]string{h.ResourceID, h.Name, h.SerialNumber, h.UUID, h.Hostname, h.NodeSecretHash, h.BootID})
	return n
}

// instanceOf returns what the view keeps of an instance row.
func instanceOf(in *eim.Instance) *Instance {
	return &Instance{
		ID: in.ResourceID, OSID: intern(in.OSID), CurrentState: intern(in.CurrentState),
		InstanceStatusTimestamp: in.InstanceStatusTimestamp,
		ProvisioningStatus:      intern(in.ProvisioningStatus), ProvisioningStatusIndicator: intern(in.ProvisioningStatusIndicator),
		ProvisioningStatusTimestamp: in.ProvisioningStatusTimestamp,
		UpdateStatus:                intern(in.UpdateStatus), UpdateStatusIndicator: intern(in.UpdateStatusIndicator),
		OSUpdateAvailable: in.OsUpdateAvailable != "",
		CreatedAt:         unixMilli(in.Timestamps.CreatedAt),
	}
}

// withInstance returns a copy of h's facts with instance in (nil: none),
// and no memo: a memo was computed from what h was.
func (h *Host) withInstance(in *Instance) *Host {
	n := &Host{
		ID: h.ID, Project: h.Project, SiteID: h.SiteID, DesiredState: h.DesiredState, CurrentState: h.CurrentState,
		HostStatus: h.HostStatus, HostStatusIndicator: h.HostStatusIndicator, HardwareDigest: h.HardwareDigest, BootID: h.BootID,
		BmcKind: h.BmcKind, DesiredPowerState: h.DesiredPowerState, CurrentPowerState: h.CurrentPowerState,
		PowerStatus: h.PowerStatus, PowerStatusTimestamp: h.PowerStatusTimestamp,
		NodeSecretHash: h.NodeSecretHash, NodeCredGen: h.NodeCredGen,
		Name: h.Name, SerialNumber: h.SerialNumber, UUID: h.UUID, Hostname: h.Hostname,
		HostStatusTimestamp: h.HostStatusTimestamp,
		OnboardingStatus:    h.OnboardingStatus, OnboardingStatusIndicator: h.OnboardingStatusIndicator,
		OnboardingStatusTimestamp: h.OnboardingStatusTimestamp,
		RegistrationStatus:        h.RegistrationStatus, RegistrationStatusIndicator: h.RegistrationStatusIndicator,
		RegistrationStatusTimestamp: h.RegistrationStatusTimestamp,
		CreatedAt:                   h.CreatedAt,
		Instance:                    in,
	}
	return n
}

func unixMilli(t eim.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// intern returns the one copy of a value that many hosts share (states,
// indicators, common statuses, project and site IDs): each read of a row
// allocates its strings anew, which for 100,000 hosts is tens of MB.
func intern[S ~string](v S) S {
	if v == "" {
		return ""
	}
	return S(unique.Make(string(v)).Value())
}

// pack sets each *dst[i] to src[i], the values sharing one allocation
// rather than one each (each with its size class's slack).
func pack(dst []*string, src []string) {
	size := 0
	for _, s := range src {
		size += len(s)
	}
	var b strings.Builder
	b.Grow(size)
	for _, s := range src {
		b.WriteString(s)
	}
	all := b.String()
	at := 0
	for i, s := range src {
		*dst[i] = all[at : at+len(s)]
		at += len(s)
	}
}
