package sqlstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/sqlstore"
)

// clock is a settable time for stores under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Two Stores on one database stand for two server processes: a project
// change is seen at once by the Store that made it and within a second by
// the other; a new project is found at once by both.
func TestFindProjectCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "eim.db")
	ck := &clock{t: time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)}
	open := func() *sqlstore.Store {
		s, err := sqlstore.Open(ctx, path, sqlstore.Options{Now: ck.now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	if err := a.CreateProject(ctx, &eim.Project{Name: "p", ID: "id-p"}); err != nil {
		t.Fatal(err)
	}
	interval := func(s *sqlstore.Store) uint32 {
		t.Helper()
		p, err := s.FindProject(ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		return p.Settings.HeartbeatIntervalSeconds
	}
	if got := interval(b); got != 0 {
		t.Fatalf("b: interval %d, want 0", got)
	}
	interval(a)
	p, _ := a.FindProject(ctx, "p")
	p.Settings.HeartbeatIntervalSeconds = 30
	p.Settings.DefaultCustomConfigIDs = []string{"customconfig-00000001"}
	if err := a.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	// A caller changing what it was given changes nothing cached.
	p.Settings.DefaultCustomConfigIDs[0] = "changed"
	if got := interval(a); got != 30 {
		t.Fatalf("a after its own update: interval %d, want 30", got)
	}
	if got, _ := a.FindProject(ctx, "p"); got.Settings.DefaultCustomConfigIDs[0] != "customconfig-00000001" {
		t.Fatalf("a: custom configs %v: the cache shares the caller's slice", got.Settings.DefaultCustomConfigIDs)
	}
	if got := interval(b); got != 0 {
		t.Fatalf("b within the TTL: interval %d, want the cached 0", got)
	}
	ck.add(time.Second)
	if got := interval(b); got != 30 {
		t.Fatalf("b after the TTL: interval %d, want 30", got)
	}

	// No negative caching: b asks for q before it exists, a creates it.
	if _, err := b.FindProject(ctx, "q"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("b: q before it exists: %v, want ENOTFOUND", err)
	}
	if err := a.CreateProject(ctx, &eim.Project{Name: "q", ID: "id-q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.FindProject(ctx, "q"); err != nil {
		t.Fatalf("b: q just created by a: %v", err)
	}
	// A deleted project is gone at once for the Store that deleted it.
	if err := a.DeleteProject(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.FindProject(ctx, "q"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("a: q after deleting it: %v, want ENOTFOUND", err)
	}
}
