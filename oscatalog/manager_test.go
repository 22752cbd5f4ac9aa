package oscatalog_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "oscatalog tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is one test's store (empty: a SQLite file or a fresh PostgreSQL
// database) with the inventory over it.
type env struct {
	t     testing.TB
	ctx   context.Context
	store eim.Store
	inv   *inventory.Service
}

// engines are the stores tests run on: SQLite and, when
// EIM_TEST_POSTGRES_URL is set, PostgreSQL.
func engines() []string {
	if os.Getenv(storetest.PostgresEnv) != "" {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
}

func newEnv(tb testing.TB, engine string) *env {
	tb.Helper()
	dsn := filepath.Join(tb.TempDir(), "eim.db")
	if engine == "postgres" {
		dsn = storetest.PostgresURL(tb)
	}
	st, err := sqlstore.Open(tb.Context(), dsn, sqlstore.Options{})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return &env{t: tb, ctx: tb.Context(), store: st, inv: inventory.New(st, inventory.Options{})}
}

// run runs f on each engine.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, engine := range engines() {
		t.Run(engine, func(t *testing.T) { f(t, newEnv(t, engine)) })
	}
}

func (e *env) project(name string) string {
	e.t.Helper()
	if _, err := e.inv.CreateProject(e.ctx, name, ""); err != nil {
		e.t.Fatalf("create project %s: %v", name, err)
	}
	return name
}

