package workloads

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
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
//
// It holds too whether the server wants each device's full status (the
// store's mark, read by the same statement): a heartbeat asks for it, and
// this process asks the same device again only after askAgain, so a
// device is asked once per need even when its report is slow to come.
type Versions struct {
	feed     *feed.Runner
	store    eim.EdgeWorkloadStore
	now      func() time.Time
	askAgain time.Duration

	mu    sync.RWMutex
	byPr  map[string]map[string]eim.DeviceVersion // project → host → version
	asked sync.Map                                // "project/host" → time.Time asked
}

func newVersions(fs eim.Store, store eim.EdgeWorkloadStore, log *slog.Logger, reg prometheus.Registerer, retry time.Duration,
	now func() time.Time, askAgain time.Duration) *Versions {
	v := &Versions{store: store, now: now, askAgain: askAgain, byPr: map[string]map[string]eim.DeviceVersion{}}
	v.feed = feed.New(feed.Options{Store: fs, Name: "edge workload versions", Logger: log, Metrics: reg, MinWait: retry,
		Kinds: []eim.Kind{eim.KindEdgeDevices, eim.KindEdgeDeviceStatus, eim.KindProject},
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
				if ev.Kind == eim.KindEdgeDeviceStatus {
					// One device's mark: its row alone.
					dv, err := store.DeviceWorkloadVersion(ctx, ev.Project, ev.ID)
					if err != nil {
						return err
					}
					v.mu.Lock()
					if v.byPr[ev.Project] == nil {
						v.byPr[ev.Project] = map[string]eim.DeviceVersion{}
					}
					if dv == (eim.DeviceVersion{}) {
						delete(v.byPr[ev.Project], ev.ID)
					} else {
						v.byPr[ev.Project][ev.ID] = dv
					}
					v.mu.Unlock()
					if !dv.StatusWanted {
						v.asked.Delete(ev.Project + "/" + ev.ID)
					}
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
				v.forgetAsked(ev.Project)
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
	return formatVersion(n.Version)
}

// StatusWanted reports whether the server wants the device's full status
// now: the store marks it (see Service.sweepStatus and GetWorkloads) and
// this process has not asked the device within askAgain. False while the
// cache is not live.
func (v *Versions) StatusWanted(project, hostID string) bool {
	if !v.feed.Live() {
		return false
	}
	v.mu.RLock()
	wanted := v.byPr[project][hostID].StatusWanted
	v.mu.RUnlock()
	if !wanted {
		return false
	}
	key, now := project+"/"+hostID, v.now()
	if at, ok := v.asked.Load(key); ok && now.Sub(at.(time.Time)) < v.askAgain {
		return false
	}
	v.asked.Store(key, now)
	return true
}

// forgetAsked drops the asks of the project's devices whose status is no
// longer wanted (their report came): a new need is asked at once.
func (v *Versions) forgetAsked(project string) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	v.asked.Range(func(k, _ any) bool {
		p, h, _ := strings.Cut(k.(string), "/")
		if project == "" || p == project {
			if !v.byPr[p][h].StatusWanted {
				v.asked.Delete(k)
			}
		}
		return true
	})
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
	v.byPr = vs
	v.mu.Unlock()
	v.forgetAsked("")
	return nil
}
