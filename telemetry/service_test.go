package telemetry_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/telemetry"
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

var pgURL string

func testMain(m *testing.M) int {
	if base := os.Getenv(storetest.PostgresEnv); base != "" {
		u, drop, err := storetest.PostgresDB(base, "eim_telemetry")
		if err != nil {
			fmt.Fprintln(os.Stderr, "telemetry tests:", err)
			return 1
		}
		defer drop()
		pgURL = u
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "telemetry tests: leaked goroutines:", err)
			return 1
		}
	}
	return code
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// countingStore counts the transactions opened, to check that cached
// versions cost no database access.
type countingStore struct {
	eim.Store
	txs atomic.Int64
}

func (s *countingStore) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	s.txs.Add(1)
	return s.Store.View(ctx, project, fn)
}

// env is a store, an inventory and a telemetry service running on them.
type env struct {
	t     *testing.T
	ctx   context.Context
	inv   *inventory.Service
	store *countingStore
	tel   *telemetry.Service
	proj  string
}

func engines(t *testing.T, f func(t *testing.T, e *env)) {
	dsns := map[string]string{"sqlite": ""}
	if pgURL != "" {
		dsns["postgres"] = pgURL
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			if dsn == "" {
				dsn = filepath.Join(t.TempDir(), "eim.db")
			}
			st, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			cs := &countingStore{Store: st}
			e := &env{t: t, ctx: t.Context(), inv: inventory.New(st, inventory.Options{}), store: cs}
			p, err := e.inv.CreateProject(e.ctx, fmt.Sprintf("tel-%d", time.Now().UnixNano()%1e9), "")
			if err != nil {
				t.Fatal(err)
			}
			e.proj = p.Name
			e.tel = telemetry.New(telemetry.Options{Store: cs, RetryWait: 50 * time.Millisecond})
			f(t, e)
		})
	}
}

// run starts the service's feed watcher for the rest of the test.
func (e *env) run() {
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.tel.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}()
	e.t.Cleanup(func() { cancel(); wg.Wait() })
}

func (e *env) create(r eim.Resource) eim.Resource {
	e.t.Helper()
	out, err := e.inv.Create(e.ctx, e.proj, r)
	if err != nil {
		e.t.Fatalf("create %T: %v", r, err)
	}
	return out
}

func (e *env) config(host string) (telemetry.Config, string) {
	e.t.Helper()
	c, v, err := e.tel.Config(e.ctx, e.proj, host)
	if err != nil {
		e.t.Fatalf("Config(%s): %v", host, err)
	}
	return c, v
}

