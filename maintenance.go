package eim

import (
	"fmt"
	"regexp"
)

// OS updates: the policies that say how an instance's OS is updated, and
// the runs that record each update. Schedules (schedule.go) say when.

// UpdatePolicy says what an OS update policy installs.
type UpdatePolicy string

const (
	UpdatePolicyUnspecified UpdatePolicy = "UPDATE_POLICY_UNSPECIFIED"
	// UpdatePolicyLatest: the newest version of the instance's OS profile
	// (immutable OSes); the policy carries no other update field.
	UpdatePolicyLatest UpdatePolicy = "UPDATE_POLICY_LATEST"
	// UpdatePolicyTarget: for a mutable OS the policy's sources, packages
	// and kernel command; for an immutable OS its target OS.
	UpdatePolicyTarget UpdatePolicy = "UPDATE_POLICY_TARGET"
)

func (UpdatePolicy) Values() []string {
	return []string{string(UpdatePolicyUnspecified), string(UpdatePolicyLatest), string(UpdatePolicyTarget)}
}

// OSUpdatePolicy says how the OS of the instances that name it is updated.
// It cannot be changed once created, as in the original (delete and create
// another); an instance names it with osUpdatePolicyID.
type OSUpdatePolicy struct {
	Meta

	Name        string `json:"name" eim:"w"`
	Description string `json:"description" eim:"w"`
	// UpdateSources, UpdatePackages and UpdateKernelCommand update a
	// mutable (package-based) OS: package sources (DEB822 for Debian-like
	// OSes), package names one per line, kernel command-line options.
	UpdateSources       []string `json:"updateSources" eim:"w"`
	UpdatePackages      string   `json:"updatePackages" eim:"w"`
	UpdateKernelCommand string   `json:"updateKernelCommand" eim:"w"`
	// TargetOsID is the OS an immutable (image-based) OS is updated to.
	TargetOsID   string       `json:"targetOsId" eim:"w,edge=targetOs:os"`
	UpdatePolicy UpdatePolicy `json:"updatePolicy" eim:"w"`

	// Filled on read by the inventory, never stored.
	TargetOs *OS `json:"targetOs" db:"-"`
}

func (*OSUpdatePolicy) ResourceKind() Kind { return KindOSUpdatePolicy }

// Mutable reports whether the policy sets any field of a mutable OS update.
func (p *OSUpdatePolicy) Mutable() bool {
	return len(p.UpdateSources) > 0 || p.UpdatePackages != "" || p.UpdateKernelCommand != ""
}

// OSUpdateRun records one OS update of one instance: which policy it
// applied, when it started and ended, and how it went. The maintenance
// module writes it; to the API every field is read-only.
type OSUpdateRun struct {
	Meta

	Name        string `json:"name"`
	Description string `json:"description"`
	// The instance updated, the policy applied and the instance's host.
	// Stored, never on the wire (the API shows the expanded resources);
	// filters reach them as instance.resourceId, appliedPolicy.resourceId
	// and host.resourceId.
	InstanceID      string `json:"-" db:"instance_id" eim:"edge=instance:inst"`
	AppliedPolicyID string `json:"-" db:"applied_policy_id" eim:"edge=appliedPolicy:osupdatepolicy"`
	HostID          string `json:"-" db:"host_id" eim:"edge=host:host"`

	Status          string           `json:"status"`
	StatusIndicator StatusIndication `json:"statusIndicator"`
	StatusDetails   string           `json:"statusDetails"`
	// Unix times in seconds. EndTime is 0 while the run is open.
	StatusTimestamp uint64 `json:"statusTimestamp"`
	StartTime       uint64 `json:"startTime"`
	EndTime         uint64 `json:"endTime"`

	// Filled on read by the inventory, never stored.
	AppliedPolicy *OSUpdatePolicy `json:"appliedPolicy" db:"-"`
	Instance      *Instance       `json:"instance" db:"-"`
}

func (*OSUpdateRun) ResourceKind() Kind { return KindOSUpdateRun }

// Open reports whether the run has not ended.
func (r *OSUpdateRun) Open() bool { return r.EndTime == 0 }

