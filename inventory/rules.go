package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// Default status texts, as the original shows them before a manager has
// reported anything. Their indicators stay STATUS_INDICATION_UNSPECIFIED:
// nothing is known yet.
const (
	StatusNotConnected     = "Not Connected"
	StatusUnknown          = "Unknown"
	StatusNotInstalled     = "Not Installed"
	StatusNotProvisioned   = "Not Provisioned"
	StatusNoCurrentUpdate  = "No Current Update"
	StatusRunning          = "Running"
	statusIndicatorDefault = eim.StatusUnspecified
)

// applyDefaults sets what a new resource of the API gets from the
// inventory rather than from its creator.
func (s *Service) applyDefaults(r eim.Resource) error {
	switch r := r.(type) {
	case *eim.Host:
		if r.UUID == "" {
			return eim.Errorf(eim.EINVALID, "uuid: is required to create a host (serialNumber is read-only here; register a host to identify it by serial number)")
		}
		if err := checkUUIDIdentifies(r.UUID); err != nil {
			return err
		}
		r.DesiredState = eim.HostStateOnboarded
		hostDefaults(r)
	case *eim.Instance:
		instanceDefaults(r)
	}
	return nil
}

// noneRefs drops the empty entries of a list of references, which mean
// "none" as an empty single reference does: a client that reuses one
// request object may send customConfigID [""] for no custom config, which
// the original took.
func noneRefs(r eim.Resource) {
	in, ok := r.(*eim.Instance)
	if !ok || !slices.Contains(in.CustomConfigIDs, "") {
		return
	}
	ids := make([]string, 0, len(in.CustomConfigIDs))
	for _, id := range in.CustomConfigIDs {
		if id != "" {
			ids = append(ids, id)
		}
	}
	in.CustomConfigIDs = ids
}

func hostDefaults(h *eim.Host) {
	if h.DesiredPowerState == "" || h.DesiredPowerState == eim.PowerStateUnspecified {
		h.DesiredPowerState = eim.PowerStateOn
	}
	if h.PowerCommandPolicy == "" || h.PowerCommandPolicy == eim.PowerCommandPolicyUnspecified {
		h.PowerCommandPolicy = eim.PowerCommandPolicyOrdered
	}
	h.CurrentState = eim.HostStateUnspecified
	h.HostStatus, h.HostStatusIndicator = StatusNotConnected, statusIndicatorDefault
	h.OnboardingStatus, h.OnboardingStatusIndicator = StatusNotConnected, statusIndicatorDefault
	h.RegistrationStatus, h.RegistrationStatusIndicator = StatusUnknown, statusIndicatorDefault
}

func instanceDefaults(in *eim.Instance) {
	in.DesiredState = eim.InstanceStateRunning
	in.CurrentState = eim.InstanceStateUnspecified
	in.InstanceStatus, in.InstanceStatusIndicator = StatusNotInstalled, statusIndicatorDefault
	in.ProvisioningStatus, in.ProvisioningStatusIndicator = StatusNotProvisioned, statusIndicatorDefault
	in.UpdateStatus, in.UpdateStatusIndicator = StatusNoCurrentUpdate, statusIndicatorDefault
}

