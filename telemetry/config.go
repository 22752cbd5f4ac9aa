package telemetry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/eimhq/eim"
)

// Config is a node's effective telemetry configuration: each group that a
// profile reaching the node turns on, once, sorted by group ID.
type Config struct {
	Metrics []MetricsGroup `json:"metrics"`
	Logs    []LogsGroup    `json:"logs"`
}

// MetricsGroup is a metrics group at the shortest interval among the
// profiles that reach the node.
type MetricsGroup struct {
	GroupID         string                     `json:"groupId"`
	Name            string                     `json:"name"`
	CollectorKind   eim.TelemetryCollectorKind `json:"collectorKind"`
	Inputs          []string                   `json:"inputs"`
	IntervalSeconds uint32                     `json:"intervalSeconds"`
}

// LogsGroup is a logs group at the most verbose level among the profiles
// that reach the node.
type LogsGroup struct {
	GroupID       string                     `json:"groupId"`
	Name          string                     `json:"name"`
	CollectorKind eim.TelemetryCollectorKind `json:"collectorKind"`
	Inputs        []string                   `json:"inputs"`
	Level         eim.SeverityLevel          `json:"level"`
}

// Merge returns what the profiles turn on together: per metrics group the
// shortest interval, per logs group the most verbose level. A profile whose
// group is not in groups, or is of the other type, is skipped.
func Merge(profiles []*eim.TelemetryProfile, groups map[string]*eim.TelemetryGroup) Config {
	metrics := map[string]*MetricsGroup{}
	logs := map[string]*LogsGroup{}
	for _, p := range profiles {
		g := groups[p.GroupID()]
		if g == nil || g.Type != p.Type {
			continue
		}
		switch p.Type {
		case eim.TelemetryMetrics:
			if m := metrics[g.ResourceID]; m != nil {
				m.IntervalSeconds = min(m.IntervalSeconds, p.MetricsInterval)
				continue
			}
			metrics[g.ResourceID] = &MetricsGroup{GroupID: g.ResourceID, Name: g.Name, CollectorKind: g.CollectorKind,
				Inputs: slices.Clone(g.Groups), IntervalSeconds: p.MetricsInterval}
		case eim.TelemetryLogs:
			if l := logs[g.ResourceID]; l != nil {
				if p.LogLevel.Verbosity() > l.Level.Verbosity() {
					l.Level = p.LogLevel
				}
				continue
			}
			logs[g.ResourceID] = &LogsGroup{GroupID: g.ResourceID, Name: g.Name, CollectorKind: g.CollectorKind,
				Inputs: slices.Clone(g.Groups), Level: p.LogLevel}
		}
	}
	c := Config{Metrics: []MetricsGroup{}, Logs: []LogsGroup{}}
	for _, m := range metrics {
		c.Metrics = append(c.Metrics, *m)
	}
	for _, l := range logs {
		c.Logs = append(c.Logs, *l)
	}
	slices.SortFunc(c.Metrics, func(a, b MetricsGroup) int { return cmp.Compare(a.GroupID, b.GroupID) })
	slices.SortFunc(c.Logs, func(a, b LogsGroup) int { return cmp.Compare(a.GroupID, b.GroupID) })
	return c
}

