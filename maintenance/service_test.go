package maintenance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/maintenance"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var pgURL string

func TestMain(m *testing.M) {
	code := func() int {
		if base := os.Getenv(storetest.PostgresEnv); base != "" {
			u, drop, err := storetest.PostgresDB(base, "eim_maintenance")
			if err != nil {
				fmt.Fprintln(os.Stderr, "maintenance tests:", err)
				return 1
			}
			defer drop()
			pgURL = u
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "maintenance tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

type env struct {
	t     *testing.T
	ctx   context.Context
	store eim.Store
	inv   *inventory.Service
	svc   *maintenance.Service
	proj  string
	now   time.Time
}

var seq atomic.Int64

// run runs f on SQLite and, when configured, PostgreSQL.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	dsns := map[string]func(t *testing.T) string{"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "eim.db") }}
	if pgURL != "" {
		dsns["postgres"] = func(*testing.T) string { return pgURL }
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			st, err := sqlstore.Open(ctx, dsn(t), sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			inv := inventory.New(st, inventory.Options{})
			proj := fmt.Sprintf("m%d-%d", time.Now().UnixNano(), seq.Add(1))
			if _, err := inv.CreateProject(ctx, proj, ""); err != nil {
				t.Fatal(err)
			}
			e := &env{t: t, ctx: ctx, store: st, inv: inv, proj: proj, now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
			e.svc = maintenance.New(maintenance.Options{Store: st, Now: func() time.Time { return e.now }})
			f(t, e)
		})
	}
}

// start follows the feed until the test ends.
func (e *env) start() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.svc.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

func (e *env) create(r eim.Resource) string {
	e.t.Helper()
	out, err := e.inv.Create(e.ctx, e.proj, r)
	if err != nil {
		e.t.Fatalf("create %s: %v", r.ResourceKind(), err)
	}
	return out.Base().ResourceID
}

// patch sets one writable field through the inventory, as a PATCH does.
func (e *env) patch(k eim.Kind, id, field string, set func(eim.Resource)) {
	e.t.Helper()
	r, err := e.inv.Get(e.ctx, e.proj, k, id)
	if err != nil {
		e.t.Fatal(err)
	}
	set(r)
	if _, err := e.inv.Update(e.ctx, e.proj, r, []string{field}); err != nil {
		e.t.Fatalf("patch %s: %v", id, err)
	}
}

func (e *env) os(name, version, typ string) string {
	return e.create(&eim.OS{Name: name + "-" + version, ProfileName: name, ImageID: version, OsType: eim.OsType(typ),
		ImageURL: "https://images.example/" + name + "-" + version + ".raw.gz", Sha256: strings.Repeat("ab", 32),
		SecurityFeature: "SECURITY_FEATURE_NONE", Architecture: "x86_64"})
}

func (e *env) node(hostID string) context.Context {
	return southbound.WithNode(e.ctx, southbound.Node{HostID: hostID, Project: e.proj})
}

func (e *env) plan(hostID string) *maintenancev1.GetPlanResponse {
	e.t.Helper()
	resp, err := e.svc.GetPlan(e.node(hostID), connect.NewRequest(&maintenancev1.GetPlanRequest{}))
	if err != nil {
		e.t.Fatalf("GetPlan: %v", err)
	}
	return resp.Msg
}

func scheduleIDs(p *maintenancev1.GetPlanResponse) string {
	var ids []string
	for _, w := range p.Windows {
		ids = append(ids, w.ScheduleId+"@"+w.TargetId)
	}
	return strings.Join(ids, ",")
}

// A host's plan holds the schedules that target it, its site and every
// region above the site — the original honoured host targets only — and
// none of others; it follows changes through the feed.
func TestPlanScheduleTargets(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.start()
		top := e.create(&eim.Region{Name: "eu"})
		mid := e.create(&eim.Region{Name: "de", ParentID: top})
		other := e.create(&eim.Region{Name: "us"})
		site := e.create(&eim.Site{Name: "berlin-1", RegionID: mid})
		host := e.create(&eim.Host{Name: "edge", UUID: "4c4c4544-0000-4000-8000-00000000aa01", SiteID: site})
		e.create(&eim.Host{Name: "other", UUID: "4c4c4544-0000-4000-8000-00000000aa02"})

		if p := e.plan(host); len(p.Windows) != 0 || p.Policy != nil || p.Version == "" {
			t.Fatalf("empty plan: %v", p)
		}
		v0 := e.svc.Version(e.ctx, e.proj, host)

		sched := func(name, target string, field string) string {
			s := &eim.SingleSchedule{Name: name, ScheduleStatus: "SCHEDULE_STATUS_OS_UPDATE", StartSeconds: uint32(e.now.Unix())}
			switch field {
			case "host":
				s.TargetHostID = target
			case "site":
				s.TargetSiteID = target
			case "region":
				s.TargetRegionID = target
			}
			return e.create(s)
		}
		onTop := sched("top", top, "region")
		onMid := sched("mid", mid, "region")
		onSite := sched("site", site, "site")
		onHost := sched("host", host, "host")
		sched("other-region", other, "region")
		rep := e.create(&eim.RepeatedSchedule{Name: "nightly", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 3600,
			CronMinutes: "0", CronHours: "2", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "1,2", TargetSiteID: site})

		var want []string
		for _, x := range [][2]string{{onTop, top}, {onMid, mid}, {onSite, site}, {onHost, host}, {rep, site}} {
			want = append(want, x[0]+"@"+x[1])
		}
		waitFor(t, func() bool { return e.svc.Version(e.ctx, e.proj, host) != v0 })
		p := e.plan(host)
		if got := scheduleIDs(p); got != strings.Join(sorted(want), ",") {
			t.Fatalf("windows %s, want %s", got, strings.Join(sorted(want), ","))
		}
		for _, w := range p.Windows {
			if w.ScheduleId == rep {
				r := w.GetRepeated()
				if r == nil || r.DurationSeconds != 3600 || r.Hours != "2" || r.DayOfWeek != "1,2" || w.Purpose != maintenancev1.Window_PURPOSE_MAINTENANCE {
					t.Fatalf("repeated window %v", w)
				}
			} else if w.GetSingle().GetStartSeconds() != e.now.Unix() || w.Purpose != maintenancev1.Window_PURPOSE_OS_UPDATE {
				t.Fatalf("single window %v", w)
			}
		}

		// The node has this version: unchanged.
		resp, err := e.svc.GetPlan(e.node(host), connect.NewRequest(&maintenancev1.GetPlanRequest{Version: p.Version}))
		if err != nil || !resp.Msg.Unchanged || len(resp.Msg.Windows) != 0 {
			t.Fatalf("same version: %v, %v", resp, err)
		}

		// The host leaves the site: only its own schedule is left.
		v1 := p.Version
		e.patch(eim.KindHost, host, "siteId", func(r eim.Resource) { r.(*eim.Host).SiteID = "" })
		waitFor(t, func() bool { return e.svc.Version(e.ctx, e.proj, host) != v1 })
		if got := scheduleIDs(e.plan(host)); got != onHost+"@"+host {
			t.Fatalf("without a site: windows %s", got)
		}
	})
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// An instance's policy is in its host's plan: TARGET with its target OS or
// mutable fields, LATEST with the newest version of the running OS's
// profile.
func TestPlanPolicy(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.start()
		v1 := e.os("emt", "3.0.20250101.0100", "OS_TYPE_IMMUTABLE")
		e.os("emt", "3.0.20240101.0100", "OS_TYPE_IMMUTABLE") // older
		host := e.create(&eim.Host{Name: "edge", UUID: "4c4c4544-0000-4000-8000-00000000bb01"})
		latest := e.create(&eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest})
		inst := e.create(&eim.Instance{Name: "i", HostID: host, OSID: v1, OSUpdatePolicyID: latest})

		p := e.plan(host)
		if p.GetCurrentOs().GetId() != v1 || p.GetCurrentOs().GetType() != maintenancev1.OperatingSystem_TYPE_IMMUTABLE {
			t.Fatalf("current OS %v", p.CurrentOs)
		}
		if p.GetPolicy().GetKind() != maintenancev1.UpdatePolicy_KIND_LATEST || p.GetPolicy().GetTargetOs().GetId() != v1 {
			t.Fatalf("LATEST with nothing newer: %v", p.Policy)
		}
		// A newer version appears: the plan targets it.
		v2 := e.os("emt", "3.0.20250717.0718", "OS_TYPE_IMMUTABLE")
		waitFor(t, func() bool {
			pl, _, err := e.svc.Plan(e.ctx, e.proj, host)
			return err == nil && pl.GetPolicy().GetTargetOs().GetId() == v2
		})
		if t2 := e.plan(host).Policy.TargetOs; t2.Version != "3.0.20250717.0718" || !strings.HasSuffix(t2.ImageUrl, ".raw.gz") || len(t2.ImageSha256) != 64 {
			t.Fatalf("target %v", t2)
		}

		// The instance changes policy (through the API): a mutable TARGET.
		target := e.create(&eim.OSUpdatePolicy{Name: "pkgs", UpdatePolicy: eim.UpdatePolicyTarget,
			UpdatePackages: "curl\nopenssl", UpdateKernelCommand: "quiet", UpdateSources: []string{"Types: deb\nURIs: http://deb.example\nSuites: stable\nComponents: main"}})
		e.patch(eim.KindInstance, inst, "osUpdatePolicyID", func(r eim.Resource) { r.(*eim.Instance).OSUpdatePolicyID = target })
		waitFor(t, func() bool {
			pl, _, err := e.svc.Plan(e.ctx, e.proj, host)
			return err == nil && pl.GetPolicy().GetId() == target
		})
		pol := e.plan(host).Policy
		if pol.Kind != maintenancev1.UpdatePolicy_KIND_TARGET || pol.Packages != "curl\nopenssl" || pol.KernelCommand != "quiet" || len(pol.Sources) != 1 || pol.TargetOs != nil {
			t.Fatalf("mutable policy %v", pol)
		}
	})
}