// checkUpdate enforces what the API may not change on an existing resource.
// An empty value for an immutable reference means "unchanged", so a PUT
// that omits it keeps it.
func (s *Service) checkUpdate(old, nr eim.Resource, mask []string) error {
	switch o := old.(type) {
	case *eim.Host:
		n := nr.(*eim.Host)
		if n.UUID == "" {
			n.UUID = o.UUID
		}
		if o.UUID != "" && !strings.EqualFold(n.UUID, o.UUID) {
			return eim.Errorf(eim.EINVALID, "uuid: cannot be changed (host %s has uuid %s)", o.ResourceID, o.UUID)
		}
		if o.UUID != "" {
			n.UUID = o.UUID // the same in another case: kept as first written
		}
		if o.UUID == "" {
			if err := checkUUIDIdentifies(n.UUID); err != nil {
				return err
			}
		}
	case *eim.Instance:
		n := nr.(*eim.Instance)
		if n.HostID == "" {
			n.HostID = o.HostID
		}
		if n.OSID == "" {
			n.OSID = o.OSID
		}
		if n.HostID != o.HostID {
			return eim.Errorf(eim.EINVALID, "hostID: cannot be changed (instance %s is on host %s)", o.ResourceID, o.HostID)
		}
		if n.OSID != o.OSID {
			return eim.Errorf(eim.EINVALID, "osID: cannot be changed once set (instance %s has OS %s)", o.ResourceID, o.OSID)
		}
		if provisioningStarted(o) {
			if n.LocalAccountID != o.LocalAccountID {
				return eim.Errorf(eim.EPRECONDITION, "localAccountID: cannot be changed once provisioning of instance %s has started", o.ResourceID)
			}
			if !slices.Equal(n.CustomConfigIDs, o.CustomConfigIDs) {
				return eim.Errorf(eim.EPRECONDITION, "customConfigID: cannot be changed once provisioning of instance %s has started", o.ResourceID)
			}
		}
	}
	return nil
}

// provisioningStarted reports whether a manager began installing the
// instance; its account and cloud-init configs are then baked in.
func provisioningStarted(in *eim.Instance) bool {
	return (in.ProvisioningStatusIndicator != "" && in.ProvisioningStatusIndicator != eim.StatusUnspecified) ||
		in.CurrentState == eim.InstanceStateRunning
}

// checkRefs checks, inside the write transaction, that the resources nr
// refers to exist in the project and that the kind's structural rules hold.
// old is nil on create; unchanged references are not looked up again.
func (s *Service) checkRefs(ctx context.Context, tx eim.Tx, old, nr eim.Resource) error {
	changed := func(oldID, newID string) bool {
		return newID != "" && (old == nil || oldID != newID)
	}
	switch n := nr.(type) {
	case *eim.Region:
		var oldParent string
		if old != nil {
			oldParent = old.(*eim.Region).ParentID
		}
		if changed(oldParent, n.ParentID) {
			return checkRegionParent(ctx, tx, n, old == nil)
		}
	case *eim.Site:
		var o string
		if old != nil {
			o = old.(*eim.Site).RegionID
		}
		if changed(o, n.RegionID) {
			_, err := exists(ctx, tx, eim.KindRegion, "regionId", n.RegionID)
			return err
		}
	case *eim.Host:
		var o string
		if old != nil {
			o = old.(*eim.Host).SiteID
		}
		if changed(o, n.SiteID) {
			_, err := exists(ctx, tx, eim.KindSite, "siteId", n.SiteID)
			return err
		}
	case *eim.Instance:
		return s.checkInstanceRefs(ctx, tx, old, n)
	case *eim.SingleSchedule:
		var o [3]string
		if old != nil {
			os := old.(*eim.SingleSchedule)
			o = [3]string{os.TargetHostID, os.TargetSiteID, os.TargetRegionID}
		}
		return checkTargets(ctx, tx, o, [3]string{n.TargetHostID, n.TargetSiteID, n.TargetRegionID})
	case *eim.RepeatedSchedule:
		var o [3]string
		if old != nil {
			os := old.(*eim.RepeatedSchedule)
			o = [3]string{os.TargetHostID, os.TargetSiteID, os.TargetRegionID}
		}
		return checkTargets(ctx, tx, o, [3]string{n.TargetHostID, n.TargetSiteID, n.TargetRegionID})
	case *eim.TelemetryProfile:
		var o *eim.TelemetryProfile
		if old != nil {
			o = old.(*eim.TelemetryProfile)
		}
		return checkProfileRefs(ctx, tx, o, n)
	case *eim.OSUpdatePolicy:
		return checkPolicyRefs(ctx, tx, n)
	case *eim.WorkloadMember:
		return checkMemberRefs(ctx, tx, n)
	}
	return nil
}

