package hostmgr

import (
	"context"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// settingsCache holds each project's heartbeat interval and timeout for a
// short while: projects are not in the change feed, and a heartbeat must
// not read the project.
type settingsCache struct {
	store Store
	now   func() time.Time
	ttl   time.Duration
	// The server's defaults.
	interval, timeout time.Duration

	mu sync.RWMutex
	m  map[string]projectTimes
}

type projectTimes struct {
	interval, timeout time.Duration
	read              time.Time
}

func newSettingsCache(st Store, now func() time.Time, ttl, interval, timeout time.Duration) *settingsCache {
	return &settingsCache{store: st, now: now, ttl: ttl, interval: interval, timeout: timeout, m: map[string]projectTimes{}}
}

// get returns the project's interval and timeout, reading the project when
// the cached values are older than the TTL. When the read fails, the last
// values (or the defaults) stand.
func (c *settingsCache) get(ctx context.Context, project string) (interval, timeout time.Duration) {
	now := c.now()
	c.mu.RLock()
	pt, ok := c.m[project]
	c.mu.RUnlock()
	if ok && now.Sub(pt.read) < c.ttl {
		return pt.interval, pt.timeout
	}
	if !ok {
		pt = projectTimes{interval: c.interval, timeout: c.timeout}
	}
	if p, err := c.store.FindProject(ctx, project); err == nil {
		pt = c.times(p.Settings)
	}
	pt.read = now
	c.mu.Lock()
	c.m[project] = pt
	c.mu.Unlock()
	return pt.interval, pt.timeout
}

// times applies the defaults to a project's settings: an interval without
// a timeout gets as many misses as the default has, and the timeout never
// covers fewer than two intervals.
func (c *settingsCache) times(set eim.ProjectSettings) projectTimes {
	pt := projectTimes{interval: c.interval, timeout: c.timeout}
	if set.HeartbeatIntervalSeconds > 0 {
		pt.interval = time.Duration(set.HeartbeatIntervalSeconds) * time.Second
		pt.timeout = time.Duration(float64(c.timeout) / float64(c.interval) * float64(pt.interval))
	}
	if set.HeartbeatTimeoutSeconds > 0 {
		pt.timeout = time.Duration(set.HeartbeatTimeoutSeconds) * time.Second
	}
	pt.timeout = max(pt.timeout, 2*pt.interval)
	return pt
}

// timeoutOf returns the cached timeout of a project without reading it
// (the checker and the flusher run under the tracker's lock); the
// heartbeats of a project keep its entry fresh.
func (c *settingsCache) timeoutOf(project string) time.Duration {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if pt, ok := c.m[project]; ok {
		return pt.timeout
	}
	return c.timeout
}