// Reports: the instance's update status follows; a run is opened by the
// first report of an update and closed by its last; a repeated report
// changes nothing; an image update switches the instance's OS; bad
// reports are refused with the field named.
func TestReportUpdateStatus(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.start()
		v1 := e.os("emt", "1.0", "OS_TYPE_IMMUTABLE")
		v2 := e.os("emt", "2.0", "OS_TYPE_IMMUTABLE")
		host := e.create(&eim.Host{Name: "edge", UUID: "4c4c4544-0000-4000-8000-00000000cc01"})
		pol := e.create(&eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest})
		inst := e.create(&eim.Instance{Name: "i", HostID: host, OSID: v1, OSUpdatePolicyID: pol})
		report := func(s maintenancev1.ReportUpdateStatusRequest_Status, id, osID, msg string) error {
			_, err := e.svc.ReportUpdateStatus(e.node(host), connect.NewRequest(&maintenancev1.ReportUpdateStatusRequest{
				Status: s, UpdateId: id, PolicyId: pol, OsId: osID, Message: msg, LogJson: `{"output":"ok"}`}))
			return err
		}
		instance := func() *eim.Instance {
			r, err := e.inv.Get(e.ctx, e.proj, eim.KindInstance, inst)
			if err != nil {
				t.Fatal(err)
			}
			return r.(*eim.Instance)
		}
		runs := func() []*eim.OSUpdateRun {
			var out []*eim.OSUpdateRun
			err := e.store.View(e.ctx, e.proj, func(tx eim.Tx) error {
				items, _, err := tx.List(e.ctx, eim.KindOSUpdateRun, eim.Query{})
				for _, r := range items {
					out = append(out, r.(*eim.OSUpdateRun))
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}

		if err := report(maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADING, "upd-1", v2, ""); err != nil {
			t.Fatal(err)
		}
		if in := instance(); in.UpdateStatus != "Downloading artifacts" || in.UpdateStatusIndicator != eim.StatusInProgress || in.UpdateStatusTimestamp != uint64(e.now.Unix()) {
			t.Fatalf("instance %q %s %d", in.UpdateStatus, in.UpdateStatusIndicator, in.UpdateStatusTimestamp)
		}
		rs := runs()
		if len(rs) != 1 || !rs[0].Open() || rs[0].StartTime != uint64(e.now.Unix()) || rs[0].InstanceID != inst || rs[0].AppliedPolicyID != pol || rs[0].Name != "upd-1" {
			t.Fatalf("runs %+v", rs)
		}
		e.now = e.now.Add(time.Minute)
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADED, "upd-1", v2, "")
		e.now = e.now.Add(5 * time.Minute)
		if err := report(maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, "upd-1", v2, "Update completed: running slot b"); err != nil {
			t.Fatal(err)
		}
		in := instance()
		if in.UpdateStatus != "Update completed" || in.UpdateStatusIndicator != eim.StatusIdle || in.OSID != v2 {
			t.Fatalf("after UPDATED: %q %s, OS %s (want %s)", in.UpdateStatus, in.UpdateStatusIndicator, in.OSID, v2)
		}
		rs = runs()
		if len(rs) != 1 || rs[0].Open() || rs[0].EndTime != uint64(e.now.Unix()) || rs[0].Status != "Update completed" || rs[0].StatusDetails != `{"output":"ok"}` {
			t.Fatalf("run after UPDATED: %+v", rs[0])
		}
		// The plan names the new OS at once.
		if p, _, _ := e.svc.Plan(e.ctx, e.proj, host); p.GetCurrentOs().GetId() != v2 {
			t.Fatalf("plan's current OS %s, want %s", p.GetCurrentOs().GetId(), v2)
		}

		// Repeated: nothing changes.
		rev, _ := e.store.Revision(e.ctx)
		e.now = e.now.Add(time.Minute)
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, "upd-1", v2, "")
		if r2, _ := e.store.Revision(e.ctx); r2 != rev {
			t.Errorf("a repeated report wrote %d events", r2-rev)
		}

		// A failure with a message: the status says it, a new run.
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "upd-2", "", "Update failed: sha256 mismatch")
		if in := instance(); in.UpdateStatus != "Update failed: sha256 mismatch" || in.UpdateStatusIndicator != eim.StatusError {
			t.Fatalf("after FAILED: %q", in.UpdateStatus)
		}
		if rs := runs(); len(rs) != 2 {
			t.Fatalf("%d runs, want 2", len(rs))
		}
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_UP_TO_DATE, "upd-3", "", "")
		if in := instance(); in.UpdateStatus != "No new updates available" || len(runs()) != 2 {
			t.Fatalf("after UP_TO_DATE: %q, %d runs", in.UpdateStatus, len(runs()))
		}

		for _, c := range []struct {
			req  *maintenancev1.ReportUpdateStatusRequest
			want string
		}{
			{&maintenancev1.ReportUpdateStatusRequest{Status: 99, UpdateId: "u"}, "status"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 1, UpdateId: "has space"}, "update_id"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 1, UpdateId: "u", PolicyId: "policy-1"}, "policy_id"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 5, UpdateId: "u", OsId: "os-zz"}, "os_id"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 1, UpdateId: "u", OsId: v2}, "os_id"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 1, UpdateId: "u", LogJson: "{"}, "log_json"},
			{&maintenancev1.ReportUpdateStatusRequest{Status: 1, UpdateId: "u", Message: strings.Repeat("x", 1025)}, "message"},
		} {
			_, err := e.svc.ReportUpdateStatus(e.node(host), connect.NewRequest(c.req))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: %v, want InvalidArgument naming %s", c.req, err, c.want)
			}
		}
		// An OS of another project is not found there.
		_, err := e.svc.ReportUpdateStatus(e.node(host), connect.NewRequest(&maintenancev1.ReportUpdateStatusRequest{
			Status: maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, UpdateId: "upd-4", OsId: "os-0000dead"}))
		if connect.CodeOf(err) != connect.CodeFailedPrecondition {
			t.Errorf("unknown OS: %v", err)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkVersion is a heartbeat's cost in the maintenance module: the
// plan's version from memory while the feed is followed, against reading
// it from the store (SQLite) as before Run.
func BenchmarkVersion(b *testing.B) {
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
	must := func(r eim.Resource, err error) string {
		if err != nil {
			b.Fatal(err)
		}
		return r.Base().ResourceID
	}
	region := must(inv.Create(ctx, p.Name, &eim.Region{Name: "r"}))
	site := must(inv.Create(ctx, p.Name, &eim.Site{Name: "s", RegionID: region}))
	host := must(inv.Create(ctx, p.Name, &eim.Host{Name: "h", UUID: "4c4c4544-0000-4000-8000-00000000dd01", SiteID: site}))
	osID := must(inv.Create(ctx, p.Name, &eim.OS{Name: "emt", ProfileName: "emt", ImageID: "1.0", OsType: "OS_TYPE_IMMUTABLE",
		ImageURL: "https://images.example/emt.raw.gz", Sha256: strings.Repeat("ab", 32), SecurityFeature: "SECURITY_FEATURE_NONE", Architecture: "x86_64"}))
	pol := must(inv.Create(ctx, p.Name, &eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest}))
	must(inv.Create(ctx, p.Name, &eim.Instance{Name: "i", HostID: host, OSID: osID, OSUpdatePolicyID: pol}))
	must(inv.Create(ctx, p.Name, &eim.RepeatedSchedule{Name: "nightly", ScheduleStatus: "SCHEDULE_STATUS_OS_UPDATE", DurationSeconds: 3600,
		CronMinutes: "0", CronHours: "2", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetRegionID: region}))

	b.Run("uncached", func(b *testing.B) {
		svc := maintenance.New(maintenance.Options{Store: st})
		b.ReportAllocs()
		for b.Loop() {
			if svc.Version(ctx, p.Name, host) == "" {
				b.Fatal("no version")
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		svc := maintenance.New(maintenance.Options{Store: st})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); svc.Run(rctx) }()
		defer func() { cancel(); <-done }()
		// Warm: the feed followed, the tree and the host's facts cached.
		for range 100 {
			svc.Version(ctx, p.Name, host)
			time.Sleep(time.Millisecond)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if svc.Version(ctx, p.Name, host) == "" {
					b.Error("no version")
				}
			}
		})
	})
}