// checkMemberRefs checks a new workload member: its workload and instance
// exist, the instance is not being deleted and is in no other workload
// (the unique index says so too, but without naming the membership).
func checkMemberRefs(ctx context.Context, tx eim.Tx, m *eim.WorkloadMember) error {
	if _, err := exists(ctx, tx, eim.KindWorkload, "workloadId", m.WorkloadID); err != nil {
		return err
	}
	r, err := exists(ctx, tx, eim.KindInstance, "instanceId", m.InstanceID)
	if err != nil {
		return err
	}
	if in := r.(*eim.Instance); in.DesiredState == eim.InstanceStateDeleted {
		return eim.Errorf(eim.EPRECONDITION, "instanceId: instance %s is being deleted", in.ResourceID)
	}
	items, _, err := tx.List(ctx, eim.KindWorkloadMember, eim.Query{Where: []eim.Cond{{Field: "instanceId", Value: m.InstanceID}}, Limit: 1, NoTotal: true})
	if err != nil {
		return fmt.Errorf("find memberships of %s: %w", m.InstanceID, err)
	}
	if len(items) > 0 {
		o := items[0].(*eim.WorkloadMember)
		return eim.Errorf(eim.ECONFLICT, "instanceId: instance %s is already a member of workload %s (%s)", m.InstanceID, o.WorkloadID, o.ResourceID)
	}
	return nil
}

// checkProfileRefs checks a telemetry profile's target and group: they
// exist, the instance is not being deleted, and the group is of the
// profile's variant (a logs profile cannot turn on a metrics group).
func checkProfileRefs(ctx context.Context, tx eim.Tx, old, n *eim.TelemetryProfile) error {
	var o eim.TelemetryProfile
	if old != nil {
		o = *old
	}
	for _, t := range []struct {
		k        eim.Kind
		field    string
		was, now string
	}{
		{eim.KindInstance, "targetInstance", o.TargetInstance, n.TargetInstance},
		{eim.KindSite, "targetSite", o.TargetSite, n.TargetSite},
		{eim.KindRegion, "targetRegion", o.TargetRegion, n.TargetRegion},
	} {
		if t.now == "" || t.now == t.was {
			continue
		}
		r, err := exists(ctx, tx, t.k, t.field, t.now)
		if err != nil {
			return err
		}
		if in, ok := r.(*eim.Instance); ok && in.DesiredState == eim.InstanceStateDeleted {
			return eim.Errorf(eim.EPRECONDITION, "targetInstance: instance %s is being deleted", in.ResourceID)
		}
	}
	field := "logsGroupId"
	if n.Type == eim.TelemetryMetrics {
		field = "metricsGroupId"
	}
	if id := n.GroupID(); id != "" && id != o.GroupID() {
		r, err := exists(ctx, tx, eim.KindTelemetryGroup, field, id)
		if err != nil {
			return err
		}
		if g := r.(*eim.TelemetryGroup); g.Type != n.Type {
			want, _ := eim.VariantNamed(eim.KindTelemetryGroup, string(n.Type))
			got, _ := eim.VariantNamed(eim.KindTelemetryGroup, string(g.Type))
			return eim.Errorf(eim.EINVALID, "%s: %s is a %s, not a %s", field, id, got.Noun, want.Noun)
		}
	}
	return nil
}

func checkTargets(ctx context.Context, tx eim.Tx, old, nw [3]string) error {
	kinds := [3]eim.Kind{eim.KindHost, eim.KindSite, eim.KindRegion}
	fields := [3]string{"targetHostId", "targetSiteId", "targetRegionId"}
	for i := range nw {
		if nw[i] == "" || nw[i] == old[i] {
			continue
		}
		r, err := exists(ctx, tx, kinds[i], fields[i], nw[i])
		if err != nil {
			return err
		}
		if h, ok := r.(*eim.Host); ok && h.DesiredState == eim.HostStateDeleted {
			return eim.Errorf(eim.EPRECONDITION, "targetHostId: host %s is being deleted", h.ResourceID)
		}
	}
	return nil
}