// Version names c: a digest of its content, so equal configurations have
// equal versions and a node that has the version has the configuration.
func (c Config) Version() string {
	b, err := json.Marshal(c) // fields in declaration order, lists sorted: canonical
	if err != nil {
		panic(fmt.Sprintf("telemetry: encode config: %v", err)) // plain strings and numbers
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Tree is what the configurations of one project's nodes are computed
// from: its telemetry profiles and groups, and the location tree.
type Tree struct {
	groups       map[string]*eim.TelemetryGroup
	byTarget     map[string][]*eim.TelemetryProfile // instance, site or region ID → the profiles targeting it
	hostInstance map[string]string                  // host ID → its instance, for instances profiles target
	siteRegion   map[string]string
	regionParent map[string]string

	// memos holds one memo of each configuration version made from this
	// tree: the hosts that get the same configuration (every host of a
	// site, most often) share it on the host view instead of a copy
	// each.
	mu    sync.Mutex
	memos map[string]*memo
}

// NewTree indexes a project's telemetry profiles and groups, its sites and
// regions, and the instances the profiles target.
func NewTree(profiles []*eim.TelemetryProfile, groups []*eim.TelemetryGroup, sites []*eim.Site, regions []*eim.Region, instances []*eim.Instance) *Tree {
	t := &Tree{
		groups: map[string]*eim.TelemetryGroup{}, byTarget: map[string][]*eim.TelemetryProfile{},
		hostInstance: map[string]string{}, siteRegion: map[string]string{}, regionParent: map[string]string{},
	}
	for _, g := range groups {
		t.groups[g.ResourceID] = g
	}
	for _, p := range profiles {
		if target := p.Target(); target != "" {
			t.byTarget[target] = append(t.byTarget[target], p)
		}
	}
	for _, s := range sites {
		t.siteRegion[s.ResourceID] = s.RegionID
	}
	for _, r := range regions {
		t.regionParent[r.ResourceID] = r.ParentID
	}
	for _, in := range instances {
		t.hostInstance[in.HostID] = in.ResourceID
	}
	return t
}

// Node is where a node is: its host and the host's site ("" for none).
type Node struct {
	HostID, SiteID string
}

// Reaching returns the profiles that reach node n: those targeting its
// host's instance, its site, and the site's region and that region's
// ancestors.
func (t *Tree) Reaching(n Node) []*eim.TelemetryProfile {
	var out []*eim.TelemetryProfile
	if inst := t.hostInstance[n.HostID]; inst != "" {
		out = append(out, t.byTarget[inst]...)
	}
	if n.SiteID == "" {
		return out
	}
	out = append(out, t.byTarget[n.SiteID]...)
	region := t.siteRegion[n.SiteID]
	// Regions nest at most eim.MaxRegionDepth deep; the bound also stops a
	// cycle, which the inventory never lets happen.
	for depth := 0; region != "" && depth <= eim.MaxRegionDepth; depth++ {
		out = append(out, t.byTarget[region]...)
		region = t.regionParent[region]
	}
	return out
}

// Effective returns node n's effective configuration.
func (t *Tree) Effective(n Node) Config { return Merge(t.Reaching(n), t.groups) }

// shared returns the tree's memo of cfg (version v, the tree at
// generation gen), made on the first call for v: read only from then on.
func (t *Tree) shared(cfg Config, v string, gen uint64) *memo {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.memos[v]; ok {
		return m
	}
	if t.memos == nil {
		t.memos = map[string]*memo{}
	}
	m := &memo{treeGen: gen, cfg: cfg, version: v}
	t.memos[v] = m
	return m
}

// LoadTree reads a project's tree in tx (a transaction of the project):
// every telemetry profile and group, site and region, and the instances
// the profiles target.
func LoadTree(ctx context.Context, tx eim.Tx) (*Tree, error) {
	profiles, err := listAll[*eim.TelemetryProfile](ctx, tx, eim.KindTelemetryProfile)
	if err != nil {
		return nil, err
	}
	groups, err := listAll[*eim.TelemetryGroup](ctx, tx, eim.KindTelemetryGroup)
	if err != nil {
		return nil, err
	}
	sites, err := listAll[*eim.Site](ctx, tx, eim.KindSite)
	if err != nil {
		return nil, err
	}
	regions, err := listAll[*eim.Region](ctx, tx, eim.KindRegion)
	if err != nil {
		return nil, err
	}
	var instIDs []string
	for _, p := range profiles {
		if p.TargetInstance != "" {
			instIDs = append(instIDs, p.TargetInstance)
		}
	}
	var instances []*eim.Instance
	if len(instIDs) > 0 {
		slices.Sort(instIDs)
		rs, err := tx.GetMany(ctx, eim.KindInstance, slices.Compact(instIDs))
		if err != nil {
			return nil, fmt.Errorf("load instances: %w", err)
		}
		for _, r := range rs {
			instances = append(instances, r.(*eim.Instance))
		}
	}
	return NewTree(profiles, groups, sites, regions, instances), nil
}

func listAll[T eim.Resource](ctx context.Context, tx eim.Tx, k eim.Kind) ([]T, error) {
	items, _, err := tx.List(ctx, k, eim.Query{NoTotal: true})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", k, err)
	}
	out := make([]T, len(items))
	for i, r := range items {
		out[i] = r.(T)
	}
	return out, nil
}
