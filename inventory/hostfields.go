package inventory

import (
	"context"
	"fmt"
	"regexp"

	"github.com/eimhq/eim"
)

// The modules' writes of hosts (see status.go). h is always the host as
// the caller read it in tx, and on success holds what was written.

// SetHostStatus records a host's status (hostStatus, its indicator and
// timestamp), as the provisioning and onboarding modules do for theirs
// (the host module records its nodes' liveness and health through the
// store's typed operations, eim.HostBeats). The caller
// decided on the status h shows: the write is made only while the stored
// status is still that (another module may have set one of its own
// meanwhile; the transaction then runs again, on it).
func SetHostStatus(ctx context.Context, tx eim.Tx, h *eim.Host, st Status) error {
	if err := st.check("hostStatus"); err != nil {
		return err
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, HostStatus: st.Text, HostStatusIndicator: st.Indicator, HostStatusTimestamp: st.Timestamp}
	when := []eim.Cond{{Field: "hostStatus", Value: h.HostStatus}, {Field: "hostStatusIndicator", Value: h.HostStatusIndicator}}
	if err := tx.UpdateFieldsIf(ctx, w, when, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp"); err != nil {
		return err
	}
	h.HostStatus, h.HostStatusIndicator, h.HostStatusTimestamp = w.HostStatus, w.HostStatusIndicator, w.HostStatusTimestamp
	stamp(h, w)
	return nil
}

// hardwareFields are the fields of a host that its node's hardware
// report gives (see RecordHardware).
var hardwareFields = []string{
	"hardware_digest", "productName", "hostname", "cpuModel", "cpuArchitecture", "cpuSockets", "cpuCores", "cpuThreads",
	"cpuCapabilities", "cpuTopology", "memoryBytes", "biosVendor", "biosVersion", "biosReleaseDate",
	"hostStorages", "hostNics", "hostUsbs", "hostGpus",
}

// maxHardwareText bounds the text fields of a hardware report (the CPU's
// capabilities and topology are the long ones).
const maxHardwareText = 64 << 10

var reDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// RecordHardware records the hardware inventory a node reported: h holds
// the new report in its hardware fields (hardwareFields, as the host
// module derives them from the report, HardwareDigest naming it), and
// prevDigest is the digest h had when it was read: the write is made only
// over that report. The networking rule runs first over h's site (see
// CheckSiteAddresses): h's addresses are flagged, and the other hosts
// whose flags change are written.
func RecordHardware(ctx context.Context, tx eim.Tx, h *eim.Host, prevDigest string, now eim.Time) error {
	if err := checkHardware(h); err != nil {
		return err
	}
	if err := CheckSiteAddresses(ctx, tx, h, now); err != nil {
		return err
	}
	w := *h
	if err := tx.UpdateFieldsIf(ctx, &w, []eim.Cond{{Field: "hardware_digest", Value: prevDigest}}, hardwareFields...); err != nil {
		return err
	}
	stamp(h, &w)
	return nil
}

// checkHardware validates the hardware fields of h.
func checkHardware(h *eim.Host) error {
	if !reDigest.MatchString(h.HardwareDigest) {
		return eim.Errorf(eim.EINVALID, "hardwareDigest: %q is not sha256: and 64 lower-case hex digits", h.HardwareDigest)
	}
	for _, f := range []struct{ name, v string }{
		{"productName", h.ProductName}, {"hostname", h.Hostname}, {"cpuModel", h.CPUModel}, {"cpuArchitecture", h.CPUArchitecture},
		{"cpuCapabilities", h.CPUCapabilities}, {"cpuTopology", h.CPUTopology}, {"biosVendor", h.BiosVendor},
		{"biosVersion", h.BiosVersion}, {"biosReleaseDate", h.BiosReleaseDate},
	} {
		if err := checkText(f.name, f.v, maxHardwareText); err != nil {
			return err
		}
	}
	for i, nic := range h.HostNics {
		if nic.LinkState.Type != "" {
			if err := checkEnum(fmt.Sprintf("hostNics[%d].linkState.type", i), nic.LinkState.Type); err != nil {
				return err
			}
		}
		for j, ip := range nic.IPAddresses {
			if err := checkEnum(fmt.Sprintf("hostNics[%d].ipaddresses[%d].status", i, j), ip.Status); err != nil {
				return err
			}
			if err := checkEnum(fmt.Sprintf("hostNics[%d].ipaddresses[%d].configMethod", i, j), ip.ConfigMethod); err != nil {
				return err
			}
		}
	}
	return nil
}

// EnrollHost creates in tx, in project, the host of a device that
// enrolled itself with the project's enrollment token, as RegisterHost
// registers one (validated, with the inventory's defaults).
func EnrollHost(ctx context.Context, tx eim.Tx, project string, reg HostRegistration) (*eim.Host, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	h, err := NewRegisteredHost(reg)
	if err != nil {
		return nil, err
	}
	h.Project = project
	if err := tx.Create(ctx, h); err != nil {
		return nil, err
	}
	return h, nil
}