// The update status texts of an instance (its updateStatus) and the
// indicator each goes with, as the original's maintenance manager wrote
// them. An instance nothing was reported for shows "No Current Update"
// with STATUS_INDICATION_UNSPECIFIED.
const (
	UpdateStatusNone     = "No Current Update"        // UNSPECIFIED
	UpdateStatusUpdating = "Updating"                 // IN_PROGRESS
	UpdateStatusDone     = "Update completed"         // IDLE
	UpdateStatusFailed   = "Update failed"            // ERROR
	UpdateStatusUpToDate = "No new updates available" // IDLE
)

// Limits of the OS update schemas.
const (
	MaxUpdateSources      = 100
	MaxRunStatusDetails   = 100000
	maxUpdateSourceLength = 10000
	maxUpdatePackages     = 500000
)

// Patterns of the OS update schemas.
var (
	reRunText       = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=?@!#,<>*() ]*$`)
	reUpdateSource  = regexp.MustCompile(`^[a-zA-Z-_0-9./:;=@?!#,<>*+()\[\]" \n]*$`)
	reUpdatePackage = regexp.MustCompile(`^[A-Za-z0-9._/:;=@?!#,<>\-*+~()\[\]{} \n]*$`)
)

// validateOSUpdatePolicy checks a policy's fields and the original's rules
// between them: a LATEST policy sets no other update field; a TARGET
// policy updates either a mutable OS (sources, packages, kernel command)
// or an immutable one (target OS), one of the two and not both.
func validateOSUpdatePolicy(p *OSUpdatePolicy) error {
	var c v
	c.self(KindOSUpdatePolicy, &p.Meta)
	c.required("name", p.Name)
	c.str("name", p.Name, 50, reName)
	c.str("description", p.Description, 200, reRunText)
	if n := len(p.UpdateSources); n > MaxUpdateSources {
		c.fail("updateSources", "has %d items, at most %d allowed", n, MaxUpdateSources)
	}
	for i, src := range p.UpdateSources {
		f := fmt.Sprintf("updateSources[%d]", i)
		c.required(f, src)
		c.str(f, src, maxUpdateSourceLength, reUpdateSource)
	}
	c.str("updatePackages", p.UpdatePackages, maxUpdatePackages, reUpdatePackage)
	c.str("updateKernelCommand", p.UpdateKernelCommand, 500, reText)
	c.id(KindOS, "targetOsId", p.TargetOsID)
	specified(&c, "updatePolicy", p.UpdatePolicy)
	switch p.UpdatePolicy {
	case UpdatePolicyLatest:
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"updateSources", len(p.UpdateSources) > 0},
			{"updatePackages", p.UpdatePackages != ""},
			{"updateKernelCommand", p.UpdateKernelCommand != ""},
			{"targetOsId", p.TargetOsID != ""},
		} {
			if f.set {
				c.fail(f.name, "must not be set with UPDATE_POLICY_LATEST (it updates to the newest version of the instance's OS and takes no other update field)")
			}
		}
	case UpdatePolicyTarget:
		switch {
		case p.TargetOsID != "" && p.Mutable():
			c.fail("targetOsId", "cannot be combined with updateSources, updatePackages or updateKernelCommand: "+
				"an UPDATE_POLICY_TARGET policy updates either a mutable OS (those fields) or an immutable OS (targetOsId)")
		case p.TargetOsID == "" && !p.Mutable():
			c.fail("updatePolicy", "UPDATE_POLICY_TARGET needs updateSources, updatePackages or updateKernelCommand (mutable OS) "+
				"or targetOsId (immutable OS)")
		}
	}
	return c.err
}

func validateOSUpdateRun(r *OSUpdateRun) error {
	var c v
	c.self(KindOSUpdateRun, &r.Meta)
	c.str("name", r.Name, 40, reRunText)
	c.str("description", r.Description, 200, reRunText)
	c.required("instance", r.InstanceID)
	c.id(KindInstance, "instance", r.InstanceID)
	c.id(KindOSUpdatePolicy, "appliedPolicy", r.AppliedPolicyID)
	c.id(KindHost, "host", r.HostID)
	c.str("status", r.Status, maxStatusLen, nil)
	c.str("statusDetails", r.StatusDetails, MaxRunStatusDetails, nil)
	c.add(checkEnum("statusIndicator", r.StatusIndicator))
	if r.EndTime != 0 && r.EndTime < r.StartTime {
		c.fail("endTime", "%d is before startTime %d", r.EndTime, r.StartTime)
	}
	return c.err
}
