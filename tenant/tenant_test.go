package tenant_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/tenant"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "tenant tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is one test's store (a SQLite file or a fresh PostgreSQL database)
// and the inventory over it.
type env struct {
	t     testing.TB
	ctx   context.Context
	store eim.Store
	inv   *inventory.Service
}

func engines() []string {
	if os.Getenv(storetest.PostgresEnv) != "" {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
}

// run runs f on each engine.
func run(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, engine := range engines() {
		t.Run(engine, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "eim.db")
			if engine == "postgres" {
				dsn = storetest.PostgresURL(t)
			}
			st, err := sqlstore.Open(t.Context(), dsn, sqlstore.Options{})
			if err != nil {
				t.Fatalf("open store: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			f(t, &env{t: t, ctx: t.Context(), store: st, inv: inventory.New(st, inventory.Options{})})
		})
	}
}

func (e *env) project(name string) {
	e.t.Helper()
	if _, err := e.inv.CreateProject(e.ctx, name, ""); err != nil {
		e.t.Fatalf("create project %s: %v", name, err)
	}
}

func (e *env) create(project string, r eim.Resource) eim.Resource {
	e.t.Helper()
	out, err := e.inv.Create(e.ctx, project, r)
	if err != nil {
		e.t.Fatalf("create %s in %s: %v", r.ResourceKind(), project, err)
	}
	return out
}

func (e *env) opts(def tenant.Defaults) tenant.Options {
	return tenant.Options{Store: e.store, Inventory: e.inv, Defaults: def, Poll: 20 * time.Millisecond, RetryWait: 20 * time.Millisecond, Batch: 7}
}

// groups returns the project's telemetry groups by "variant/name".
func (e *env) groups(project string) map[string]*eim.TelemetryGroup {
	e.t.Helper()
	page, err := e.inv.List(e.ctx, project, eim.KindTelemetryGroup, inventory.ListQuery{PageSize: 100})
	if err != nil {
		e.t.Fatalf("list groups: %v", err)
	}
	out := map[string]*eim.TelemetryGroup{}
	for _, r := range page.Items {
		g := r.(*eim.TelemetryGroup)
		k := "logs/" + g.Name
		if g.Type == eim.TelemetryMetrics {
			k = "metrics/" + g.Name
		}
		if out[k] != nil {
			e.t.Fatalf("group %s twice in %s", k, project)
		}
		out[k] = g
	}
	return out
}

func (e *env) count(project string, k eim.Kind) int {
	e.t.Helper()
	n := 0
	err := e.store.View(e.ctx, project, func(tx eim.Tx) error {
		var err error
		n, err = tx.Count(e.ctx, k, eim.Query{})
		return err
	})
	if err != nil {
		e.t.Fatalf("count %s: %v", k, err)
	}
	return n
}

// eventually polls cond until it returns nil or 30 s pass.
func eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
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

// goRun runs fn until the test ends, and waits for it then.
func goRun(t *testing.T, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := fn(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// A new project gets every default of the definition, through the
// change feed, once; the tenant's condition says so.
func TestDefaultsOfANewProject(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		def := tenant.Builtin()
		goRun(t, tenant.NewReconciler(e.opts(def)).Run)
		e.project("acme")
		eventually(t, "defaults of acme", func() error {
			if n := len(e.groups("acme")); n != len(def.Groups) {
				return fmt.Errorf("got %d groups, want %d", n, len(def.Groups))
			}
			return nil
		})
		got := e.groups("acme")
		for _, g := range def.Groups {
			k := "logs/" + g.Name
			if g.Type == eim.TelemetryMetrics {
				k = "metrics/" + g.Name
			}
			r := got[k]
			if r == nil || r.CollectorKind != g.Collector || !slices.Equal(r.Groups, g.Items) {
				t.Errorf("group %s: got %+v, want %+v", k, r, g)
			}
		}
		for _, want := range []string{"logs/SystemD", "logs/Agents", "metrics/Disk_Usage_and_Health", "metrics/Opentelemetry_Cluster", "logs/Opentelemetry_Cluster"} {
			if got[want] == nil {
				t.Errorf("no default group %s", want)
			}
		}
		if d := got["metrics/Disk_Usage_and_Health"]; d != nil && !slices.Equal(d.Groups, []string{"disk", "diskio", "smart"}) {
			t.Errorf("Disk_Usage_and_Health: got %v", d.Groups)
		}
		if id, err := e.inv.FindDefaultProvider(e.ctx, "acme"); err != nil || id == "" {
			t.Errorf("default provider: got %q, %v", id, err)
		}
		eventually(t, "condition", func() error {
			st, err := e.inv.ProjectStatus(e.ctx, "acme", []string{tenant.Module})
			if err != nil {
				return err
			}
			if !st.Ready || len(st.Conditions) != 1 || !st.Conditions[0].Ready || !strings.Contains(st.Conditions[0].Message, fmt.Sprintf("version %d", def.Version)) {
				return fmt.Errorf("got %+v", st)
			}
			return nil
		})
		// Again: nothing more.
		r := tenant.NewReconciler(e.opts(def))
		if err := r.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(e.groups("acme")); n != len(def.Groups) {
			t.Errorf("after a second pass: %d groups, want %d", n, len(def.Groups))
		}
		// A fresh project is not empty for DELETE's sake: its defaults do
		// not count.
		if err := e.inv.DeleteProject(e.ctx, "acme", false); err != nil {
			t.Errorf("delete a project holding only its defaults: %v", err)
		}
	})
}

// A new version of the definition is applied to existing projects: what
// they miss is created, a default as it was written follows the new
// definition, and one a user changed or deleted is left alone.
func TestDefaultsNewVersion(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		host := eim.TelemetryCollectorKind("TELEMETRY_COLLECTOR_KIND_HOST")
		v1 := tenant.Defaults{Version: 1, Provider: true, Groups: []tenant.Group{
			{Type: eim.TelemetryLogs, Name: "SystemD", Collector: host, Items: []string{"systemd"}},
			{Type: eim.TelemetryLogs, Name: "Agents", Collector: host, Items: []string{"eim-agent"}},
			{Type: eim.TelemetryLogs, Name: "Opentelemetry", Collector: host, Items: []string{"opentelemetry"}},
			{Type: eim.TelemetryMetrics, Name: "Network_Usage", Collector: host, Items: []string{"net"}},
		}}
		e.project("acme")
		e.project("beta")
		if err := tenant.NewReconciler(e.opts(v1)).Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		g := e.groups("acme")
		if len(g) != 4 {
			t.Fatalf("v1: got %d groups, want 4", len(g))
		}
		// A user changes SystemD and deletes Opentelemetry and the default
		// provider of acme.
		sd := g["logs/SystemD"]
		if _, err := e.inv.Update(e.ctx, "acme", &eim.TelemetryGroup{Meta: eim.Meta{ResourceID: sd.ResourceID}, Type: eim.TelemetryLogs, Groups: []string{"systemd", "kernel"}}, []string{"groups"}); err != nil {
			t.Fatal(err)
		}
		if err := e.inv.Delete(e.ctx, "acme", eim.KindTelemetryGroup, g["logs/Opentelemetry"].ResourceID); err != nil {
			t.Fatal(err)
		}
		pid, _ := e.inv.FindDefaultProvider(e.ctx, "acme")
		if err := e.inv.Delete(e.ctx, "acme", eim.KindProvider, pid); err != nil {
			t.Fatal(err)
		}
		// v2 changes all three, and adds one.
		v2 := tenant.Defaults{Version: 2, Provider: true, Groups: []tenant.Group{
			{Type: eim.TelemetryLogs, Name: "SystemD", Collector: host, Items: []string{"systemd", "journald"}},
			{Type: eim.TelemetryLogs, Name: "Agents", Collector: host, Items: []string{"eim-agent", "eim-agent-update"}},
			{Type: eim.TelemetryLogs, Name: "Opentelemetry", Collector: host, Items: []string{"otel"}},
			{Type: eim.TelemetryMetrics, Name: "Network_Usage", Collector: host, Items: []string{"net"}},
			{Type: eim.TelemetryMetrics, Name: "Ipmi_Sensor", Collector: host, Items: []string{"ipmi_sensor"}},
		}}
		if err := tenant.NewReconciler(e.opts(v2)).Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		g = e.groups("acme")
		if len(g) != 4 {
			t.Errorf("acme after v2: got %d groups (%v), want 4 (Opentelemetry stays deleted)", len(g), keys(g))
		}
		if got := g["logs/SystemD"]; got == nil || !slices.Equal(got.Groups, []string{"systemd", "kernel"}) {
			t.Errorf("SystemD changed by the user: got %+v, want it as the user left it", got)
		}
		if got := g["logs/Agents"]; got == nil || !slices.Equal(got.Groups, []string{"eim-agent", "eim-agent-update"}) {
			t.Errorf("Agents as written: got %+v, want v2's", got)
		}
		if g["logs/Opentelemetry"] != nil {
			t.Errorf("Opentelemetry deleted by the user came back")
		}
		if got := g["metrics/Ipmi_Sensor"]; got == nil {
			t.Errorf("Ipmi_Sensor, new in v2: missing")
		}
		if id, _ := e.inv.FindDefaultProvider(e.ctx, "acme"); id != "" {
			t.Errorf("default provider deleted by the user came back: %s", id)
		}
		// beta, untouched by users, is v2 throughout.
		g = e.groups("beta")
		if len(g) != 5 || !slices.Equal(g["logs/SystemD"].Groups, []string{"systemd", "journald"}) || !slices.Equal(g["logs/Opentelemetry"].Groups, []string{"otel"}) {
			t.Errorf("beta after v2: got %v", keys(g))
		}
		if v, _, err := e.inv.AppliedDefaults(e.ctx, "beta"); err != nil || v != 2 {
			t.Errorf("beta's version: got %d, %v; want 2", v, err)
		}
		// A group of the project's own with a default's name is adopted,
		// never changed.
		e.project("gamma")
		e.create("gamma", &eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "SystemD", CollectorKind: host, Groups: []string{"mine"}})
		if err := tenant.NewReconciler(e.opts(v2)).Reconcile(e.ctx, "gamma"); err != nil {
			t.Fatal(err)
		}
		v3 := v2
		v3.Version = 3
		v3.Groups = slices.Clone(v2.Groups)
		v3.Groups[0].Items = []string{"systemd", "v3"}
		if err := tenant.NewReconciler(e.opts(v3)).Reconcile(e.ctx, "gamma"); err != nil {
			t.Fatal(err)
		}
		if got := e.groups("gamma")["logs/SystemD"]; got == nil || !slices.Equal(got.Groups, []string{"mine"}) {
			t.Errorf("gamma's own SystemD: got %+v", got)
		}
	})
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A project shows the conditions of the initialising modules that run: a
// module absent from the deployment is not waited for.
func TestReadinessConditions(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.project("acme")
		both := []string{"os", tenant.Module}
		st, err := e.inv.ProjectStatus(e.ctx, "acme", both)
		if err != nil || st.Ready || len(st.Conditions) != 2 || st.Conditions[0].Ready || !strings.Contains(st.Conditions[0].Message, "waiting for module os") {
			t.Fatalf("before any module: got %+v, %v", st, err)
		}
		if err := tenant.NewReconciler(e.opts(tenant.Builtin())).Reconcile(e.ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		st, _ = e.inv.ProjectStatus(e.ctx, "acme", both)
		if st.Ready || !st.Conditions[1].Ready || st.Conditions[0].Ready {
			t.Errorf("tenant done, os not: got %+v", st)
		}
		// Without the os module in the deployment the project is ready.
		st, _ = e.inv.ProjectStatus(e.ctx, "acme", []string{tenant.Module})
		if !st.Ready || len(st.Conditions) != 1 {
			t.Errorf("os absent: got %+v, want ready with the tenant's condition", st)
		}
		// The os module's catalog manager records its condition.
		cat, err := oscatalog.Load(oscatalog.Shipped(), "")
		if err != nil {
			t.Fatal(err)
		}
		m := oscatalog.New(oscatalog.Options{Store: e.store, Catalog: cat})
		m.Pass(e.ctx)
		st, _ = e.inv.ProjectStatus(e.ctx, "acme", both)
		if !st.Ready || !st.Conditions[0].Ready || !strings.Contains(st.Conditions[0].Message, "OS catalog loaded") {
			t.Errorf("both done: got %+v", st)
		}
		since := st.Conditions[1].Since
		// A condition recorded again keeps its since while it holds.
		if err := e.inv.SetCondition(e.ctx, "acme", eim.Condition{Module: tenant.Module, Ready: true, Message: "again"}); err != nil {
			t.Fatal(err)
		}
		st, _ = e.inv.ProjectStatus(e.ctx, "acme", both)
		if !st.Conditions[1].Since.Equal(since.Time) || st.Conditions[1].Message != "again" {
			t.Errorf("condition recorded again: got %+v, want since %v kept", st.Conditions[1], since)
		}
		if err := e.inv.SetCondition(e.ctx, "nope", eim.Condition{Module: "os", Ready: true}); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Errorf("condition of a missing project: got %v, want ENOTFOUND", err)
		}
		// A crash after the record of the defaults, before the condition:
		// the next pass records it.
		e.project("crashed")
		if err := e.inv.SaveAppliedDefaults(e.ctx, "crashed", tenant.Builtin().Version, nil); err != nil {
			t.Fatal(err)
		}
		if err := tenant.NewReconciler(e.opts(tenant.Builtin())).Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		if st, _ := e.inv.ProjectStatus(e.ctx, "crashed", []string{tenant.Module}); !st.Ready {
			t.Errorf("condition after a crash between the writes: got %+v, want ready", st)
		}
	})
}

