package inventory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// engines returns the stores to run a test on: SQLite always, PostgreSQL
// when EIM_TEST_POSTGRES_URL is set.
func engines(t *testing.T) map[string]func(t *testing.T) eim.Store {
	m := map[string]func(t *testing.T) eim.Store{
		"sqlite": func(t *testing.T) eim.Store {
			return openStore(t, filepath.Join(t.TempDir(), "eim.db"))
		},
	}
	if pgURL != "" {
		m["postgres"] = func(t *testing.T) eim.Store { return openStore(t, pgURL) }
	}
	return m
}

// pgURL is the package's own PostgreSQL database for this run (see
// TestMain), "" when EIM_TEST_POSTGRES_URL is unset.
var pgURL string

// TestMain gives the run a fresh PostgreSQL database, so that no schema left
// in the shared one by another run or version gets in the way; every test
// works in a project of its own inside it.
func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if base := os.Getenv(storetest.PostgresEnv); base != "" {
		u, drop, err := storetest.PostgresDB(base, "eim_inventory")
		if err != nil {
			fmt.Fprintln(os.Stderr, "inventory tests:", err)
			return 1
		}
		defer func() {
			if err := drop(); err != nil {
				fmt.Fprintln(os.Stderr, "inventory tests:", err)
			}
		}()
		pgURL = u
	}
	return m.Run()
}

func openStore(t *testing.T, dsn string) eim.Store {
	t.Helper()
	st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatalf("open store %s: %v", dsn, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// env is one test's service, store and fresh project.
type env struct {
	t     *testing.T
	ctx   context.Context
	svc   *inventory.Service
	store eim.Store
	proj  string
}

// run runs f once per engine, each with a new service and project.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	for name, open := range engines(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			e := &env{t: t, ctx: context.Background(), store: st, svc: inventory.New(st, inventory.Options{})}
			e.proj = e.newProject()
			f(t, e)
		})
	}
}

func (e *env) newProject() string {
	e.t.Helper()
	var b [4]byte
	rand.Read(b[:])
	name := "t-" + hex.EncodeToString(b[:])
	if _, err := e.svc.CreateProject(e.ctx, name, ""); err != nil {
		e.t.Fatalf("create project: %v", err)
	}
	return name
}

// result holds a call's value and error, so that ok(f()).get(t) fails the
// test on error and returns the value.
type result[T any] struct {
	v   T
	err error
}

func ok[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) get(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func (e *env) create(r eim.Resource) eim.Resource {
	e.t.Helper()
	return ok(e.svc.Create(e.ctx, e.proj, r)).get(e.t)
}

func (e *env) get(k eim.Kind, id string) eim.Resource {
	e.t.Helper()
	return ok(e.svc.Get(e.ctx, e.proj, k, id)).get(e.t)
}

// manager writes r's current state directly through the store, as a
// manager would, bypassing the API's rules.
func (e *env) manager(k eim.Kind, id string, edit func(eim.Resource)) {
	e.t.Helper()
	err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
		r, err := tx.Get(e.ctx, k, id)
		if err != nil {
			return err
		}
		edit(r)
		return tx.Update(e.ctx, r)
	})
	if err != nil {
		e.t.Fatalf("manager write: %v", err)
	}
}

// issueCredentials gives host id node credentials, as onboarding does, so
// that its delete has something to clean up (two phases).
func (e *env) issueCredentials(id string) {
	e.t.Helper()
	e.manager(eim.KindHost, id, func(r eim.Resource) {
		h := r.(*eim.Host)
		h.NodeSecretHash, h.NodeCredGen = sha, h.NodeCredGen+1
	})
}

// wantErr checks err's code and that its message contains each of subs.
func wantErr(t *testing.T, err error, code string, subs ...string) {
	t.Helper()
	var e *eim.Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v, want code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%s), want %s", e.Code, e.Message, code)
	}
	for _, s := range subs {
		if !strings.Contains(e.Message, s) {
			t.Fatalf("got message %q, want it to contain %q", e.Message, s)
		}
	}
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

const sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func (e *env) host(name, site string) *eim.Host {
	e.t.Helper()
	return e.create(&eim.Host{Name: name, UUID: newUUID(), SiteID: site}).(*eim.Host)
}

func (e *env) os(name string) *eim.OS {
	e.t.Helper()
	return e.create(&eim.OS{Name: name, Sha256: sha, OsType: "OS_TYPE_MUTABLE"}).(*eim.OS)
}

func (e *env) instance(host, os string) *eim.Instance {
	e.t.Helper()
	return e.create(&eim.Instance{Name: "i", HostID: host, OSID: os}).(*eim.Instance)
}

func (e *env) region(name, parent string, md ...eim.MetadataItem) *eim.Region {
	e.t.Helper()
	return e.create(&eim.Region{Name: name, ParentID: parent, Metadata: md}).(*eim.Region)
}

func (e *env) site(name, region string, md ...eim.MetadataItem) *eim.Site {
	e.t.Helper()
	return e.create(&eim.Site{Name: name, RegionID: region, Metadata: md}).(*eim.Site)
}

const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxkZXYta2V5LWZvci10ZXN0cw== u@h"

// countingStore counts the statements a transaction runs, to check that
// lists load related resources in batches. It wraps the real store.
type countingStore struct {
	eim.Store
	calls atomic.Int64
}

func (s *countingStore) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return s.Store.View(ctx, project, func(tx eim.Tx) error { return fn(&countingTx{Tx: tx, n: &s.calls}) })
}

func (s *countingStore) Update(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return s.Store.Update(ctx, project, func(tx eim.Tx) error { return fn(&countingTx{Tx: tx, n: &s.calls}) })
}

type countingTx struct {
	eim.Tx
	n *atomic.Int64
}

func (t *countingTx) Get(ctx context.Context, k eim.Kind, id string) (eim.Resource, error) {
	t.n.Add(1)
	return t.Tx.Get(ctx, k, id)
}

func (t *countingTx) GetMany(ctx context.Context, k eim.Kind, ids []string) ([]eim.Resource, error) {
	t.n.Add(1)
	return t.Tx.GetMany(ctx, k, ids)
}

func (t *countingTx) List(ctx context.Context, k eim.Kind, q eim.Query) ([]eim.Resource, int, error) {
	t.n.Add(1)
	return t.Tx.List(ctx, k, q)
}

func (t *countingTx) Count(ctx context.Context, k eim.Kind, q eim.Query) (int, error) {
	t.n.Add(1)
	return t.Tx.Count(ctx, k, q)
}

func (t *countingTx) CountBy(ctx context.Context, k eim.Kind, q eim.Query, fields ...string) ([]eim.Group, error) {
	t.n.Add(1)
	return t.Tx.CountBy(ctx, k, q, fields...)
}

// with returns a copy of e whose helpers report to t (a subtest).
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}