func (s *Service) checkInstanceRefs(ctx context.Context, tx eim.Tx, old eim.Resource, n *eim.Instance) error {
	var o *eim.Instance
	if old != nil {
		o = old.(*eim.Instance)
	}
	if o == nil {
		hr, err := exists(ctx, tx, eim.KindHost, "hostID", n.HostID)
		if err != nil {
			return err
		}
		h := hr.(*eim.Host)
		switch h.DesiredState {
		case eim.HostStateDeleted:
			return eim.Errorf(eim.EPRECONDITION, "hostID: host %s is being deleted", h.ResourceID)
		case eim.HostStateUntrusted:
			return eim.Errorf(eim.EPRECONDITION, "hostID: host %s is invalidated (untrusted)", h.ResourceID)
		}
		inst, err := instanceOf(ctx, tx, n.HostID)
		if err != nil {
			return err
		}
		if inst != nil {
			return eim.Errorf(eim.ECONFLICT, "hostID: host %s already has instance %s (one instance per host)", n.HostID, inst.ResourceID)
		}
		if _, err := exists(ctx, tx, eim.KindOS, "osID", n.OSID); err != nil {
			return err
		}
	}
	if n.OSUpdatePolicyID != "" && (o == nil || o.OSUpdatePolicyID != n.OSUpdatePolicyID) {
		if _, err := exists(ctx, tx, eim.KindOSUpdatePolicy, "osUpdatePolicyID", n.OSUpdatePolicyID); err != nil {
			return err
		}
	}
	if n.LocalAccountID != "" && (o == nil || o.LocalAccountID != n.LocalAccountID) {
		if _, err := exists(ctx, tx, eim.KindLocalAccount, "localAccountID", n.LocalAccountID); err != nil {
			return err
		}
	}
	if len(n.CustomConfigIDs) > 0 && (o == nil || !slices.Equal(o.CustomConfigIDs, n.CustomConfigIDs)) {
		found, err := tx.GetMany(ctx, eim.KindCustomConfig, n.CustomConfigIDs)
		if err != nil {
			return fmt.Errorf("load custom configs: %w", err)
		}
		have := map[string]bool{}
		for _, r := range found {
			have[r.Base().ResourceID] = true
		}
		for i, id := range n.CustomConfigIDs {
			if !have[id] {
				return eim.Errorf(eim.ENOTFOUND, "customConfigID[%d]: %s not found", i, id)
			}
		}
	}
	return nil
}

// Desired-state transitions the API may cause. A host's are keyed on its
// CURRENT state, as the original's: from current UNSPECIFIED (a host not
// onboarded yet) any desired state is allowed, so a registration may be
// switched between REGISTERED and ONBOARDED until the node shows up. An
// instance's are keyed on its desired state. A state may always stay the
// same (a repeated request is a no-op).
var (
	hostTransitions = map[eim.HostState][]eim.HostState{
		eim.HostStateRegistered: {eim.HostStateRegistered, eim.HostStateOnboarded, eim.HostStateDeleted},
		eim.HostStateOnboarded:  {eim.HostStateOnboarded, eim.HostStateUntrusted, eim.HostStateDeleted},
		eim.HostStateUntrusted:  {eim.HostStateUntrusted, eim.HostStateDeleted},
		eim.HostStateDeleted:    {eim.HostStateDeleted},
	}
	instanceTransitions = map[eim.InstanceState][]eim.InstanceState{
		eim.InstanceStateRunning:   {eim.InstanceStateUntrusted, eim.InstanceStateDeleted},
		eim.InstanceStateUntrusted: {eim.InstanceStateDeleted},
		eim.InstanceStateDeleted:   {},
	}
)

// checkHostTransition allows a host's desired state to become to. Besides
// the original's table, a host whose desired state is DELETED stays so: its
// delete is under way and cannot be called back.
func checkHostTransition(h *eim.Host, to eim.HostState) error {
	if h.DesiredState == to {
		return nil
	}
	if h.DesiredState == eim.HostStateDeleted {
		return eim.Errorf(eim.EPRECONDITION, "desiredState: host %s is being deleted; it cannot go to %s", h.ResourceID, to)
	}
	next, ok := hostTransitions[h.CurrentState]
	if !ok || slices.Contains(next, to) {
		return nil
	}
	return eim.Errorf(eim.EPRECONDITION, "desiredState: host %s cannot go from current state %s to %s", h.ResourceID, h.CurrentState, to)
}

