package exporter_test

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/exporter"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

var pgURL string

func TestMain(m *testing.M) {
	code := func() int {
		if base := os.Getenv(storetest.PostgresEnv); base != "" {
			u, drop, err := storetest.PostgresDB(base, "eim_exporter")
			if err != nil {
				fmt.Fprintln(os.Stderr, "exporter tests:", err)
				return 1
			}
			defer drop()
			pgURL = u
		}
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "exporter tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var seq atomic.Int64

// engines runs f on SQLite and, when configured, PostgreSQL.
func engines(t *testing.T, f func(t *testing.T, st eim.Store)) {
	dsns := map[string]func(t *testing.T) string{"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "eim.db") }}
	if pgURL != "" {
		dsns["postgres"] = func(*testing.T) string { return pgURL }
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) {
			st, err := sqlstore.Open(t.Context(), dsn(t), sqlstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			f(t, st)
		})
	}
}

// countingStore counts the reads the exporter makes.
type countingStore struct {
	eim.Store
	reads atomic.Int64
}

func (c *countingStore) View(ctx context.Context, p string, fn func(eim.Tx) error) error {
	c.reads.Add(1)
	return c.Store.View(ctx, p, fn)
}

func (c *countingStore) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	c.reads.Add(1)
	return c.Store.ListProjects(ctx)
}

// start runs an exporter over st (its clock stopped at now; the projects
// read again every projectsEvery) and returns its scrape URL.
func start(t *testing.T, st eim.Store, perHost bool, now time.Time, projectsEvery time.Duration) string {
	t.Helper()
	svc := exporter.New(exporter.Options{Store: st, PerHost: perHost, Now: func() time.Time { return now }, RetryWait: 50 * time.Millisecond,
		ProjectsEvery: projectsEvery})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	srv := httptest.NewServer(svc)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "the snapshot loaded", func() error {
		if !svc.Loaded() {
			return fmt.Errorf("not loaded")
		}
		return nil
	})
	return srv.URL
}