// waitVersion polls until host's version is not old (the feed carries the
// change to the service), and returns the new configuration.
func (e *env) waitVersion(step, host, old string) telemetry.Config {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if v := e.tel.Version(e.ctx, e.proj, host); v != old && v != "" {
			c, _ := e.config(host)
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("%s: the version of %s stayed %s", step, host, old)
	return telemetry.Config{}
}

// A node's configuration follows its tree through the change feed, and a
// cached version costs no database access.
func TestServiceFollowsChanges(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		root := e.create(&eim.Region{Name: "root"}).(*eim.Region)
		sub := e.create(&eim.Region{Name: "sub", ParentID: root.ResourceID}).(*eim.Region)
		other := e.create(&eim.Region{Name: "other"}).(*eim.Region)
		site := e.create(&eim.Site{Name: "s", RegionID: sub.ResourceID}).(*eim.Site)
		site2 := e.create(&eim.Site{Name: "s2", RegionID: other.ResourceID}).(*eim.Site)
		host := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: site.ResourceID}).(*eim.Host)
		os := e.create(&eim.OS{Name: "u", Sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}).(*eim.OS)
		inst := e.create(&eim.Instance{HostID: host.ResourceID, OSID: os.ResourceID}).(*eim.Instance)
		cpu := e.create(&eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "cpu", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"cpu"}}).(*eim.TelemetryGroup)
		sys := e.create(&eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "sys", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"systemd"}}).(*eim.TelemetryGroup)
		pRoot := e.create(&eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: cpu.ResourceID, MetricsInterval: 60, TargetRegion: root.ResourceID}).(*eim.TelemetryProfile)
		e.create(&eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: sys.ResourceID, LogLevel: "SEVERITY_LEVEL_WARN", TargetSite: site.ResourceID})
		e.create(&eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: cpu.ResourceID, MetricsInterval: 5, TargetRegion: other.ResourceID})

		// Before Run: read afresh every time, the same answer.
		c0, v0 := e.config(host.ResourceID)
		if summary(c0) != "cpu=60 sys=warn" {
			t.Fatalf("before Run: %q", summary(c0))
		}
		e.run()
		waitLive := time.Now().Add(5 * time.Second)
		for {
			_, v := e.config(host.ResourceID)
			before := e.store.txs.Load()
			_, v2 := e.config(host.ResourceID)
			if v != v0 || v2 != v0 {
				t.Fatalf("versions %s, %s after Run, want %s", v, v2, v0)
			}
			if e.store.txs.Load() == before {
				break // cached
			}
			if time.Now().After(waitLive) {
				t.Fatal("versions are still read from the store")
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := e.store.txs.Load()
		for range 100 {
			if v := e.tel.Version(e.ctx, e.proj, host.ResourceID); v != v0 {
				t.Fatalf("version %s, want %s", v, v0)
			}
		}
		if n := e.store.txs.Load() - before; n != 0 {
			t.Fatalf("100 cached versions took %d transactions, want 0", n)
		}

		steps := []struct {
			name   string
			change func()
			want   string
		}{
			{"a profile on the instance: shortest interval", func() {
				e.create(&eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: cpu.ResourceID, MetricsInterval: 30, TargetInstance: inst.ResourceID})
			}, "cpu=30 sys=warn"},
			{"a more verbose region profile", func() {
				e.create(&eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: sys.ResourceID, LogLevel: "SEVERITY_LEVEL_DEBUG", TargetRegion: root.ResourceID})
			}, "cpu=30 sys=debug"},
			{"a profile's interval changed", func() {
				_, err := e.inv.Update(e.ctx, e.proj, &eim.TelemetryProfile{Meta: eim.Meta{ResourceID: pRoot.ResourceID}, Type: eim.TelemetryMetrics, MetricsInterval: 15}, []string{"metricsInterval"})
				if err != nil {
					t.Fatal(err)
				}
			}, "cpu=15 sys=debug"},
			{"the host moved to another site", func() {
				if _, err := e.inv.Update(e.ctx, e.proj, &eim.Host{Meta: eim.Meta{ResourceID: host.ResourceID}, SiteID: site2.ResourceID}, []string{"siteId"}); err != nil {
					t.Fatal(err)
				}
			}, "cpu=5"},
			{"the site moved to another region", func() {
				if _, err := e.inv.Update(e.ctx, e.proj, &eim.Site{Meta: eim.Meta{ResourceID: site2.ResourceID}, RegionID: sub.ResourceID}, []string{"regionId"}); err != nil {
					t.Fatal(err)
				}
			}, "cpu=15 sys=debug"},
			{"the region re-parented", func() {
				if _, err := e.inv.Update(e.ctx, e.proj, &eim.Region{Meta: eim.Meta{ResourceID: sub.ResourceID}, Name: "sub", ParentID: other.ResourceID}, nil); err != nil {
					t.Fatal(err)
				}
			}, "cpu=5"},
		}
		_, v := e.config(host.ResourceID)
		for _, s := range steps {
			s.change()
			c := e.waitVersion(s.name, host.ResourceID, v)
			if got := summary(c); got != s.want {
				t.Fatalf("%s: got %q, want %q", s.name, got, s.want)
			}
			_, v = e.config(host.ResourceID)
		}

		// A change elsewhere (another project) keeps the version.
		p2, err := e.inv.CreateProject(e.ctx, e.proj+"-b", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.inv.Create(e.ctx, p2.Name, &eim.Region{Name: "x"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if got := e.tel.Version(e.ctx, e.proj, host.ResourceID); got != v {
			t.Fatalf("version %s after a change in another project, want %s", got, v)
		}
		// Unknown hosts, and hosts of another project, have none.
		if got := e.tel.Version(e.ctx, p2.Name, host.ResourceID); got != "" {
			t.Fatalf("version in another project: %q", got)
		}
		if _, _, err := e.tel.Config(e.ctx, e.proj, "host-00000000"); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("unknown host: %v", err)
		}
	})
}

