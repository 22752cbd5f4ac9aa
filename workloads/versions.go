package workloads

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// Versions keeps every device's version in memory, by project and host,
// for the heartbeats' answers: a heartbeat costs a map read. It follows
// the change feed (every process that answers heartbeats runs it): a
// change of a project's devices' versions (KindEdgeDevices) reads that
// project's versions again, one indexed statement. While the feed is not
// followed it answers "" (nothing offered: a device keeps what it runs),
// never a stale version.
type Versions struct {
	feed  *feed.Runner
	store eim.EdgeWorkloadStore

	mu   sync.RWMutex
	byPr map[string]map[string]int64 // project → host → version
}

func newVersions(fs eim.Store, store eim.EdgeWorkloadStore, log *slog.Logger, reg prometheus.Registerer, retry time.Duration) *Versions {
	v := &Versions{store: store, byPr: map[string]map[string]int64{}}
	v.feed = feed.New(feed.Options{Store: fs, Name: "edge workload versions", Logger: log, Metrics: reg, MinWait: retry,
		Kinds: []eim.Kind{eim.KindEdgeDevices, eim.KindProject},
		Reset: v.reset,
		Handle: func(ctx context.Context, evs []eim.Event) error {
			seen := map[string]bool{}
			for _, ev := range evs {
				if ev.Kind == eim.KindProject {
					if ev.Op == eim.OpDeleted {
						v.mu.Lock()
						delete(v.byPr, ev.Project)
						v.mu.Unlock()
					}
					continue
				}
				if seen[ev.Project] {
					continue
				}
				seen[ev.Project] = true
				vs, err := store.DeviceWorkloadVersions(ctx, ev.Project)
				if err != nil {
					return err
				}
				v.mu.Lock()
				v.byPr[ev.Project] = vs[ev.Project]
				v.mu.Unlock()
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

// Version returns the device's version, "" when it has none or the cache
// is not live.
func (v *Versions) Version(project, hostID string) string {
	if !v.feed.Live() {
		return ""
	}
	v.mu.RLock()
	n := v.byPr[project][hostID]
	v.mu.RUnlock()
	return formatVersion(n)
}

func formatVersion(n int64) string {
	if n <= 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func (v *Versions) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.byPr)
}

// load reads every device's version: at the start of the feed and at
// re-lists.
func (v *Versions) load(ctx context.Context) error {
	vs, err := v.store.DeviceWorkloadVersions(ctx, "")
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.byPr = vs
	return nil
}
