package eim

import "context"

// TxViewer runs fn in a read-only transaction scoped to project: a
// Store's View, or a wrapper of it (one that counts reads, or fails them
// while its database is away).
type TxViewer interface {
	View(ctx context.Context, project string, fn func(Tx) error) error
}

// HostFacts are the per-host view's reads (package hostview): the few
// columns of hosts and instances a process keeps of each (HostRow,
// InstanceRow), selected by name and scanned into plain values — never
// whole rows, whose hardware and JSON columns the view does not keep
// and would pay to decode for every changed host. Each read is one
// statement in a read-only transaction of the TxViewer the store was
// asked for them with.
type HostFacts interface {
	// Hosts reads the hosts with the ids that exist in project ("": in
	// any), in any order.
	Hosts(ctx context.Context, project string, ids []string) ([]HostRow, error)
	// HostsAfter reads, of every project, up to limit hosts whose IDs
	// come after after ("": from the first), in the order of their IDs:
	// a page of a scan of the fleet.
	HostsAfter(ctx context.Context, after string, limit int) ([]HostRow, error)
	// Instances reads the instances with the ids that exist, of any
	// project, in any order.
	Instances(ctx context.Context, ids []string) ([]InstanceRow, error)
	// InstancesAfter is HostsAfter for instances.
	InstancesAfter(ctx context.Context, after string, limit int) ([]InstanceRow, error)
}

// HostRow is what the per-host view keeps of a host's row: its identity,
// the node's credentials, its states and statuses, its power and what
// the fleet's pages and series show.
type HostRow struct {
	ID, Project, SiteID                  string
	Name, SerialNumber, UUID, Hostname   string
	BootID, HardwareDigest               string
	NodeSecretHash                       string
	NodeCredGen                          int64
	DesiredState, CurrentState           HostState
	Status, Onboarding, Registration     StatusValue // hostStatus, onboardingStatus, registrationStatus
	BmcKind                              BaremetalControllerKind
	DesiredPowerState, CurrentPowerState PowerState
	PowerStatus                          string
	PowerStatusTimestamp                 uint64
	CreatedAt                            int64 // unix milliseconds; 0: not known
}

// HostRowOf returns the fields of h a HostRow holds.
func HostRowOf(h *Host) HostRow {
	return HostRow{
		ID: h.ResourceID, Project: h.Project, SiteID: h.SiteID,
		Name: h.Name, SerialNumber: h.SerialNumber, UUID: h.UUID, Hostname: h.Hostname,
		BootID: h.BootID, HardwareDigest: h.HardwareDigest,
		NodeSecretHash: h.NodeSecretHash, NodeCredGen: h.NodeCredGen,
		DesiredState: h.DesiredState, CurrentState: h.CurrentState,
		Status:            StatusValue{Text: h.HostStatus, Indicator: h.HostStatusIndicator, Timestamp: h.HostStatusTimestamp},
		Onboarding:        StatusValue{Text: h.OnboardingStatus, Indicator: h.OnboardingStatusIndicator, Timestamp: h.OnboardingStatusTimestamp},
		Registration:      StatusValue{Text: h.RegistrationStatus, Indicator: h.RegistrationStatusIndicator, Timestamp: h.RegistrationStatusTimestamp},
		BmcKind:           h.BmcKind,
		DesiredPowerState: h.DesiredPowerState, CurrentPowerState: h.CurrentPowerState,
		PowerStatus: h.PowerStatus, PowerStatusTimestamp: h.PowerStatusTimestamp,
		CreatedAt: unixMilliOrZero(h.Timestamps.CreatedAt),
	}
}

// InstanceRow is what the per-host view keeps of an instance's row.
type InstanceRow struct {
	ID, Project, HostID, OSID string
	CurrentState              InstanceState
	StatusTimestamp           uint64      // instanceStatusTimestamp
	Provisioning, Update      StatusValue // provisioningStatus, updateStatus
	// UpdateAvailable: its osUpdateAvailable is not empty.
	UpdateAvailable bool
	CreatedAt       int64 // unix milliseconds; 0: not known
}

// InstanceRowOf returns the fields of in an InstanceRow holds.
func InstanceRowOf(in *Instance) InstanceRow {
	return InstanceRow{
		ID: in.ResourceID, Project: in.Project, HostID: in.HostID, OSID: in.OSID,
		CurrentState:    in.CurrentState,
		StatusTimestamp: in.InstanceStatusTimestamp,
		Provisioning:    StatusValue{Text: in.ProvisioningStatus, Indicator: in.ProvisioningStatusIndicator, Timestamp: in.ProvisioningStatusTimestamp},
		Update:          StatusValue{Text: in.UpdateStatus, Indicator: in.UpdateStatusIndicator, Timestamp: in.UpdateStatusTimestamp},
		UpdateAvailable: in.OsUpdateAvailable != "",
		CreatedAt:       unixMilliOrZero(in.Timestamps.CreatedAt),
	}
}

func unixMilliOrZero(t Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
