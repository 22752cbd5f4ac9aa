package hostmgr

import (
	"context"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// settingsCache holds each project's heartbeat interval and timeout for a
// short while: projects are not in the change feed, and a heartbeat must
// not read the project. The checker keeps every project's times fresh
// (refreshAll), so that it judges the hosts of a project whose nodes call
// other replicas by that project's timeout too, not the server's default.
type settingsCache struct {
	store Store
	now   func() time.Time
	ttl   time.Duration
	// The server's defaults.
	interval, timeout time.Duration

	mu      sync.RWMutex
	m       map[string]projectTimes
	allRead time.Time // when refreshAll last read every project
}

type projectTimes struct {
	interval, timeout time.Duration
	read              time.Time
	// refreshing is set while a caller reads the project again: the
	// others answer with the times held meanwhile rather than wait for
	// the store too.
	refreshing bool
}

func newSettingsCache(st Store, now func() time.Time, ttl, interval, timeout time.Duration) *settingsCache {
	return &settingsCache{store: st, now: now, ttl: ttl, interval: interval, timeout: timeout, m: map[string]projectTimes{}}
}

// get returns the project's interval and timeout, reading the project when
// the cached values are older than the TTL; one caller at a time reads it,
// the others answer with the values held. When the read fails, the last
// values (or the defaults) stand.
func (c *settingsCache) get(ctx context.Context, project string) (interval, timeout time.Duration) {
	now := c.now()
	c.mu.RLock()
	pt, ok := c.m[project]
	c.mu.RUnlock()
	if ok && (now.Sub(pt.read) < c.ttl || pt.refreshing) {
		return pt.interval, pt.timeout
	}
	if ok {
		c.mu.Lock()
		pt = c.m[project]
		if pt.refreshing || now.Sub(pt.read) < c.ttl {
			c.mu.Unlock()
			return pt.interval, pt.timeout
		}
		pt.refreshing = true
		c.m[project] = pt
		c.mu.Unlock()
	} else {
		pt = projectTimes{interval: c.interval, timeout: c.timeout}
	}
	if p, err := c.store.FindProject(ctx, project); err == nil {
		pt = c.times(p.Settings)
	}
	pt.read, pt.refreshing = now, false
	c.mu.Lock()
	c.m[project] = pt
	c.mu.Unlock()
	return pt.interval, pt.timeout
}

// refreshAll reads every project's times, when it has not for the TTL.
func (c *settingsCache) refreshAll(ctx context.Context) error {
	now := c.now()
	c.mu.RLock()
	fresh := now.Sub(c.allRead) < c.ttl
	c.mu.RUnlock()
	if fresh {
		return nil
	}
	ps, err := c.store.ListProjects(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		pt := c.times(p.Settings)
		pt.read = now
		c.m[p.Name] = pt
	}
	c.allRead = now
	return nil
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