func checkInstanceTransition(in *eim.Instance, to eim.InstanceState) error {
	next, ok := instanceTransitions[in.DesiredState]
	if !ok || in.DesiredState == to || slices.Contains(next, to) {
		return nil
	}
	return eim.Errorf(eim.EPRECONDITION, "desiredState: instance %s cannot go from %s to %s", in.ResourceID, in.DesiredState, to)
}

// setInstanceState moves an instance's desired state, if allowed.
func (s *Service) setInstanceState(ctx context.Context, tx eim.Tx, in *eim.Instance, to eim.InstanceState) error {
	if err := checkInstanceTransition(in, to); err != nil {
		return err
	}
	if in.DesiredState == to {
		return nil
	}
	w := &eim.Instance{Meta: eim.Meta{ResourceID: in.ResourceID}, DesiredState: to}
	if err := tx.UpdateFieldsIf(ctx, w, []eim.Cond{{Field: "desiredState", Value: in.DesiredState}}, "desiredState"); err != nil {
		return err
	}
	in.DesiredState = to
	stamp(in, w)
	return nil
}

// deleteHost is phase one of a host's delete, or the whole of it for a host
// with nothing to clean up. A host with an instance is
// accepted, as in the original, and its instance is deleted with it (its
// own two-phase delete, set first so that the managers see it first): the
// original waited for the instance to be deleted by someone else, which
// left hosts stuck in "Deleting".
func (s *Service) deleteHost(ctx context.Context, tx eim.Tx, h *eim.Host) error {
	if h.DesiredState == eim.HostStateDeleted {
		return nil
	}
	if err := checkHostTransition(h, eim.HostStateDeleted); err != nil {
		return err
	}
	inst, err := instanceOf(ctx, tx, h.ResourceID)
	if err != nil {
		return err
	}
	if inst != nil {
		if err := s.setInstanceState(ctx, tx, inst, eim.InstanceStateDeleted); err != nil {
			return err
		}
	} else if nothingToCleanUp(h) {
		// No manager has anything to undo: removed at once, so that its
		// UUID may be registered again right away.
		return s.removeHost(ctx, tx, h)
	}
	nh := clone(h)
	nh.DesiredState = eim.HostStateDeleted
	return writeDesired(ctx, tx, h, nh, "desiredState")
}

// nothingToCleanUp reports whether a host (without an instance) has never
// had node credentials nor been onboarded: its delete needs no manager.
func nothingToCleanUp(h *eim.Host) bool {
	return h.NodeSecretHash == "" && h.NodeCredGen == 0 &&
		(h.CurrentState == eim.HostStateUnspecified || h.CurrentState == eim.HostStateRegistered || h.CurrentState == "")
}

// blocker is one kind of dependant that keeps a resource from being deleted.
type blocker struct {
	what   string // "sites"
	k      eim.Kind
	where  []eim.Cond
	filter string // for references without a wire name (a run's policy)
}