// GetTelemetryConfig answers the calling node; a node that has the version
// gets only the version back.
func TestGetTelemetryConfig(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		site := e.create(&eim.Site{Name: "s"}).(*eim.Site)
		host := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: site.ResourceID}).(*eim.Host)
		g := e.create(&eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "sys", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"systemd", "kern"}}).(*eim.TelemetryGroup)
		e.create(&eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: g.ResourceID, LogLevel: "SEVERITY_LEVEL_INFO", TargetSite: site.ResourceID})
		e.run()
		ctx := southbound.WithNode(e.ctx, southbound.Node{HostID: host.ResourceID, Project: e.proj})
		resp, err := e.tel.GetTelemetryConfig(ctx, connect.NewRequest(&hostv1.GetTelemetryConfigRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		m := resp.Msg
		if m.Unchanged || len(m.LogsGroups) != 1 || m.LogsGroups[0].Level != hostv1.TelemetryLogsGroup_LEVEL_INFO || m.LogsGroups[0].GroupId != g.ResourceID ||
			len(m.LogsGroups[0].Inputs) != 2 || len(m.MetricsGroups) != 0 || m.Version != e.tel.Version(e.ctx, e.proj, host.ResourceID) {
			t.Fatalf("answer: %v", m)
		}
		again, err := e.tel.GetTelemetryConfig(ctx, connect.NewRequest(&hostv1.GetTelemetryConfigRequest{Version: m.Version}))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Msg.Unchanged || again.Msg.Version != m.Version || len(again.Msg.LogsGroups) != 0 {
			t.Fatalf("unchanged answer: %v", again.Msg)
		}
		if _, err := e.tel.GetTelemetryConfig(e.ctx, connect.NewRequest(&hostv1.GetTelemetryConfigRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("without a node: %v", err)
		}
		gone := southbound.WithNode(e.ctx, southbound.Node{HostID: "host-00000000", Project: e.proj})
		if _, err := e.tel.GetTelemetryConfig(gone, connect.NewRequest(&hostv1.GetTelemetryConfigRequest{})); connect.CodeOf(err) != connect.CodeNotFound {
			t.Fatalf("unknown host: %v", err)
		}
	})
}

// Many heartbeats at once after a change load the project's tree once, and
// read nothing else: the hosts' sites are still known.
func TestTreeLoadedOnce(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		site := e.create(&eim.Site{Name: "s"}).(*eim.Site)
		var hosts []string
		for range 20 {
			h := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: site.ResourceID}).(*eim.Host)
			hosts = append(hosts, h.ResourceID)
		}
		e.run()
		deadline := time.Now().Add(5 * time.Second)
		for {
			for _, h := range hosts {
				e.tel.Version(e.ctx, e.proj, h)
			}
			before := e.store.txs.Load()
			for _, h := range hosts {
				e.tel.Version(e.ctx, e.proj, h)
			}
			if e.store.txs.Load() == before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("not cached")
			}
			time.Sleep(10 * time.Millisecond)
		}
		e.create(&eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "cpu", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"cpu"}})
		for e.tel.TreeCached(e.proj) {
			if time.Now().After(deadline) {
				t.Fatal("the feed did not drop the tree")
			}
			time.Sleep(5 * time.Millisecond)
		}
		before := e.store.txs.Load()
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Go(func() {
				if v := e.tel.Version(e.ctx, e.proj, h); v == "" {
					t.Errorf("no version for %s", h)
				}
			})
		}
		wg.Wait()
		if n := e.store.txs.Load() - before; n != 1 {
			t.Fatalf("%d transactions for %d hosts after a change, want 1 (the tree)", n, len(hosts))
		}
	})
}

