package maintenance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oscatalog"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
)

// Tree is what one project's plans depend on besides each host's own
// facts: its schedules, regions, sites, update policies and OSes.
type Tree struct {
	single   []*eim.SingleSchedule
	repeated []*eim.RepeatedSchedule
	// parent maps a region to its parent region, site to its region.
	regionParent map[string]string
	siteRegion   map[string]string
	policies     map[string]*eim.OSUpdatePolicy
	oses         map[string]*eim.OS

	// plans holds one plan of each version made from this tree: the
	// hosts of a site with one OS and policy share their plan instead of
	// a copy each (100,000 of them kept on the host view).
	mu    sync.Mutex
	plans map[string]*maintenancev1.GetPlanResponse
}

// Facts are what one host's plan depends on: its site, and its
// instance's OS and update policy.
type Facts struct {
	HostID, SiteID           string
	InstanceID, OSID, Policy string
}

// LoadTree reads a project's tree.
func LoadTree(ctx context.Context, tx eim.Tx) (*Tree, error) {
	t := &Tree{regionParent: map[string]string{}, siteRegion: map[string]string{},
		policies: map[string]*eim.OSUpdatePolicy{}, oses: map[string]*eim.OS{}}
	list := func(k eim.Kind, each func(eim.Resource)) error {
		items, _, err := tx.List(ctx, k, eim.Query{NoTotal: true})
		if err != nil {
			return err
		}
		for _, r := range items {
			each(r)
		}
		return nil
	}
	steps := []struct {
		k    eim.Kind
		each func(eim.Resource)
	}{
		{eim.KindSingleSchedule, func(r eim.Resource) { t.single = append(t.single, r.(*eim.SingleSchedule)) }},
		{eim.KindRepeatedSchedule, func(r eim.Resource) { t.repeated = append(t.repeated, r.(*eim.RepeatedSchedule)) }},
		{eim.KindRegion, func(r eim.Resource) { x := r.(*eim.Region); t.regionParent[x.ResourceID] = x.ParentID }},
		{eim.KindSite, func(r eim.Resource) { x := r.(*eim.Site); t.siteRegion[x.ResourceID] = x.RegionID }},
		{eim.KindOSUpdatePolicy, func(r eim.Resource) { x := r.(*eim.OSUpdatePolicy); t.policies[x.ResourceID] = x }},
		{eim.KindOS, func(r eim.Resource) { x := r.(*eim.OS); t.oses[x.ResourceID] = x }},
	}
	for _, s := range steps {
		if err := list(s.k, s.each); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// ReadFacts reads a host's facts.
func ReadFacts(ctx context.Context, tx eim.Tx, hostID string) (Facts, error) {
	r, err := tx.Get(ctx, eim.KindHost, hostID)
	if err != nil {
		return Facts{}, err
	}
	f := Facts{HostID: hostID, SiteID: r.(*eim.Host).SiteID}
	in, err := instanceOf(ctx, tx, hostID)
	if err != nil || in == nil {
		return f, err
	}
	f.InstanceID, f.OSID, f.Policy = in.ResourceID, in.OSID, in.OSUpdatePolicyID
	return f, nil
}

// instanceOf returns the host's instance, nil when it has none.
func instanceOf(ctx context.Context, tx eim.Tx, hostID string) (*eim.Instance, error) {
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}, Limit: 1, NoTotal: true})
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0].(*eim.Instance), nil
}

// targets returns the IDs a schedule may target to apply to the host: the
// host, its site and the site's regions up to the root.
func (t *Tree) targets(f Facts) map[string]bool {
	out := map[string]bool{f.HostID: true}
	if f.SiteID == "" {
		return out
	}
	out[f.SiteID] = true
	// Regions nest at most 5 deep; the bound also stops a cycle.
	for r, n := t.siteRegion[f.SiteID], 0; r != "" && n < 16 && !out[r]; r, n = t.regionParent[r], n+1 {
		out[r] = true
	}
	return out
}