// checkUnused refuses to delete a resource that others still refer to, with
// EPRECONDITION naming them (up to a few IDs per kind).
func checkUnused(ctx context.Context, tx eim.Tx, r eim.Resource) error {
	id := r.Base().ResourceID
	is := func(field string) []eim.Cond { return []eim.Cond{{Field: field, Value: id}} }
	var bs []blocker
	schedules := func(field string) []blocker {
		return []blocker{
			{"single schedules", eim.KindSingleSchedule, is(field), ""},
			{"repeated schedules", eim.KindRepeatedSchedule, is(field), ""},
		}
	}
	profiles := func(field string) blocker {
		return blocker{"telemetry profiles", eim.KindTelemetryProfile, is(field), ""}
	}
	switch r.(type) {
	case *eim.Region:
		bs = append([]blocker{{"child regions", eim.KindRegion, is("parentId"), ""}, {"sites", eim.KindSite, is("regionId"), ""}}, schedules("targetRegionId")...)
		bs = append(bs, profiles("targetRegion"))
	case *eim.Site:
		bs = append([]blocker{{"hosts", eim.KindHost, is("siteId"), ""}}, schedules("targetSiteId")...)
		bs = append(bs, profiles("targetSite"))
	case *eim.TelemetryGroup:
		bs = []blocker{profiles("logsGroupId"), profiles("metricsGroupId")}
	case *eim.OS:
		bs = []blocker{{"instances", eim.KindInstance, is("osID"), ""}, {"OS update policies", eim.KindOSUpdatePolicy, is("targetOsId"), ""}}
	case *eim.OSUpdatePolicy:
		bs = []blocker{{"instances", eim.KindInstance, is("osUpdatePolicyID"), ""},
			{"OS update runs", eim.KindOSUpdateRun, nil, `appliedPolicy.resourceId="` + id + `"`}}
	case *eim.Provider:
		bs = []blocker{{"hosts", eim.KindHost, is("providerId"), ""}}
	case *eim.LocalAccount:
		bs = []blocker{{"instances", eim.KindInstance, is("localAccountID"), ""}}
	case *eim.Workload:
		bs = []blocker{{"workload members", eim.KindWorkloadMember, is("workloadId"), ""}}
	case *eim.CustomConfig:
		return checkConfigUnused(ctx, tx, id)
	}
	var parts []string
	for _, b := range bs {
		items, total, err := tx.List(ctx, b.k, eim.Query{Where: b.where, Filter: b.filter, Limit: 3})
		if err != nil {
			return fmt.Errorf("find %s: %w", b.what, err)
		}
		if total > 0 {
			parts = append(parts, describe(b.what, items, total))
		}
	}
	if len(parts) > 0 {
		return eim.Errorf(eim.EPRECONDITION, "%s %s is in use by %s", nounOf(r), id, strings.Join(parts, "; "))
	}
	return nil
}

// nounOf names r's type in messages: its variant's noun, or its kind's.
func nounOf(r eim.Resource) string {
	if v, ok := eim.VariantNamed(r.ResourceKind(), eim.SchemaOf(r.ResourceKind()).VariantOf(r)); ok {
		return v.Noun
	}
	return kindNoun(r.ResourceKind())
}

// checkConfigUnused scans the project's instances: the custom config IDs
// of an instance are a list, which exact-match conditions cannot search.
// Deleting a custom config is rare; the scan reads IDs only once.
func checkConfigUnused(ctx context.Context, tx eim.Tx, id string) error {
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{})
	if err != nil {
		return fmt.Errorf("find instances: %w", err)
	}
	var users []eim.Resource
	for _, r := range items {
		if slices.Contains(r.(*eim.Instance).CustomConfigIDs, id) {
			users = append(users, r)
		}
	}
	if len(users) > 0 {
		return eim.Errorf(eim.EPRECONDITION, "custom config %s is in use by %s", id, describe("instances", users[:min(3, len(users))], len(users)))
	}
	return nil
}

func describe(what string, items []eim.Resource, total int) string {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Base().ResourceID
	}
	s := fmt.Sprintf("%d %s (%s", total, what, strings.Join(names, ", "))
	if total > len(items) {
		s += ", …"
	}
	return s + ")"
}

func kindNoun(k eim.Kind) string {
	switch k {
	case eim.KindOS:
		return "OS"
	case eim.KindLocalAccount:
		return "local account"
	case eim.KindCustomConfig:
		return "custom config"
	case eim.KindInstance:
		return "instance"
	case eim.KindSingleSchedule:
		return "single schedule"
	case eim.KindRepeatedSchedule:
		return "repeated schedule"
	case eim.KindOSUpdatePolicy:
		return "OS update policy"
	case eim.KindOSUpdateRun:
		return "OS update run"
	case eim.KindWorkloadMember:
		return "workload member"
	}
	return string(k)
}