// BenchmarkVersionCached is a heartbeat's cost in the telemetry module: a
// cached version.
func BenchmarkVersionCached(b *testing.B) {
	st, err := sqlstore.Open(context.Background(), filepath.Join(b.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	inv := inventory.New(st, inventory.Options{})
	ctx := b.Context()
	p, err := inv.CreateProject(ctx, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	site, _ := inv.Create(ctx, p.Name, &eim.Site{Name: "s"})
	h, err := inv.Create(ctx, p.Name, &eim.Host{Name: "h", UUID: newUUID(), SiteID: site.Base().ResourceID})
	if err != nil {
		b.Fatal(err)
	}
	g, _ := inv.Create(ctx, p.Name, &eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "cpu", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"cpu"}})
	if _, err := inv.Create(ctx, p.Name, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: g.Base().ResourceID, MetricsInterval: 30, TargetSite: site.Base().ResourceID}); err != nil {
		b.Fatal(err)
	}
	tel := telemetry.New(telemetry.Options{Store: st})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); tel.Run(rctx) }()
	defer func() { cancel(); <-done }()
	for tel.Version(ctx, p.Name, h.Base().ResourceID) == "" || !tel.TreeCached(p.Name) {
		time.Sleep(time.Millisecond)
	}
	id := h.Base().ResourceID
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if tel.Version(ctx, p.Name, id) == "" {
				b.Error("no version")
			}
		}
	})
}

// TestConfigsShared: the hosts that get one configuration share one copy
// of it (kept on each host's view), a host with another gets its own.
func TestConfigsShared(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		g := e.create(&eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "cpu", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"cpu"}}).(*eim.TelemetryGroup)
		var hosts []string
		for i, interval := range []uint32{30, 30, 60} {
			// Sites 0 and 1: two sites, one configuration.
			site := e.create(&eim.Site{Name: fmt.Sprintf("s%d", i)}).(*eim.Site)
			e.create(&eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: g.ResourceID, MetricsInterval: interval, TargetSite: site.ResourceID})
			h := e.create(&eim.Host{Name: "h", UUID: newUUID(), SiteID: site.ResourceID}).(*eim.Host)
			hosts = append(hosts, h.ResourceID)
		}
		e.run()
		cfgs := make([]telemetry.Config, len(hosts))
		vs := make([]string, len(hosts))
		deadline := time.Now().Add(10 * time.Second)
		for {
			// Read until served from the memos (the view and the tree loaded).
			for i, h := range hosts {
				cfgs[i], vs[i] = e.config(h)
			}
			before := e.store.txs.Load()
			for i, h := range hosts {
				cfgs[i], vs[i] = e.config(h)
			}
			if e.store.txs.Load() == before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("configurations not cached")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i, c := range cfgs {
			if len(c.Metrics) != 1 {
				t.Fatalf("host %d: %d metrics groups, want 1", i, len(c.Metrics))
			}
		}
		if vs[0] != vs[1] || &cfgs[0].Metrics[0] != &cfgs[1].Metrics[0] {
			t.Fatalf("two hosts with one configuration: versions %s %s, groups at %p %p; want one shared copy", vs[0], vs[1], &cfgs[0].Metrics[0], &cfgs[1].Metrics[0])
		}
		if vs[2] == vs[0] || &cfgs[2].Metrics[0] == &cfgs[0].Metrics[0] || cfgs[2].Metrics[0].IntervalSeconds != 60 {
			t.Fatalf("a host with another configuration: version %s (the others' %s), interval %d; want its own", vs[2], vs[0], cfgs[2].Metrics[0].IntervalSeconds)
		}
	})
}