// readCounter counts the store's read transactions.
type readCounter struct {
	eim.Store
	n atomic.Int64
}

func (s *readCounter) View(ctx context.Context, project string, fn func(eim.Tx) error) error {
	s.n.Add(1)
	return s.Store.View(ctx, project, fn)
}

// A cached plan costs no database access; a new instance of a host
// without one, its instance's change and its host's move to another site
// each reach the plan (the last through the shared host view).
func TestPlanCached(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		st := &readCounter{Store: e.store}
		hosts := hostview.New(hostview.Options{Store: st})
		e.svc = maintenance.New(maintenance.Options{Store: st, Hosts: hosts, Now: func() time.Time { return e.now }})
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- hosts.Run(ctx) }()
		defer func() { cancel(); <-done }()
		e.start()
		region := e.create(&eim.Region{Name: "eu"})
		site := e.create(&eim.Site{Name: "s", RegionID: region})
		host := e.create(&eim.Host{Name: "edge", UUID: "4c4c4544-0000-4000-8000-00000000cc01", SiteID: site})
		e.create(&eim.SingleSchedule{Name: "w", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: uint32(e.now.Unix()), TargetRegionID: region})
		pol := e.create(&eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest})

		var v0 string
		waitFor(t, func() bool {
			v0 = e.svc.Version(e.ctx, e.proj, host)
			before := st.n.Load()
			for range 10 {
				e.svc.Version(e.ctx, e.proj, host)
			}
			return v0 != "" && st.n.Load() == before
		})

		in := e.create(&eim.Instance{Name: "i", HostID: host, OSID: e.os("emt", "1.0", "OS_TYPE_IMMUTABLE")})
		var v1 string
		waitFor(t, func() bool { v1 = e.svc.Version(e.ctx, e.proj, host); return v1 != v0 })
		e.patch(eim.KindInstance, in, "osUpdatePolicyID", func(r eim.Resource) { r.(*eim.Instance).OSUpdatePolicyID = pol })
		var v2 string
		waitFor(t, func() bool { v2 = e.svc.Version(e.ctx, e.proj, host); return v2 != v1 })
		if p := e.plan(host); p.Policy == nil {
			t.Fatalf("plan after the policy: %v", p)
		}
		e.patch(eim.KindHost, host, "siteId", func(r eim.Resource) { r.(*eim.Host).SiteID = "" })
		if got := e.svc.Version(e.ctx, e.proj, host); got == v2 || len(e.plan(host).Windows) != 0 {
			t.Fatalf("right after the host left its site (this process's write): version %s, windows %v", got, e.plan(host).Windows)
		}
	})
}