// oses returns the project's OS resources by name.
func (e *env) oses(project string) map[string]*eim.OS {
	e.t.Helper()
	out := map[string]*eim.OS{}
	err := e.store.View(e.ctx, project, func(tx eim.Tx) error {
		items, _, err := tx.List(e.ctx, eim.KindOS, eim.Query{})
		for _, r := range items {
			out[r.(*eim.OS).Name] = r.(*eim.OS)
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func names(m map[string]*eim.OS) []string {
	var out []string
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// userOS creates an OS through the API's rules, as a user would.
func (e *env) userOS(project string, o *eim.OS) *eim.OS {
	e.t.Helper()
	if o.Sha256 == "" {
		o.Sha256 = strings.Repeat("ab", 32)
	}
	r, err := e.inv.Create(e.ctx, project, o)
	if err != nil {
		e.t.Fatalf("create OS %s: %v", o.Name, err)
	}
	return r.(*eim.OS)
}

var uuidSeq atomic.Int64

// instance creates a host and an instance of it on the OS.
func (e *env) instance(project, osID string) *eim.Instance {
	e.t.Helper()
	h, err := e.inv.Create(e.ctx, project, &eim.Host{Name: "edge", UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", uuidSeq.Add(1))})
	if err != nil {
		e.t.Fatal(err)
	}
	in, err := e.inv.Create(e.ctx, project, &eim.Instance{Name: "edge", HostID: h.Base().ResourceID, OSID: osID})
	if err != nil {
		e.t.Fatal(err)
	}
	return in.(*eim.Instance)
}

func (e *env) getInstance(project, id string) *eim.Instance {
	e.t.Helper()
	var in *eim.Instance
	err := e.store.View(e.ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindInstance, id)
		if err == nil {
			in = r.(*eim.Instance)
		}
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

// edit changes a stored instance as a manager would (the OS update
// switching its OS, another module writing osUpdateAvailable).
func (e *env) edit(project, id string, fn func(*eim.Instance)) {
	e.t.Helper()
	err := e.store.Update(e.ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, eim.KindInstance, id)
		if err != nil {
			return err
		}
		fn(r.(*eim.Instance))
		return tx.Update(e.ctx, r)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// start runs m until the test ends.
func (e *env) start(m *oscatalog.Manager) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

// eventually polls cond until it returns nil or 15 s pass.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testCatalog(t testing.TB, dir string) *oscatalog.Catalog {
	t.Helper()
	c, err := oscatalog.Load(testShipped, dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var catalogNames = []string{"EMT 1", "EMT 2", "Ubuntu"}

// Loading is idempotent: the first pass creates the catalog's OS resources
// in every project; the next finds nothing to do and writes nothing. A
// user's OS of a profile's version stands for it, and an OS holding a
// profile's name keeps that profile out.
func TestLoadIdempotent(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		a, b := e.project("alpha"), e.project("beta")
		mine := e.userOS(b, &eim.OS{Name: "my emt", ProfileName: "emt", ImageID: "3.0.1", OsType: "OS_TYPE_IMMUTABLE", ImageURL: "https://mirror.local/emt.img"})
		e.userOS(b, &eim.OS{Name: "Ubuntu", ProfileName: "something-else"})
		m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: testCatalog(t, "")})

		st := m.Pass(e.ctx)
		if st.Projects != 2 || st.Created != 4 || st.Updated != 0 || st.Conflicts != 1 || st.Failed != 0 {
			t.Errorf("first pass: got %+v, want 2 projects, 4 created (3 + 1), 1 conflict", st)
		}
		if got := names(e.oses(a)); !slices.Equal(got, catalogNames) {
			t.Errorf("alpha: got %v, want %v", got, catalogNames)
		}
		if got := names(e.oses(b)); !slices.Equal(got, []string{"EMT 2", "Ubuntu", "my emt"}) {
			t.Errorf("beta: got %v, want EMT 2 beside the user's OSes", got)
		}
		if got := e.oses(b)["my emt"]; got.ImageURL != mine.ImageURL || got.ProfileVersion != "" || got.Timestamps.UpdatedAt != mine.Timestamps.UpdatedAt {
			t.Errorf("the user's OS was changed: %+v", got)
		}
		emt2 := e.oses(a)["EMT 2"]
		if emt2.ProfileName != "emt" || emt2.ImageID != "3.0.2" || emt2.ProfileVersion != "3.0.2" || emt2.OsType != "OS_TYPE_IMMUTABLE" || emt2.OsProvider != "OS_PROVIDER_KIND_INFRA" {
			t.Errorf("catalog OS: got %+v", emt2)
		}

		stamps := func() map[string]eim.Time {
			out := map[string]eim.Time{}
			for _, p := range []string{a, b} {
				for _, o := range e.oses(p) {
					out[o.ResourceID] = o.Timestamps.UpdatedAt
				}
			}
			return out
		}
		was := stamps()
		st = m.Pass(e.ctx)
		if st.Created+st.Updated+st.Instances != 0 || st.Conflicts != 1 {
			t.Errorf("second pass: got %+v, want nothing done", st)
		}
		if now := stamps(); !maps.Equal(now, was) {
			t.Errorf("second pass rewrote OS resources: %v → %v", was, now)
		}
	})
}

// A project created while the manager runs gets the catalog from the feed;
// an OS the catalog made and a user edited follows its manifest again at
// the next pass.
func TestProjectCreated(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.project("first")
		m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: testCatalog(t, ""), Refresh: -1})
		e.start(m)
		eventually(t, "catalog in the first project", func() error {
			if got := names(e.oses("first")); !slices.Equal(got, catalogNames) {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
		start := time.Now()
		p := e.project("later")
		eventually(t, "catalog in a new project", func() error {
			if got := names(e.oses(p)); !slices.Equal(got, catalogNames) {
				return fmt.Errorf("got %v", got)
			}
			return nil
		})
		t.Logf("a new project had the catalog after %s", time.Since(start).Round(time.Millisecond))

		// An API edit (of what the API may change: name, architecture,
		// metadata) is undone by the next pass.
		u := e.oses(p)["Ubuntu"]
		u.Name = "Renamed"
		if _, err := e.inv.Update(e.ctx, p, u, []string{"name"}); err != nil {
			t.Fatal(err)
		}
		if st := m.Pass(e.ctx); st.Updated != 1 {
			t.Errorf("pass after an edit: got %+v, want 1 updated", st)
		}
		if got := e.oses(p)["Ubuntu"]; got == nil || got.ResourceID != u.ResourceID {
			t.Errorf("edited catalog OS: got %v, want its manifest's name back on the same resource", got)
		}
	})
}

// A user's manifest with a shipped profile's key replaces it, and one with
// a new version of an immutable profile makes instances on older versions
// show osUpdateAvailable, after a refresh reads the directory again.
func TestOverrideAndRefresh(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		p := e.project("acme")
		dir := t.TempDir()
		reload := func() (*oscatalog.Catalog, error) { return oscatalog.Load(testShipped, dir) }
		m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: testCatalog(t, dir), Reload: reload, Refresh: -1})
		m.Pass(e.ctx)
		before := e.oses(p)
		inst := e.instance(p, before["EMT 2"].ResourceID)
		if st := m.Pass(e.ctx); st.Instances != 0 {
			t.Errorf("instance on the newest version: %+v", st)
		}

		files := map[string]string{
			"emt-2.yaml":  strings.Replace(manifest("EMT 2", "OS_TYPE_IMMUTABLE", "emt", "3.0.2"), "images.example.com", "mirror.local", 1),
			"emt-10.yaml": manifest("EMT 10", "OS_TYPE_IMMUTABLE", "emt", "3.0.10"),
		}
		for n, s := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		st := m.Refresh(e.ctx)
		if st.Created != 1 || st.Updated != 1 || st.Instances != 1 {
			t.Errorf("refresh: got %+v, want 1 created, 1 updated, 1 instance", st)
		}
		after := e.oses(p)
		if got := after["EMT 2"]; got.ResourceID != before["EMT 2"].ResourceID || got.ImageURL != "https://mirror.local/emt-3.0.2.img" {
			t.Errorf("overridden OS: got %s %s", got.ResourceID, got.ImageURL)
		}
		want := oscatalog.UpdateText(after["EMT 10"])
		if got := e.getInstance(p, inst.ResourceID).OsUpdateAvailable; got != want || !strings.Contains(got, after["EMT 10"].ResourceID) || !strings.Contains(got, "3.0.10") {
			t.Errorf("osUpdateAvailable: got %q, want %q", got, want)
		}

		// A broken manifest: the refresh keeps the catalog it had.
		if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("appVersion: apps/v1\nspec:\n  nmae: x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if st := m.Refresh(e.ctx); st.Created+st.Updated+st.Instances != 0 || len(m.Catalog().Profiles()) != 4 {
			t.Errorf("refresh with a bad manifest: got %+v and %d profiles, want the catalog as it was", st, len(m.Catalog().Profiles()))
		}
	})
}

// osUpdateAvailable follows the OS resources and instances through the
// feed: set on instances of an immutable OS with a newer version (the
// catalog's or a user's), cleared when the instance runs the newest,
// untouched on a mutable OS, written only when it changes.
func TestOSUpdateAvailable(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		p := e.project("acme")
		m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: testCatalog(t, ""), Refresh: -1})
		m.Pass(e.ctx)
		oses := e.oses(p)
		old, cur, ubuntu := oses["EMT 1"], oses["EMT 2"], oses["Ubuntu"]
		e.start(m)

		a := e.instance(p, old.ResourceID) // created while the manager runs
		b := e.instance(p, cur.ResourceID)
		u := e.instance(p, ubuntu.ResourceID)
		e.edit(p, u.ResourceID, func(in *eim.Instance) { in.OsUpdateAvailable = "12 packages" }) // another module's

		want := func(id, text string) {
			t.Helper()
			eventually(t, "osUpdateAvailable of "+id, func() error {
				if got := e.getInstance(p, id).OsUpdateAvailable; got != text {
					return fmt.Errorf("got %q, want %q", got, text)
				}
				return nil
			})
		}
		want(a.ResourceID, oscatalog.UpdateText(cur))
		want(b.ResourceID, "")

		// A newer version for another architecture is no update for these.
		e.userOS(p, &eim.OS{Name: "EMT 9 arm", ProfileName: "emt", ImageID: "3.0.9", OsType: "OS_TYPE_IMMUTABLE", Architecture: "aarch64", ImageURL: "https://x.example/9.img"})
		// A user's OS of the same profile, newer still (the feed brings it
		// after the one above: the value below shows the arm OS ignored).
		newer := e.userOS(p, &eim.OS{Name: "EMT 5", ProfileName: "emt", ImageID: "3.0.5", OsType: "OS_TYPE_IMMUTABLE", ImageURL: "https://x.example/5.img"})
		want(a.ResourceID, oscatalog.UpdateText(newer))
		want(b.ResourceID, oscatalog.UpdateText(newer))
		// Gone again: the catalog's newest counts.
		if err := e.inv.Delete(e.ctx, p, eim.KindOS, newer.ResourceID); err != nil {
			t.Fatal(err)
		}
		want(a.ResourceID, oscatalog.UpdateText(cur))
		want(b.ResourceID, "")
		// The update went through: the instance runs the newest.
		e.edit(p, a.ResourceID, func(in *eim.Instance) { in.OSID = cur.ResourceID })
		want(a.ResourceID, "")

		// Nothing left to do: a pass writes nothing.
		was := map[string]eim.Time{}
		for _, in := range []*eim.Instance{a, b, u} {
			was[in.ResourceID] = e.getInstance(p, in.ResourceID).Timestamps.UpdatedAt
		}
		if st := m.Pass(e.ctx); st.Instances != 0 {
			t.Errorf("pass: got %+v, want no instance written", st)
		}
		for id, at := range was {
			if got := e.getInstance(p, id).Timestamps.UpdatedAt; got != at {
				t.Errorf("a pass with nothing to do rewrote %s", id)
			}
		}
		if got := e.getInstance(p, u.ResourceID).OsUpdateAvailable; got != "12 packages" {
			t.Errorf("instance on a mutable OS: got %q, want another module's value kept", got)
		}
	})
}