// fixture is a project holding one of everything, with an onboarded host
// (credentials issued) that has an instance.
type fixture struct {
	hosts     []string
	instances []string
}

func (e *env) fill(project string, hosts int) fixture {
	e.t.Helper()
	var f fixture
	parent := e.create(project, &eim.Region{Name: "eu"}).(*eim.Region)
	child := e.create(project, &eim.Region{Name: "de", ParentID: parent.ResourceID}).(*eim.Region)
	site := e.create(project, &eim.Site{Name: "fra", RegionID: child.ResourceID}).(*eim.Site)
	prov := e.create(project, &eim.Provider{Name: "lenovo", ProviderKind: "PROVIDER_KIND_BAREMETAL", APIEndpoint: "https://x"}).(*eim.Provider)
	_ = prov
	osr := e.create(project, &eim.OS{Name: "ubuntu", Sha256: strings.Repeat("a", 64), OsType: "OS_TYPE_MUTABLE"}).(*eim.OS)
	la := e.create(project, &eim.LocalAccount{Username: "ops", SSHKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxkZXYta2V5LWZvci10ZXN0cw== u@h"}).(*eim.LocalAccount)
	cc := e.create(project, &eim.CustomConfig{Name: "cfg", Config: "#cloud-config"}).(*eim.CustomConfig)
	pol := e.create(project, &eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: "UPDATE_POLICY_LATEST"}).(*eim.OSUpdatePolicy)
	wl := e.create(project, &eim.Workload{Kind: eim.WorkloadKindCluster, Name: "w", ExternalID: "x"}).(*eim.Workload)
	group := e.create(project, &eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "mine", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST", Groups: []string{"a"}}).(*eim.TelemetryGroup)
	e.create(project, &eim.TelemetryProfile{Type: eim.TelemetryLogs, LogsGroupID: group.ResourceID, LogLevel: "SEVERITY_LEVEL_INFO", TargetSite: site.ResourceID})
	e.create(project, &eim.RepeatedSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 60, CronMinutes: "0",
		CronHours: "*", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*", TargetRegionID: parent.ResourceID})
	for i := range hosts {
		h, err := e.inv.RegisterHost(e.ctx, project, inventory.HostRegistration{Name: fmt.Sprintf("h%d", i), SerialNumber: fmt.Sprintf("SER%s%04d", strings.ToUpper(project[:2]), i), AutoOnboard: true})
		if err != nil {
			e.t.Fatalf("register host: %v", err)
		}
		// Credentials issued, as onboarding does; the host placed.
		err = e.store.Update(e.ctx, project, func(tx eim.Tx) error {
			w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, NodeSecretHash: "hash", NodeCredGen: 1, CurrentState: eim.HostStateOnboarded, SiteID: site.ResourceID}
			return tx.UpdateFields(e.ctx, w, "node_secret_hash", "node_cred_gen", "currentState", "siteId")
		})
		if err != nil {
			e.t.Fatal(err)
		}
		f.hosts = append(f.hosts, h.ResourceID)
		if i%2 == 0 {
			in := e.create(project, &eim.Instance{Name: "i", HostID: h.ResourceID, OSID: osr.ResourceID, LocalAccountID: la.ResourceID,
				CustomConfigIDs: []string{cc.ResourceID}, OSUpdatePolicyID: pol.ResourceID}).(*eim.Instance)
			f.instances = append(f.instances, in.ResourceID)
			e.create(project, &eim.WorkloadMember{Kind: eim.WorkloadMemberKindClusterNode, WorkloadID: wl.ResourceID, InstanceID: in.ResourceID})
			e.create(project, &eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 10, TargetHostID: h.ResourceID})
		}
	}
	return f
}

// phaseOf returns the index of the deletion phase that deletes kind k.
func phaseOf(k eim.Kind) int {
	for i, p := range inventory.DeletionPhases {
		if slices.Contains(p.Kinds, k) || (p.Name == inventory.PhaseClusters && (k == eim.KindCluster || k == eim.KindClusterTemplate)) {
			return i
		}
	}
	return len(inventory.DeletionPhases) - 1 // the project
}

// A deletion deauthorizes the hosts first (credentials revoked), then
// deletes in the phases' order (hosts and instances in two phases, by the
// reaper), then the project; the name is free again; another project is
// untouched.
// Two deleters at once (replicas without the lease) do no harm.
func TestCascade(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		rec := tenant.NewReconciler(e.opts(tenant.Builtin()))
		e.project("acme")
		e.project("other")
		for _, p := range []string{"acme", "other"} {
			if err := rec.Reconcile(e.ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		f := e.fill("acme", 12)
		e.fill("other", 3)
		otherCounts := map[eim.Kind]int{}
		for _, k := range eim.Kinds() {
			otherCounts[k] = e.count("other", k)
		}
		if _, err := e.inv.StartProjectDeletion(e.ctx, "acme", false); eim.ErrorCode(err) != eim.EPRECONDITION {
			t.Fatalf("delete a non-empty project without force: got %v, want EPRECONDITION", err)
		}
		from, err := e.store.Revision(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		d, err := e.inv.StartProjectDeletion(e.ctx, "acme", true)
		if err != nil || d.Phase != inventory.PhaseDeauthorize {
			t.Fatalf("start: got %+v, %v", d, err)
		}
		if d2, err := e.inv.StartProjectDeletion(e.ctx, "acme", true); err != nil || !d2.Started.Equal(d.Started.Time) {
			t.Errorf("start again: got %+v, %v; want the deletion under way", d2, err)
		}
		if p, _ := e.store.FindProject(e.ctx, "acme"); p == nil || !p.Deleting {
			t.Errorf("project being deleted: got %+v, want Deleting", p)
		}
		// The defaults are not applied to a project being deleted.
		if err := rec.Pass(e.ctx); err != nil {
			t.Fatal(err)
		}
		goRun(t, inventory.NewReaper(e.inv, inventory.ReaperOptions{Interval: 200 * time.Millisecond}).Run)
		goRun(t, tenant.NewDeleter(e.opts(tenant.Defaults{})).Run)
		goRun(t, tenant.NewDeleter(e.opts(tenant.Defaults{})).Run)

		// Meanwhile the other project is served: reads and writes.
		var slowest time.Duration
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; ; i++ {
			if _, err := e.store.FindProject(e.ctx, "acme"); eim.ErrorCode(err) == eim.ENOTFOUND {
				break
			}
			if time.Now().After(deadline) {
				st, _ := e.inv.ProjectStatus(e.ctx, "acme", nil)
				t.Fatalf("acme not deleted within 60 s; status %+v deletion %+v", st, st.Deletion)
			}
			start := time.Now()
			r := e.create("other", &eim.Region{Name: fmt.Sprintf("r%d", i)})
			if err := e.inv.Delete(e.ctx, "other", eim.KindRegion, r.Base().ResourceID); err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, time.Since(start))
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("slowest create+delete in the other project during the cascade: %v", slowest)

		// The feed has the project's deletion once it is sequenced
		// (PostgreSQL sequences commits after they return).
		var evs []eim.Event
		eventually(t, "the project's deletion in the feed", func() error {
			var err error
			if evs, err = e.store.Events(e.ctx, from, 10000); err != nil {
				return err
			}
			if !slices.ContainsFunc(evs, func(ev eim.Event) bool {
				return ev.Project == "acme" && ev.Kind == eim.KindProject && ev.Op == eim.OpDeleted
			}) {
				return fmt.Errorf("not yet (%d events)", len(evs))
			}
			return nil
		})
		// Order: every credential revoked (a host update) before any
		// delete; deletes in phase order; the project last.
		firstDelete, lastPhase := -1, 0
		revoked := map[string]bool{}
		hostDeleting := map[string]bool{}
		instGone := map[string]bool{}
		for i, ev := range evs {
			if ev.Project != "acme" {
				continue
			}
			if ev.Op == eim.OpUpdated && ev.Kind == eim.KindHost && firstDelete < 0 {
				revoked[ev.ID] = true
			}
			if ev.Op == eim.OpUpdated && ev.Kind == eim.KindHost {
				hostDeleting[ev.ID] = true
			}
			if ev.Op != eim.OpDeleted {
				continue
			}
			if firstDelete < 0 {
				firstDelete = i
			}
			ph := phaseOf(ev.Kind)
			if ph < lastPhase {
				t.Errorf("event %d: %s %s deleted in phase %s after phase %s", i, ev.Kind, ev.ID, inventory.DeletionPhases[ph].Name, inventory.DeletionPhases[lastPhase].Name)
			}
			lastPhase = max(lastPhase, ph)
			switch ev.Kind {
			case eim.KindInstance:
				instGone[ev.ID] = true
			case eim.KindHost:
				if !hostDeleting[ev.ID] {
					t.Errorf("host %s removed without its desired state DELETED first (two-phase)", ev.ID)
				}
			}
		}
		if len(revoked) != len(f.hosts) {
			t.Errorf("hosts whose credentials were revoked before the first delete: %d, want %d", len(revoked), len(f.hosts))
		}
		for _, id := range f.instances {
			if !instGone[id] {
				t.Errorf("instance %s: no delete event", id)
			}
		}
		last := evs[len(evs)-1]
		for i := len(evs) - 1; i >= 0 && evs[i].Project != "acme"; i-- {
			last = evs[i-1]
		}
		if last.Kind != eim.KindProject || last.Op != eim.OpDeleted {
			t.Errorf("last event of acme: got %+v, want the project deleted", last)
		}
		// Its records went with it.
		if v, applied, err := e.inv.AppliedDefaults(e.ctx, "acme"); err != nil || v != 0 || len(applied) != 0 {
			t.Errorf("applied defaults after deletion: %d %v %v", v, applied, err)
		}
		if ds, err := e.inv.ProjectDeletions(e.ctx); err != nil || len(ds) != 0 {
			t.Errorf("deletions left: %+v, %v", ds, err)
		}
		// The other project is as it was.
		for _, k := range eim.Kinds() {
			if n := e.count("other", k); n != otherCounts[k] {
				t.Errorf("other project's %s: %d, want %d", k, n, otherCounts[k])
			}
		}
		// The name is free, and a new project of it gets its defaults.
		e.project("acme")
		if err := rec.Reconcile(e.ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if n := len(e.groups("acme")); n != len(tenant.Builtin().Groups) {
			t.Errorf("acme again: %d groups, want %d", n, len(tenant.Builtin().Groups))
		}
		if e.count("acme", eim.KindHost) != 0 || e.count("acme", eim.KindRegion) != 0 {
			t.Errorf("acme again holds what the old one held")
		}
	})
}

// A deletion stopped between any two steps resumes where it was, in a new
// deleter (what a process killed mid-cascade leaves to the next).
func TestCascadeResumes(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.project("acme")
		e.fill("acme", 5)
		if _, err := e.inv.StartProjectDeletion(e.ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		phases := []string{}
		for step := 0; step < 200; step++ {
			// A new deleter each step: nothing is kept in memory between.
			d := tenant.NewDeleter(e.opts(tenant.Defaults{}))
			if _, err := d.Step(e.ctx); err != nil {
				t.Fatal(err)
			}
			st, err := e.inv.ProjectStatus(e.ctx, "acme", nil)
			if eim.ErrorCode(err) == eim.ENOTFOUND {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Deletion != nil && st.Deletion.Error != "" {
				t.Fatalf("step %d: error %s", step, st.Deletion.Error)
			}
			if step == 0 {
				// The first step deauthorized every host (invalidated, its
				// node's credentials revoked): the per-host views refuse
				// them (eim.NodeCredentials.Revoked).
				_ = e.store.View(e.ctx, "acme", func(tx eim.Tx) error {
					items, _, err := tx.List(e.ctx, eim.KindHost, eim.Query{})
					for _, r := range items {
						h := r.(*eim.Host)
						c := eim.NodeCredentials{DesiredState: h.DesiredState, SecretHash: h.NodeSecretHash, Gen: h.NodeCredGen}
						if !c.Revoked() || h.NodeCredGen != 2 || h.NodeSecretHash != "" || h.DesiredState != eim.HostStateUntrusted {
							t.Errorf("host %s after the first step: desired %s, secret %q, generation %d; want untrusted, none, 2", h.ResourceID, h.DesiredState, h.NodeSecretHash, h.NodeCredGen)
						}
					}
					if len(items) != 5 {
						t.Errorf("hosts after the first step: %d, want 5", len(items))
					}
					return err
				})
			}
			if st.Deletion != nil && (len(phases) == 0 || phases[len(phases)-1] != st.Deletion.Phase) {
				phases = append(phases, st.Deletion.Phase)
			}
			// The reaper's part, done by hand: confirm the two-phase
			// deletes.
			for _, k := range []eim.Kind{eim.KindInstance, eim.KindHost} {
				var ids []string
				_ = e.store.View(e.ctx, "acme", func(tx eim.Tx) error {
					items, _, err := tx.List(e.ctx, k, eim.Query{})
					for _, r := range items {
						ids = append(ids, r.Base().ResourceID)
					}
					return err
				})
				for _, id := range ids {
					_ = e.inv.ConfirmDeleted(e.ctx, "acme", k, id)
				}
			}
		}
		if _, err := e.store.FindProject(e.ctx, "acme"); eim.ErrorCode(err) != eim.ENOTFOUND {
			t.Fatalf("acme still there after 200 steps (phases %v): %v", phases, err)
		}
		var want []string
		for _, p := range inventory.DeletionPhases[1:] {
			want = append(want, p.Name)
		}
		// Every phase was seen, in order (the first is done within the
		// first step).
		if !slices.Equal(phases, want) {
			t.Errorf("phases seen: got %v, want %v", phases, want)
		}
	})
}

// While the database is away a deletion stops where it is, shows the
// error in its status, and goes on once it is back.
func TestCascadeThroughAnOutage(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		e.project("acme")
		e.fill("acme", 3)
		away := &storetest.Away{Store: e.store}
		inv := inventory.New(away, inventory.Options{})
		if _, err := inv.StartProjectDeletion(e.ctx, "acme", true); err != nil {
			t.Fatal(err)
		}
		away.SetAway(true)
		o := e.opts(tenant.Defaults{})
		o.Store, o.Inventory = away, inv
		goRun(t, inventory.NewReaper(inv, inventory.ReaperOptions{Interval: 100 * time.Millisecond}).Run)
		goRun(t, tenant.NewDeleter(o).Run)
		eventually(t, "the error in the status", func() error {
			st, err := e.inv.ProjectStatus(e.ctx, "acme", nil)
			if err != nil {
				return err
			}
			if st.Deletion == nil || !strings.Contains(st.Deletion.Error, "unavailable") || st.Deletion.Phase != inventory.PhaseDeauthorize {
				return fmt.Errorf("got %+v", st.Deletion)
			}
			return nil
		})
		away.SetAway(false)
		eventually(t, "the project deleted", func() error {
			if _, err := e.store.FindProject(e.ctx, "acme"); eim.ErrorCode(err) != eim.ENOTFOUND {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	})
}