// Plan returns the host's maintenance plan and its version: the windows of
// the schedules that target the host, its site or the site's regions (the
// original honoured host targets only), and its instance's policy.
func (t *Tree) Plan(f Facts) (*maintenancev1.GetPlanResponse, string) {
	p := &maintenancev1.GetPlanResponse{}
	in := t.targets(f)
	target := func(h, s, r string) (string, bool) {
		for _, id := range []string{h, s, r} {
			if id != "" && in[id] {
				return id, true
			}
		}
		return "", false
	}
	for _, s := range t.single {
		if id, ok := target(s.TargetHostID, s.TargetSiteID, s.TargetRegionID); ok {
			p.Windows = append(p.Windows, &maintenancev1.Window{ScheduleId: s.ResourceID, Purpose: purpose(s.ScheduleStatus), TargetId: id,
				When: &maintenancev1.Window_Single{Single: &maintenancev1.Single{StartSeconds: int64(s.StartSeconds), EndSeconds: int64(s.EndSeconds)}}})
		}
	}
	for _, s := range t.repeated {
		if id, ok := target(s.TargetHostID, s.TargetSiteID, s.TargetRegionID); ok {
			p.Windows = append(p.Windows, &maintenancev1.Window{ScheduleId: s.ResourceID, Purpose: purpose(s.ScheduleStatus), TargetId: id,
				When: &maintenancev1.Window_Repeated{Repeated: &maintenancev1.Repeated{DurationSeconds: s.DurationSeconds,
					Minutes: s.CronMinutes, Hours: s.CronHours, DayOfMonth: s.CronDayMonth, Month: s.CronMonth, DayOfWeek: s.CronDayWeek}}})
		}
	}
	slices.SortFunc(p.Windows, func(a, b *maintenancev1.Window) int { return strings.Compare(a.ScheduleId, b.ScheduleId) })

	cur := t.oses[f.OSID]
	if cur != nil {
		p.CurrentOs = osProto(cur)
	}
	if pol := t.policies[f.Policy]; pol != nil {
		out := &maintenancev1.UpdatePolicy{Id: pol.ResourceID, Sources: pol.UpdateSources,
			Packages: pol.UpdatePackages, KernelCommand: pol.UpdateKernelCommand}
		switch pol.UpdatePolicy {
		case eim.UpdatePolicyLatest:
			out.Kind = maintenancev1.UpdatePolicy_KIND_LATEST
			if n := t.newest(cur); n != nil {
				out.TargetOs = osProto(n)
			}
		case eim.UpdatePolicyTarget:
			out.Kind = maintenancev1.UpdatePolicy_KIND_TARGET
			if o := t.oses[pol.TargetOsID]; o != nil {
				out.TargetOs = osProto(o)
			}
		}
		p.Policy = out
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	sum := sha256.Sum256(b)
	v := hex.EncodeToString(sum[:16])
	t.mu.Lock()
	defer t.mu.Unlock()
	if same, ok := t.plans[v]; ok {
		return same, same.Version // read only from here on, as every plan
	}
	if t.plans == nil {
		t.plans = map[string]*maintenancev1.GetPlanResponse{}
	}
	p.Version = v
	t.plans[v] = p
	return p, v
}

// newest returns the newest OS of cur's profile (by image version), cur
// when there is none newer, nil without cur.
func (t *Tree) newest(cur *eim.OS) *eim.OS {
	if cur == nil || cur.ProfileName == "" {
		return cur
	}
	best := cur
	for _, o := range t.oses {
		if o.ProfileName == cur.ProfileName && o.OsType == cur.OsType && o.Architecture == cur.Architecture &&
			oscatalog.CompareVersions(o.ImageID, best.ImageID) > 0 {
			best = o
		}
	}
	return best
}

func purpose(s eim.ScheduleStatus) maintenancev1.Window_Purpose {
	switch s {
	case "SCHEDULE_STATUS_MAINTENANCE":
		return maintenancev1.Window_PURPOSE_MAINTENANCE
	case "SCHEDULE_STATUS_OS_UPDATE":
		return maintenancev1.Window_PURPOSE_OS_UPDATE
	}
	return maintenancev1.Window_PURPOSE_UNSPECIFIED
}

func osProto(o *eim.OS) *maintenancev1.OperatingSystem {
	out := &maintenancev1.OperatingSystem{Id: o.ResourceID, Name: o.Name, ProfileName: o.ProfileName,
		Version: o.ImageID, ImageUrl: o.ImageURL, ImageSha256: strings.ToLower(o.Sha256)}
	switch o.OsType {
	case "OS_TYPE_MUTABLE":
		out.Type = maintenancev1.OperatingSystem_TYPE_MUTABLE
	case "OS_TYPE_IMMUTABLE":
		out.Type = maintenancev1.OperatingSystem_TYPE_IMMUTABLE
	}
	return out
}
