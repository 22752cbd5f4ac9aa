package hostmgr_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/maintenance"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/telemetry"
)

// readCounter counts what the modules read from the store: transactions,
// and the resources their statements return. (Before the host view, node
// authentication read credentials of its own, counted as creds/host.)
type readCounter struct {
	eim.Store
	txs, rows atomic.Int64
}

func (s *readCounter) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	s.txs.Add(1)
	return s.Store.View(ctx, project, func(tx eim.Tx) error { return fn(countingTx{tx, s}) })
}

type countingTx struct {
	eim.Tx
	s *readCounter
}

func (t countingTx) Get(ctx context.Context, k eim.Kind, id string) (eim.Resource, error) {
	r, err := t.Tx.Get(ctx, k, id)
	if err == nil {
		t.s.rows.Add(1)
	}
	return r, err
}

func (t countingTx) List(ctx context.Context, k eim.Kind, q eim.Query) ([]eim.Resource, int, error) {
	items, n, err := t.Tx.List(ctx, k, q)
	t.s.rows.Add(int64(len(items)))
	return items, n, err
}

// benchFleet is a SQLite store with n onboarded, provisioned, running
// hosts of one project, each at a site and with an instance, a telemetry
// profile and a maintenance schedule over them, and every host's
// last-seen time stored (as a server that ran before left it).
type benchFleet struct {
	store   *sqlstore.Store
	project string
	hosts   []string
	iss     *auth.Issuer
}

func newBenchFleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	ctx := b.Context()
	dir := b.TempDir()
	st, err := sqlstore.Open(ctx, filepath.Join(dir, "eim.db"), sqlstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	iss, err := auth.LoadIssuer(dir)
	if err != nil {
		b.Fatal(err)
	}
	f := &benchFleet{store: st, project: "bench", iss: iss}
	if err := st.CreateProject(ctx, &eim.Project{Name: f.project, ID: "6f1e2a3b-0000-4000-8000-00000000be01"}); err != nil {
		b.Fatal(err)
	}
	_, hash := southbound.NewSecret()
	err = st.Update(ctx, f.project, func(tx eim.Tx) error {
		region := &eim.Region{Name: "r"}
		if err := tx.Create(ctx, region); err != nil {
			return err
		}
		site := &eim.Site{Name: "s", RegionID: region.ResourceID}
		if err := tx.Create(ctx, site); err != nil {
			return err
		}
		os := &eim.OS{Name: "emt", ProfileName: "emt", ImageID: "1.0", OsType: "OS_TYPE_IMMUTABLE",
			ImageURL: "https://images.example/emt.raw.gz", Sha256: strings.Repeat("ab", 32), SecurityFeature: "SECURITY_FEATURE_NONE", Architecture: "x86_64"}
		if err := tx.Create(ctx, os); err != nil {
			return err
		}
		group := &eim.TelemetryGroup{Type: eim.TelemetryMetrics, Name: "cpu", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"cpu"}}
		if err := tx.Create(ctx, group); err != nil {
			return err
		}
		if err := tx.Create(ctx, &eim.TelemetryProfile{Type: eim.TelemetryMetrics, MetricsGroupID: group.ResourceID, MetricsInterval: 30, TargetSite: site.ResourceID}); err != nil {
			return err
		}
		if err := tx.Create(ctx, &eim.RepeatedSchedule{Name: "nightly", ScheduleStatus: "SCHEDULE_STATUS_OS_UPDATE", DurationSeconds: 3600,
			CronMinutes: "0", CronHours: "2", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetRegionID: region.ResourceID}); err != nil {
			return err
		}
		for i := range n {
			h := &eim.Host{Name: fmt.Sprintf("h%d", i), UUID: fmt.Sprintf("4c4c4544-0000-4000-8000-%012x", i), SiteID: site.ResourceID,
				DesiredState: eim.HostStateOnboarded, CurrentState: eim.HostStateOnboarded, NodeSecretHash: hash, NodeCredGen: 1,
				HostStatus: "Running", HostStatusIndicator: eim.StatusIdle, CurrentPowerState: eim.PowerStateOn, HardwareDigest: "hw"}
			if err := tx.Create(ctx, h); err != nil {
				return err
			}
			if err := tx.Create(ctx, &eim.Instance{Name: h.Name, Kind: eim.InstanceKindMetal, HostID: h.ResourceID, OSID: os.ResourceID}); err != nil {
				return err
			}
			f.hosts = append(f.hosts, h.ResourceID)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	seen := make([]eim.LastSeen, len(f.hosts))
	for i, id := range f.hosts {
		seen[i] = eim.LastSeen{Project: f.project, HostID: id, At: time.Now()}
	}
	if err := st.SaveLastSeen(ctx, seen); err != nil {
		b.Fatal(err)
	}
	return f
}

// benchModules are the modules a heartbeat goes through, wired as eim
// server wires them, over st: sharing one host view.
type benchModules struct {
	view  *hostview.View
	sb    *southbound.Server
	tel   *telemetry.Service
	maint *maintenance.Service
	hosts *hostmgr.Service
	call  connect.UnaryFunc
}

func newBenchModules(f *benchFleet, st eim.Store) *benchModules {
	m := &benchModules{view: hostview.New(hostview.Options{Store: st})}
	m.sb = southbound.New(southbound.Options{Store: st, Issuer: f.iss, Hosts: m.view})
	m.tel = telemetry.New(telemetry.Options{Store: st, Hosts: m.view})
	m.maint = maintenance.New(maintenance.Options{Store: st, Hosts: m.view})
	m.hosts = hostmgr.New(hostmgr.Options{Store: st, Telemetry: m.tel, Maintenance: m.maint, Hosts: m.view,
		ReportIn: func(context.Context, *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
			return connect.NewResponse(&hostv1.ReportInResponse{}), nil
		}})
	m.call = m.sb.Interceptor().WrapUnary(func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		return m.hosts.Heartbeat(ctx, req.(*connect.Request[hostv1.HeartbeatRequest]))
	})
	return m
}

// run runs the modules' loops until the returned function is called.
func (m *benchModules) run() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{m.view.Run, m.sb.Run, m.tel.Run, m.maint.Run, m.hosts.Run} {
		wg.Go(func() { run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

// requests returns a heartbeat request of each host, with its node token.
func (f *benchFleet) requests(b *testing.B) []*connect.Request[hostv1.HeartbeatRequest] {
	out := make([]*connect.Request[hostv1.HeartbeatRequest], len(f.hosts))
	for i, id := range f.hosts {
		tok, _, err := f.iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(id), HostID: id, Project: f.project, Gen: 1}, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		req := connect.NewRequest(&hostv1.HeartbeatRequest{HardwareDigest: "hw",
			AgentHealth: &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}, NodeHealth: &hostv1.Health{State: hostv1.Health_STATE_HEALTHY}})
		req.Header().Set("Authorization", "Bearer "+tok)
		out[i] = req
	}
	return out
}

// BenchmarkHeartbeat is what a steady heartbeat of a known, unchanged host
// costs the server past the transport: node authentication, the host
// module, and the telemetry and maintenance versions, with every module
// following the feed. It reports the store transactions per heartbeat
// (none, once warm).
func BenchmarkHeartbeat(b *testing.B) {
	f := newBenchFleet(b, 1000)
	st := &readCounter{Store: f.store}
	m := newBenchModules(f, st)
	stop := m.run()
	defer stop()
	reqs := f.requests(b)
	ctx := b.Context()
	// Warm: every host answered from memory.
	for round := 0; ; round++ {
		before := st.txs.Load()
		for _, req := range reqs {
			if _, err := m.call(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		if st.txs.Load() == before && m.hosts.Restored() {
			break
		}
		if round == 1000 {
			b.Fatal("heartbeats still read the store after 1,000 rounds")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := st.txs.Load()
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := reqs[int(next.Add(1))%len(reqs)]
			if _, err := m.call(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(st.txs.Load()-before)/float64(b.N), "txs/op")
}

// BenchmarkRestart is what a restarted server reads before a fleet's
// heartbeats are answered from memory again: fresh modules on a store of
// 2,000 hosts, each host's first heartbeat (with authentication), until
// every host is answered without a store access. It reports the store
// transactions and the resources read, per host.
func BenchmarkRestart(b *testing.B) {
	const n = 2000
	f := newBenchFleet(b, n)
	reqs := f.requests(b)
	ctx := b.Context()
	var txs, rows int64
	b.ResetTimer()
	for range b.N {
		st := &readCounter{Store: f.store}
		m := newBenchModules(f, st)
		stop := m.run()
		for !m.hosts.Restored() {
			time.Sleep(time.Millisecond)
		}
		for {
			before := st.txs.Load()
			for _, req := range reqs {
				if _, err := m.call(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			if st.txs.Load() == before {
				break
			}
		}
		stop()
		txs += st.txs.Load()
		rows += st.rows.Load()
	}
	per := float64(b.N * n)
	b.ReportMetric(float64(txs)/per, "txs/host")
	b.ReportMetric(float64(rows)/per, "rows/host")
}