// scrape fetches and parses the exposition (gzip-compressed when asked):
// the library's parser refuses a malformed line, a family written twice
// or an invalid label value.
func scrape(t *testing.T, url string, gz bool) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("scrape: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var r io.Reader = resp.Body
	if gz {
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("scrape with Accept-Encoding gzip: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// sample is one series: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// samples returns the series of family name whose labels include match;
// a histogram's series are its buckets (label le) plus _count and _sum.
func samples(fams map[string]*dto.MetricFamily, name string, match map[string]string) []sample {
	var out []sample
	mf := fams[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.Metric {
		labels := map[string]string{}
		for _, lp := range m.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for k, v := range match {
			if labels[k] != v {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Gauge != nil:
			out = append(out, sample{labels, m.Gauge.GetValue()})
		case m.Histogram != nil:
			for _, b := range m.Histogram.Bucket {
				l := map[string]string{"le": fmt.Sprint(b.GetUpperBound())}
				for k, v := range labels {
					l[k] = v
				}
				out = append(out, sample{l, float64(b.GetCumulativeCount())})
			}
			out = append(out, sample{map[string]string{"_count": ""}, float64(m.Histogram.GetSampleCount())},
				sample{map[string]string{"_sum": ""}, m.Histogram.GetSampleSum()})
		}
	}
	return out
}

// one returns the value of the single series of name matching match.
func one(t *testing.T, fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	t.Helper()
	s := samples(fams, name, match)
	if len(s) != 1 {
		t.Fatalf("%s%v: %d series, want 1: %v", name, match, len(s), s)
	}
	return s[0].value
}

func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v after 20 s", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleet is what TestExporter writes.
type fleet struct {
	project, projectID, other string
	region, subRegion, site   string
	site2                     string
	running, unhealthy, fresh string // host IDs
	weird, elsewhere          string
	created                   map[string]float64 // host ID → created (unix s, ms)
}

// The hostname a node reported, as nothing in a name should be able to
// break the exposition: quotes, a newline, a backslash, braces and a
// comment (invalid UTF-8, which PostgreSQL refuses to store: see
// FuzzLabels).
const evilHostname = "evil\"host\nname\\ }{ # HELP edge_host_status x\n"

func setup(t *testing.T, st eim.Store, now time.Time) *fleet {
	t.Helper()
	ctx := t.Context()
	inv := inventory.New(st, inventory.Options{})
	n := seq.Add(1)
	f := &fleet{project: fmt.Sprintf("x%d-%d", now.UnixNano(), n), other: fmt.Sprintf("y%d-%d", now.UnixNano(), n), created: map[string]float64{}}
	p, err := inv.CreateProject(ctx, f.project, "")
	if err != nil {
		t.Fatal(err)
	}
	f.projectID = p.ID
	if _, err := inv.CreateProject(ctx, f.other, ""); err != nil {
		t.Fatal(err)
	}
	off := true
	if _, _, err := inv.UpdateProjectSettings(ctx, f.other, inventory.SettingsChange{ExporterPerHostOff: &off}); err != nil {
		t.Fatal(err)
	}
	create := func(project string, r eim.Resource) string {
		t.Helper()
		out, err := inv.Create(ctx, project, r)
		if err != nil {
			t.Fatalf("create %T: %v", r, err)
		}
		return out.Base().ResourceID
	}
	f.region = create(f.project, &eim.Region{Name: "eu"})
	f.subRegion = create(f.project, &eim.Region{Name: "de", ParentID: f.region})
	f.site = create(f.project, &eim.Site{Name: "berlin", RegionID: f.subRegion})
	f.site2 = create(f.project, &eim.Site{Name: "lonely"})
	serials := map[string]string{}
	host := func(project, name, serial, site string) string {
		id := create(project, &eim.Host{Name: name, UUID: uuidOf(serial), SiteID: site})
		serials[id] = serial
		return id
	}
	f.running = host(f.project, "running", "SERIAL0001", f.site)
	f.unhealthy = host(f.project, "unhealthy", "SERIAL0002", f.site)
	f.fresh = host(f.project, "fresh", "SERIAL0003", f.site2)
	f.weird = host(f.project, "weird", "SERIAL0004", "")
	f.elsewhere = host(f.other, "elsewhere", "SERIAL0005", "")
	osID := create(f.project, &eim.OS{Name: "os", ProfileName: "os", Architecture: "x86_64", ImageURL: "http://127.0.0.1/os.img", Sha256: strings.Repeat("0", 64)})

	// What the modules write on the way, straight into the store.
	modules := func(project, id string, hostFn func(h *eim.Host, base uint64), inFn func(in *eim.Instance, base uint64)) {
		t.Helper()
		err := st.Update(ctx, project, func(tx eim.Tx) error {
			r, err := tx.Get(ctx, eim.KindHost, id)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			f.created[id] = float64(h.Timestamps.CreatedAt.UnixMilli()) / 1000
			base := uint64(h.Timestamps.CreatedAt.Unix())
			h.SerialNumber = serials[id] // as the device reported it
			hostFn(h, base)
			if err := tx.Update(ctx, h); err != nil {
				return err
			}
			if inFn == nil {
				return nil
			}
			in, err := inventory.NewInstance(&eim.Instance{Meta: eim.Meta{Project: project}, Kind: eim.InstanceKindMetal, Name: h.Name, HostID: id, OSID: osID})
			if err != nil {
				return err
			}
			inFn(in, base)
			return tx.Create(ctx, in)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	onboarded := func(h *eim.Host, base uint64) {
		h.RegistrationStatus, h.RegistrationStatusTimestamp = "Host is Registered", base+90
		h.OnboardingStatus, h.OnboardingStatusTimestamp = "Onboarded", base+100
		h.CurrentState = eim.HostStateOnboarded
	}
	modules(f.project, f.running, func(h *eim.Host, base uint64) {
		onboarded(h, base)
		h.HostStatus, h.HostStatusTimestamp = "Running", base+1000
		h.Hostname = evilHostname
	}, func(in *eim.Instance, base uint64) {
		in.ProvisioningStatus, in.ProvisioningStatusTimestamp = "Provisioned", base+700
		in.CurrentState, in.InstanceStatus, in.InstanceStatusTimestamp = eim.InstanceStateRunning, "Running", base+1000
	})
	modules(f.project, f.unhealthy, func(h *eim.Host, base uint64) {
		onboarded(h, base)
		h.HostStatus = "Error: node unhealthy: /var is full"
	}, func(in *eim.Instance, base uint64) {
		in.ProvisioningStatus = "Provisioning In Progress: 3/7 stream-image"
		in.UpdateStatus = "Downloading artifacts"
	})
	modules(f.project, f.fresh, func(*eim.Host, uint64) {}, nil)
	modules(f.project, f.weird, func(h *eim.Host, base uint64) {
		h.HostStatus = "A text no module writes"
	}, func(in *eim.Instance, base uint64) {
		in.ProvisioningStatus = "Provisioning Failed: 2/7 stream-image: boom"
		in.UpdateStatus = eim.UpdateStatusFailed
	})
	modules(f.other, f.elsewhere, func(h *eim.Host, base uint64) { h.HostStatus = "Running" }, nil)

	// A window open now over the parent region (so the site's hosts), one
	// of a repeated schedule closed now over the fresh host.
	create(f.project, &eim.SingleSchedule{Name: "now", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE",
		StartSeconds: uint32(now.Unix() - 60), EndSeconds: uint32(now.Unix() + 3600), TargetRegionID: f.region})
	create(f.project, &eim.RepeatedSchedule{Name: "later", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 60,
		CronMinutes: "0", CronHours: fmt.Sprint((now.UTC().Hour() + 12) % 24), CronDayMonth: "*", CronMonth: "*", CronDayWeek: "*",
		TargetHostID: f.fresh})
	return f
}

// TestExporter: the per-host series are one-hot over every value, with
// the statuses folded; the labels survive any hostname; aggregates,
// maintenance and histograms agree with what was written; a project's
// switch hides its hosts' series only; changes arrive through the feed;
// a scrape reads nothing from the database.
func TestExporter(t *testing.T) {
	engines(t, func(t *testing.T, st eim.Store) {
		now := time.Now()
		f := setup(t, st, now)
		counting := &countingStore{Store: st}
		url := start(t, counting, true, now, time.Hour)
		fams := scrape(t, url, true)

		// One-hot, folded.
		wantHost := map[string]map[string]string{
			f.running:   {"edge_host_status": "Running", "edge_host_onboarding_status": "Onboarded", "edge_host_provisioning_status": "Provisioned", "edge_host_update_status": "No Current Update"},
			f.unhealthy: {"edge_host_status": "Error", "edge_host_onboarding_status": "Onboarded", "edge_host_provisioning_status": "Provisioning In Progress", "edge_host_update_status": "Downloading artifacts"},
			f.fresh:     {"edge_host_status": "Not Connected", "edge_host_onboarding_status": "Not Connected", "edge_host_provisioning_status": "Not Provisioned", "edge_host_update_status": "No Current Update"},
			f.weird:     {"edge_host_status": "Unknown", "edge_host_onboarding_status": "Not Connected", "edge_host_provisioning_status": "Provisioning Failed", "edge_host_update_status": "Update failed"},
		}
		valueLabel := map[string]string{"edge_host_status": "status", "edge_host_onboarding_status": "onboardingStatus",
			"edge_host_provisioning_status": "provisioningStatus", "edge_host_update_status": "updateStatus"}
		wantValues := map[string]int{"edge_host_status": 9, "edge_host_onboarding_status": 3, "edge_host_provisioning_status": 5, "edge_host_update_status": 8}
		for id, fam := range wantHost {
			for name, want := range fam {
				ss := samples(fams, name, map[string]string{"hostID": id})
				if len(ss) != wantValues[name] {
					t.Errorf("%s of %s: %d series, want %d", name, id, len(ss), wantValues[name])
				}
				for _, s := range ss {
					if w := b2f(s.labels[valueLabel[name]] == want); s.value != w {
						t.Errorf("%s{%s=%q} of %s: got %v, want %v", name, valueLabel[name], s.labels[valueLabel[name]], id, s.value, w)
					}
					if s.labels["projectId"] != f.projectID {
						t.Errorf("%s of %s: projectId %q, want %q", name, id, s.labels["projectId"], f.projectID)
					}
				}
			}
		}
		for _, v := range []string{"Booting", "Rebooting", "No Connection", "Powered Off", "Invalidated"} {
			if got := one(t, fams, "edge_host_status", map[string]string{"hostID": f.running, "status": v}); got != 0 {
				t.Errorf("edge_host_status{status=%q} of the running host: %v", v, got)
			}
		}
		if got := one(t, fams, "edge_host_update_status", map[string]string{"hostID": f.unhealthy, "updateStatus": "Downloading artifacts"}); got != 1 {
			t.Errorf("Downloading artifacts: got %v", got)
		}
		// The labels, whatever the node reported.
		s := samples(fams, "edge_host_status", map[string]string{"hostID": f.running, "status": "Running"})[0]
		want := map[string]string{"hostID": f.running, "name": "running", "serial": "SERIAL0001", "deviceGuid": uuidOf("SERIAL0001"),
			"hostname": evilHostname, "projectId": f.projectID, "status": "Running"}
		if fmt.Sprint(s.labels) != fmt.Sprint(want) {
			t.Errorf("labels: got %q, want %q", s.labels, want)
		}

		// Maintenance: the window over the region covers the site's hosts.
		for id, w := range map[string]float64{f.running: 1, f.unhealthy: 1, f.fresh: 0, f.weird: 0} {
			if got := one(t, fams, "edge_host_schedule", map[string]string{"hostID": id}); got != w {
				t.Errorf("edge_host_schedule of %s: got %v, want %v", id, got, w)
			}
		}
		if got := one(t, fams, "eim_hosts_in_maintenance", map[string]string{"project": f.project, "site": f.site}); got != 2 {
			t.Errorf("eim_hosts_in_maintenance of the site: got %v, want 2", got)
		}
		if got := one(t, fams, "eim_site_info", map[string]string{"project": f.project, "site": f.site}); got != 1 {
			t.Errorf("eim_site_info: got %v", got)
		}
		if s := samples(fams, "eim_site_info", map[string]string{"site": f.site})[0]; s.labels["name"] != "berlin" || s.labels["region"] != f.subRegion {
			t.Errorf("eim_site_info labels: %v", s.labels)
		}

		// Durations: total from the first call home (+90 s) to RUNNING
		// (+1000 s); histograms of the project.
		if got := one(t, fams, "edge_host_total_provisioning_time", map[string]string{"hostID": f.running}); got != 910 {
			t.Errorf("edge_host_total_provisioning_time: got %v, want 910", got)
		}
		if ss := samples(fams, "edge_host_total_provisioning_time", map[string]string{"hostID": f.unhealthy}); len(ss) != 0 {
			t.Errorf("edge_host_total_provisioning_time of a host not running: %v", ss)
		}
		checkHisto := func(name string, wantCount int, within [2]float64) {
			t.Helper()
			ss := samples(fams, name, map[string]string{"project": f.project})
			var count float64
			for _, s := range ss {
				if _, ok := s.labels["_count"]; ok {
					count = s.value
				}
				if le, ok := s.labels["le"]; ok {
					var b float64
					fmt.Sscan(le, &b)
					// Cumulative: 0 below the bucket of the values, all from it.
					w := 0.0
					if b >= within[1] {
						w = float64(wantCount)
					}
					if b > within[0] && b < within[1] {
						t.Fatalf("%s: bad bounds %v in the test", name, within)
					}
					if s.value != w {
						t.Errorf("%s{le=%s}: got %v, want %v", name, le, s.value, w)
					}
				}
			}
			if count != float64(wantCount) {
				t.Errorf("%s_count: got %v, want %d", name, count, wantCount)
			}
		}
		checkHisto("eim_host_onboarding_duration_seconds", 2, [2]float64{60, 120})    // ~99-100 s
		checkHisto("eim_host_provisioning_duration_seconds", 1, [2]float64{300, 600}) // 600 s
		checkHisto("eim_host_time_to_running_seconds", 1, [2]float64{600, 1200})      // ~999-1000 s

		// Aggregates.
		agg := func(name, site, status string) float64 {
			return one(t, fams, name, map[string]string{"project": f.project, "site": site, "status": status})
		}
		for _, c := range []struct {
			name, site, status string
			want               float64
		}{
			{"eim_hosts", f.site, "Running", 1}, {"eim_hosts", f.site, "Error", 1}, {"eim_hosts", f.site, "No Connection", 0},
			{"eim_hosts", f.site2, "Not Connected", 1}, {"eim_hosts", "", "Unknown", 1},
			{"eim_hosts_onboarding", f.site, "Onboarded", 2}, {"eim_hosts_provisioning", "", "Provisioning Failed", 1},
			{"eim_hosts_provisioning", f.site2, "Not Provisioned", 1}, {"eim_hosts_update", f.site, "Downloading artifacts", 1},
		} {
			if got := agg(c.name, c.site, c.status); got != c.want {
				t.Errorf("%s{site=%q,status=%q}: got %v, want %v", c.name, c.site, c.status, got, c.want)
			}
		}
		if got := one(t, fams, "eim_exporter_unrecognised_statuses", map[string]string{"field": "hostStatus"}); got < 1 {
			t.Errorf("unrecognised host statuses: got %v, want at least 1", got)
		}
		if got := one(t, fams, "eim_exporter_snapshot_live", nil); got != 1 {
			t.Errorf("eim_exporter_snapshot_live: got %v", got)
		}

		// The project whose per-host series are off: counted, not listed.
		if ss := samples(fams, "edge_host_status", map[string]string{"hostID": f.elsewhere}); len(ss) != 0 {
			t.Errorf("per-host series of a project that turned them off: %v", ss)
		}
		if got := one(t, fams, "eim_hosts", map[string]string{"project": f.other, "status": "Running"}); got != 1 {
			t.Errorf("eim_hosts of the other project: got %v, want 1", got)
		}

		// Scrapes (plain too) read nothing from the database.
		before := counting.reads.Load()
		for range 3 {
			scrape(t, url, false)
		}
		if after := counting.reads.Load(); after != before {
			t.Errorf("3 scrapes made %d database reads, want 0", after-before)
		}

		// Changes arrive through the feed: a host reports in, one goes.
		ctx := t.Context()
		err := st.Update(ctx, f.project, func(tx eim.Tx) error {
			r, err := tx.Get(ctx, eim.KindHost, f.fresh)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			h.HostStatus = "Rebooting"
			return tx.Update(ctx, h)
		})
		if err != nil {
			t.Fatal(err)
		}
		inv := inventory.New(st, inventory.Options{})
		if _, err := inv.Update(ctx, f.project, &eim.Site{Meta: eim.Meta{ResourceID: f.site}, Name: "berlin-2", RegionID: f.subRegion}, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the changes in the scrape", func() error {
			fams := scrape(t, url, true)
			if s := samples(fams, "edge_host_status", map[string]string{"hostID": f.fresh, "status": "Rebooting"}); len(s) != 1 || s[0].value != 1 {
				return fmt.Errorf("fresh host not Rebooting: %v", s)
			}
			if s := samples(fams, "eim_site_info", map[string]string{"site": f.site}); len(s) != 1 || s[0].labels["name"] != "berlin-2" {
				return fmt.Errorf("site not renamed: %v", s)
			}
			return nil
		})
		err = st.Update(ctx, f.project, func(tx eim.Tx) error {
			items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: f.weird}}})
			if err != nil || len(items) != 1 {
				return fmt.Errorf("instance of %s: %v %v", f.weird, items, err)
			}
			if err := tx.Delete(ctx, eim.KindInstance, items[0].Base().ResourceID); err != nil {
				return err
			}
			return tx.Delete(ctx, eim.KindHost, f.weird)
		})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the deleted host gone", func() error {
			fams := scrape(t, url, false)
			if s := samples(fams, "edge_host_status", map[string]string{"hostID": f.weird}); len(s) != 0 {
				return fmt.Errorf("still listed: %d series", len(s))
			}
			if s := samples(fams, "eim_hosts", map[string]string{"project": f.project, "site": ""}); len(s) != 0 {
				return fmt.Errorf("eim_hosts of no site: %v", s)
			}
			return nil
		})

		// The project's setting, read again with the projects (not in the
		// feed).
		url2 := start(t, st, true, now, 50*time.Millisecond)
		if s := samples(scrape(t, url2, true), "edge_host_status", map[string]string{"hostID": f.running}); len(s) != 9 {
			t.Fatalf("per-host series before the switch: %d", len(s))
		}
		off := true
		if _, _, err := inv.UpdateProjectSettings(ctx, f.project, inventory.SettingsChange{ExporterPerHostOff: &off}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the project's per-host series off", func() error {
			fams := scrape(t, url2, true)
			if s := samples(fams, "edge_host_status", map[string]string{"hostID": f.running}); len(s) != 0 {
				return fmt.Errorf("%d series", len(s))
			}
			if got := one(t, fams, "eim_hosts", map[string]string{"project": f.project, "site": f.site, "status": "Running"}); got != 1 {
				return fmt.Errorf("eim_hosts: %v", got)
			}
			return nil
		})
	})
}

