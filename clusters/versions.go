package clusters

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// Versions keeps every cluster node's plan version in memory, by host,
// for the heartbeats' answers (hostmgr.Clusters): a heartbeat costs a map
// read, however many nodes. It follows the change feed (every process
// that answers heartbeats runs it): a cluster's change reads that cluster
// again, one statement. While the feed is not followed it answers ""
// ("no plan offered": a node does nothing about it), never a stale
// version.
type Versions struct {
	feed *feed.Runner
	log  *slog.Logger

	mu      sync.RWMutex
	byHost  map[string]string   // project/host → version
	ofClust map[string][]string // project/cluster ID → its hosts' keys
	store   eim.Store
}

func newVersions(store eim.Store, log *slog.Logger, reg prometheus.Registerer, retry time.Duration) *Versions {
	v := &Versions{store: store, log: log, byHost: map[string]string{}, ofClust: map[string][]string{}}
	v.feed = feed.New(feed.Options{Store: store, Name: "cluster versions", Logger: log, Metrics: reg, MinWait: retry,
		Kinds: []eim.Kind{eim.KindCluster, eim.KindProject},
		Reset: v.reset,
		Handle: func(ctx context.Context, evs []eim.Event) error {
			seen := map[string]bool{}
			for _, ev := range evs {
				if ev.Kind == eim.KindProject {
					if ev.Op == eim.OpDeleted {
						v.forgetProject(ev.Project)
					}
					continue
				}
				k := ev.Project + "/" + ev.ID
				if seen[k] {
					continue
				}
				seen[k] = true
				c, err := store.FindCluster(ctx, ev.Project, ev.ID)
				switch {
				case eim.ErrorCode(err) == eim.ENOTFOUND:
					v.set(ev.Project, ev.ID, nil)
				case err != nil:
					return err
				default:
					v.set(ev.Project, ev.ID, c)
				}
			}
			return nil
		},
		Relist: v.load,
	})
	return v
}

// Run follows the feed until ctx ends.
func (v *Versions) Run(ctx context.Context) error { return v.feed.Run(ctx) }

// Live reports whether the cache is followed.
func (v *Versions) Live() bool { return v.feed.Live() }

// Version returns the version of the host's plan, "" when the host is in
// no cluster or the cache is not live.
func (v *Versions) Version(project, hostID string) string {
	if !v.feed.Live() {
		return ""
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.byHost[project+"/"+hostID]
}

func (v *Versions) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.byHost)
	clear(v.ofClust)
}

// load reads every cluster: at the start of the feed and at re-lists.
func (v *Versions) load(ctx context.Context) error {
	cs, err := v.store.ListClusters(ctx, "")
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.byHost)
	clear(v.ofClust)
	for _, c := range cs {
		v.setLocked(c.Project, c.ID, c)
	}
	return nil
}

func (v *Versions) set(project, id string, c *eim.Cluster) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setLocked(project, id, c)
}

func (v *Versions) setLocked(project, id string, c *eim.Cluster) {
	ck := project + "/" + id
	for _, hk := range v.ofClust[ck] {
		delete(v.byHost, hk)
	}
	delete(v.ofClust, ck)
	if c == nil {
		return
	}
	keys := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		if ver := n.Plan.Version(c.ID); ver != "" {
			hk := project + "/" + n.HostID
			v.byHost[hk] = ver
			keys = append(keys, hk)
		}
	}
	v.ofClust[ck] = keys
}

func (v *Versions) forgetProject(project string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for ck, hks := range v.ofClust {
		if len(ck) > len(project) && ck[:len(project)+1] == project+"/" {
			for _, hk := range hks {
				delete(v.byHost, hk)
			}
			delete(v.ofClust, ck)
		}
	}
}