// RecordPower records what a host's BMC reports of its power (the oob
// module): its current power state, the power status, and, when
// powerOnTime is not zero, when it was last powered on or reset (unix
// seconds). The write is made only while the stored power state and
// status are still h's.
func RecordPower(ctx context.Context, tx eim.Tx, h *eim.Host, current eim.PowerState, st Status, powerOnTime uint64) error {
	if err := checkEnum("currentPowerState", current); err != nil {
		return err
	}
	if err := st.check("powerStatus"); err != nil {
		return err
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, CurrentPowerState: current,
		PowerStatus: st.Text, PowerStatusIndicator: st.Indicator, PowerStatusTimestamp: st.Timestamp, PowerOnTime: h.PowerOnTime}
	fields := []string{"currentPowerState", "powerStatus", "powerStatusIndicator", "powerStatusTimestamp"}
	if powerOnTime != 0 {
		w.PowerOnTime = powerOnTime
		fields = append(fields, "powerOnTime")
	}
	when := []eim.Cond{{Field: "currentPowerState", Value: h.CurrentPowerState}, {Field: "powerStatus", Value: h.PowerStatus},
		{Field: "powerStatusIndicator", Value: h.PowerStatusIndicator}}
	if err := tx.UpdateFieldsIf(ctx, w, when, fields...); err != nil {
		return err
	}
	h.CurrentPowerState, h.PowerOnTime = current, w.PowerOnTime
	h.PowerStatus, h.PowerStatusIndicator, h.PowerStatusTimestamp = w.PowerStatus, w.PowerStatusIndicator, w.PowerStatusTimestamp
	stamp(h, w)
	return nil
}

// SetDesiredPower records the power state asked of a host through its
// BMC's jobs API (the oob module, which made the job in the same call).
func SetDesiredPower(ctx context.Context, tx eim.Tx, h *eim.Host, desired eim.PowerState) error {
	if err := checkEnum("desiredPowerState", desired); err != nil {
		return err
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, DesiredPowerState: desired}
	if err := tx.UpdateFields(ctx, w, "desiredPowerState"); err != nil {
		return err
	}
	h.DesiredPowerState = desired
	stamp(h, w)
	return nil
}

// SetHostBMC records the kind and address of a host's BMC (the oob
// module, from the BMC it keeps; output-only on the API). A kind other
// than unspecified or none takes the host's power out of the host
// module's hands (see hostmgr's in-band power).
func SetHostBMC(ctx context.Context, tx eim.Tx, h *eim.Host, kind eim.BaremetalControllerKind, ip string) error {
	if err := checkEnum("bmcKind", kind); err != nil {
		return err
	}
	if err := checkText("bmcIp", ip, eim.MaxBMCAddress); err != nil {
		return err
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, BmcKind: kind, BmcIP: ip}
	if err := tx.UpdateFields(ctx, w, "bmcKind", "bmcIp"); err != nil {
		return err
	}
	h.BmcKind, h.BmcIP = kind, ip
	stamp(h, w)
	return nil
}

// RecordSecureBoot records the firmware's Secure Boot state the node of h
// reported (the provisioning module, when the node asks for its workflow;
// onboarding's Discover records it through eim.DeviceClaims) and when it was read, unix
// seconds, when SecureBootDue says so; otherwise it writes nothing.
func RecordSecureBoot(ctx context.Context, tx eim.Tx, h *eim.Host, state eim.SecureBootState, at uint64) error {
	if err := checkEnum("secureBootState", state); err != nil {
		return err
	}
	if !SecureBootDue(h, state, at) {
		return nil
	}
	w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, SecureBootState: state, SecureBootStateTimestamp: at}
	if err := tx.UpdateFields(ctx, w, "secureBootState", "secureBootStateTimestamp"); err != nil {
		return err
	}
	h.SecureBootState, h.SecureBootStateTimestamp = state, at
	stamp(h, w)
	return nil
}

// SecureBootDue reports whether a Secure Boot state read at (unix
// seconds) is to be recorded on h (eim.SecureBootDue).
func SecureBootDue(h *eim.Host, state eim.SecureBootState, at uint64) bool {
	return eim.SecureBootDue(h.SecureBootState, h.SecureBootStateTimestamp, state, at)
}

// SecureBootRefresh is how old, in seconds, the recorded time of an
// unchanged Secure Boot state gets before a new report renews it.
const SecureBootRefresh = eim.SecureBootRefresh

// AdmitHost creates in tx, in project, the host of a device approved in
// the project's enrollment lobby: registered as EnrollHost registers one,
// onboarded (the approval is the decision to let it in), at siteID (""
// none) with the approval's metadata.
func AdmitHost(ctx context.Context, tx eim.Tx, project string, reg HostRegistration, siteID string, md eim.Metadata) (*eim.Host, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	reg.AutoOnboard = true
	h, err := NewRegisteredHost(reg)
	if err != nil {
		return nil, err
	}
	if siteID != "" {
		if err := eim.CheckID(eim.KindSite, "siteId", siteID); err != nil {
			return nil, err
		}
		if _, err := tx.Get(ctx, eim.KindSite, siteID); eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, eim.Errorf(eim.EINVALID, "siteId: site %s not found in project %s", siteID, project)
		} else if err != nil {
			return nil, err
		}
	}
	if err := eim.CheckApprovalMetadata("metadata", md); err != nil {
		return nil, err
	}
	h.Project, h.SiteID, h.Metadata = project, siteID, md
	if h.Metadata == nil {
		h.Metadata = eim.Metadata{}
	}
	if err := tx.Create(ctx, h); err != nil {
		return nil, err
	}
	return h, nil
}