// TestExporterPerHostOff: with the per-host series off for the process,
// a scrape has the aggregates only.
func TestExporterPerHostOff(t *testing.T) {
	engines(t, func(t *testing.T, st eim.Store) {
		now := time.Now()
		f := setup(t, st, now)
		fams := scrape(t, start(t, st, false, now, time.Hour), true)
		for name := range fams {
			if strings.HasPrefix(name, "edge_") {
				t.Errorf("family %s served with per-host series off", name)
			}
		}
		if got := one(t, fams, "eim_hosts", map[string]string{"project": f.project, "site": f.site, "status": "Running"}); got != 1 {
			t.Errorf("eim_hosts: got %v, want 1", got)
		}
	})
}

// uuidOf is a test UUID made from a serial number.
func uuidOf(serial string) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", []byte(serial[len(serial)-6:]))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestExporterOutage: while the database is away, scrapes answer with the
// last state known and say so (eim_exporter_snapshot_live 0); when it is
// back, the snapshot is read again, with what changed meanwhile.
func TestExporterOutage(t *testing.T) {
	if pgURL == "" {
		t.Skipf("needs PostgreSQL (%s)", storetest.PostgresEnv)
	}
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.NewProxy(t, u.Host)
	st, err := sqlstore.Open(t.Context(), proxy.URL(t, pgURL), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	direct, err := sqlstore.Open(t.Context(), pgURL, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	now := time.Now()
	f := setup(t, direct, now)
	target := start(t, st, true, now, time.Hour)
	live := func(fams map[string]*dto.MetricFamily) float64 {
		return one(t, fams, "eim_exporter_snapshot_live", nil)
	}
	if got := live(scrape(t, target, true)); got != 1 {
		t.Fatalf("live before the outage: %v", got)
	}

	proxy.Cut()
	waitFor(t, "the snapshot no longer live", func() error {
		fams := scrape(t, target, true)
		if got := live(fams); got != 0 {
			return fmt.Errorf("live %v", got)
		}
		if got := one(t, fams, "eim_hosts", map[string]string{"project": f.project, "site": f.site, "status": "Running"}); got != 1 {
			t.Fatalf("eim_hosts during the outage: got %v, want the last state (1)", got)
		}
		return nil
	})
	// A change the feed cannot show while the store is away.
	ctx := t.Context()
	err = direct.Update(ctx, f.project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, f.fresh)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		h.HostStatus = "Running"
		return tx.Update(ctx, h)
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	waitFor(t, "the snapshot live again, with the change", func() error {
		fams := scrape(t, target, true)
		if got := live(fams); got != 1 {
			return fmt.Errorf("live %v", got)
		}
		if s := samples(fams, "edge_host_status", map[string]string{"hostID": f.fresh, "status": "Running"}); len(s) != 1 || s[0].value != 1 {
			return fmt.Errorf("the fresh host: %v", s)
		}
		return nil
	})
}

// flat returns every sample of a scrape as "family labels" → value.
func flat(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name := range fams {
		for _, s := range samples(fams, name, nil) {
			out[name+" "+fmt.Sprint(s.labels)] = s.value
		}
	}
	return out
}

// TestExporterGzipCache: the compressed answer, whose per-host series are
// kept compressed between scrapes, has the same series as the plain one
// after each kind of change: a host's status, a maintenance window over
// a host opening and going, an instance and a host deleted.
func TestExporterGzipCache(t *testing.T) {
	engines(t, func(t *testing.T, st eim.Store) {
		now := time.Now()
		f := setup(t, st, now)
		url := start(t, st, true, now, time.Hour)
		ctx := t.Context()
		inv := inventory.New(st, inventory.Options{})
		// agree waits until the compressed scrape shows what cond wants
		// and the plain one has the same series.
		agree := func(what string, cond func(fams map[string]*dto.MetricFamily) error) {
			t.Helper()
			waitFor(t, what, func() error {
				gz := scrape(t, url, true)
				if err := cond(gz); err != nil {
					return err
				}
				g, p := flat(gz), flat(scrape(t, url, false))
				if len(g) != len(p) {
					return fmt.Errorf("gzip: %d series, plain: %d", len(g), len(p))
				}
				for k, v := range p {
					if gv, ok := g[k]; !ok || gv != v {
						return fmt.Errorf("%s: plain %v, gzip %v (present %v)", k, v, gv, ok)
					}
				}
				return nil
			})
		}
		value := func(fams map[string]*dto.MetricFamily, name string, match map[string]string, want float64) error {
			if s := samples(fams, name, match); len(s) != 1 || s[0].value != want {
				return fmt.Errorf("%s%v: got %v, want %v", name, match, s, want)
			}
			return nil
		}
		agree("the first scrapes", func(fams map[string]*dto.MetricFamily) error {
			return value(fams, "edge_host_status", map[string]string{"hostID": f.fresh, "status": "Not Connected"}, 1)
		})

		err := st.Update(ctx, f.project, func(tx eim.Tx) error {
			r, err := tx.Get(ctx, eim.KindHost, f.fresh)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			h.HostStatus = "Rebooting"
			return tx.Update(ctx, h)
		})
		if err != nil {
			t.Fatal(err)
		}
		agree("a status changed", func(fams map[string]*dto.MetricFamily) error {
			return value(fams, "edge_host_status", map[string]string{"hostID": f.fresh, "status": "Rebooting"}, 1)
		})

		win, err := inv.Create(ctx, f.project, &eim.SingleSchedule{Name: "fresh", ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE",
			StartSeconds: uint32(now.Unix() - 60), EndSeconds: uint32(now.Unix() + 3600), TargetHostID: f.fresh})
		if err != nil {
			t.Fatal(err)
		}
		agree("a window opened over a host", func(fams map[string]*dto.MetricFamily) error {
			return value(fams, "edge_host_schedule", map[string]string{"hostID": f.fresh}, 1)
		})
		if err := inv.Delete(ctx, f.project, eim.KindSingleSchedule, win.Base().ResourceID); err != nil {
			t.Fatal(err)
		}
		agree("the window gone", func(fams map[string]*dto.MetricFamily) error {
			return value(fams, "edge_host_schedule", map[string]string{"hostID": f.fresh}, 0)
		})

		err = st.Update(ctx, f.project, func(tx eim.Tx) error {
			items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: f.weird}}})
			if err != nil || len(items) != 1 {
				return fmt.Errorf("instance of %s: %v %v", f.weird, items, err)
			}
			return tx.Delete(ctx, eim.KindInstance, items[0].Base().ResourceID)
		})
		if err != nil {
			t.Fatal(err)
		}
		agree("an instance deleted", func(fams map[string]*dto.MetricFamily) error {
			return value(fams, "edge_host_provisioning_status", map[string]string{"hostID": f.weird, "provisioningStatus": "Not Provisioned"}, 1)
		})
		if err := st.Update(ctx, f.project, func(tx eim.Tx) error { return tx.Delete(ctx, eim.KindHost, f.weird) }); err != nil {
			t.Fatal(err)
		}
		agree("a host deleted", func(fams map[string]*dto.MetricFamily) error {
			if s := samples(fams, "edge_host_status", map[string]string{"hostID": f.weird}); len(s) != 0 {
				return fmt.Errorf("still listed: %d series", len(s))
			}
			return nil
		})
	})
}
