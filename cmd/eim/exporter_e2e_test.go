package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// The exporter module scraped by a real Prometheus (Debian's prometheus
// package): simulated nodes go through Day 0, Prometheus scrapes the
// server every second, and PromQL over its HTTP API gives what the REST
// API shows. Prometheus also loads the shipped alert rules and the
// shipped dashboard's queries run against it.

// requirePrometheusEnv makes the test fail, not skip, without Prometheus
// (.ci/run installs it and sets it).
const requirePrometheusEnv = "EIM_REQUIRE_PROMETHEUS"

// evilNodeHostname is what one node reports as its hostname: nothing in
// it may break the exposition.
const evilNodeHostname = "evil\"node\nname\\ }{ # TYPE edge_host_status counter"

func TestExporterPrometheus(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv(requirePrometheusEnv) != "" {
			t.Fatalf("prometheus not found (%v) and %s is set", err, requirePrometheusEnv)
		}
		t.Skipf("prometheus not installed (apt-get install prometheus; .ci/run does): %v; set %s=1 to fail instead", err, requirePrometheusEnv)
	}
	// A long heartbeat interval: the simulated nodes stop after reporting
	// in, and must not turn "No Connection" while the test compares.
	s := startDay0(t, "--heartbeat-interval", "1h")
	ctx := context.Background()
	const project = eim.DefaultProject
	osID := s.createOS(t, project)

	// Six nodes provisioned (one reporting a hostname full of the text
	// format's special characters), two whose provisioning fails, one
	// registered and never booted.
	ok := sim.Generate(6, 41)
	okIDs := register(t, s, project, osID, ok)
	ok[0].Hostname = evilNodeHostname
	wantReport(t, s.fleet(t, ctx, ok, sim.Options{Seed: 41}), 6, 0)
	bad := sim.Generate(2, 42)
	register(t, s, project, osID, bad)
	wantReport(t, s.fleet(t, ctx, bad, sim.Options{FailShare: 1, Seed: 42}), 0, 2)
	register(t, s, project, osID, sim.Generate(1, 43))
	// A maintenance window open now over one running host.
	now := time.Now().Unix()
	err = s.admin.Create(ctx, project, eim.KindSingleSchedule, map[string]any{"name": "now", "scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE",
		"startSeconds": now - 60, "endSeconds": now + 3600, "targetHostId": okIDs[1]}, nil)
	if err != nil {
		t.Fatal(err)
	}

	hosts := apiHosts(t, s.admin, project)
	if len(hosts) != 9 {
		t.Fatalf("API: %d hosts, want 9", len(hosts))
	}
	prom := startPrometheus(t, bin, hostPort(t, s.api))

	// The API's view, and what PromQL must give.
	count := func(pred func(h *eim.Host) bool) float64 {
		n := 0
		for _, h := range hosts {
			if pred(h) {
				n++
			}
		}
		return float64(n)
	}
	status := func(want string) func(h *eim.Host) bool {
		return func(h *eim.Host) bool { return h.HostStatus == want }
	}
	provPrefix := func(p string) func(h *eim.Host) bool {
		return func(h *eim.Host) bool {
			return h.Instance != nil && strings.HasPrefix(h.Instance.ProvisioningStatus, p)
		}
	}
	running := count(status("Running"))
	if running != 6 {
		t.Fatalf("API: %v hosts Running, want 6", running)
	}
	checks := []struct {
		query string
		want  float64
	}{
		{`up{job="eim"}`, 1},
		{`eim_exporter_snapshot_live`, 1},
		{`sum(edge_host_status{status="Running"})`, running},
		{`sum(eim_hosts{status="Running"})`, running},
		{`sum(eim_hosts)`, float64(len(hosts))},
		{`count(edge_host_status == 1)`, float64(len(hosts))},
		{`sum(edge_host_status{status="Not Connected"})`, count(status("Not Connected"))},
		{`sum(edge_host_onboarding_status{onboardingStatus="Onboarded"})`, count(func(h *eim.Host) bool { return h.OnboardingStatus == "Onboarded" })},
		{`sum(eim_hosts_onboarding{status="Onboarded"})`, count(func(h *eim.Host) bool { return h.OnboardingStatus == "Onboarded" })},
		{`sum(eim_hosts_provisioning{status="Provisioned"})`, count(provPrefix("Provisioned"))},
		{`sum(eim_hosts_provisioning{status="Provisioning Failed"})`, count(provPrefix("Provisioning Failed"))},
		{`sum(edge_host_provisioning_status{provisioningStatus="Provisioning Failed"})`, count(provPrefix("Provisioning Failed"))},
		{`sum(eim_hosts_provisioning{status="Not Provisioned"})`, count(provPrefix("Not Provisioned"))},
		{`sum(eim_hosts_update{status="No Current Update"})`, float64(len(hosts))},
		{`sum(edge_host_schedule)`, 1},
		{fmt.Sprintf(`edge_host_schedule{hostID=%q}`, okIDs[1]), 1},
		{`sum(eim_hosts_in_maintenance)`, 1},
		{`eim_host_time_to_running_seconds_count`, running},
	}
	for _, c := range checks {
		prom.waitValue(t, c.query, c.want)
	}

	// EIM's own series, on the same /metrics: API requests by route
	// template (each host read by its ID counts under one route), the
	// nodes' RPCs by procedure and code, the change feed, the store.
	for _, h := range hosts {
		var got map[string]any
		if err := s.admin.Get(ctx, project, eim.KindHost, h.ResourceID, &got); err != nil {
			t.Fatal(err)
		}
	}
	const hostRoute = "/v1/projects/{projectName}/compute/hosts/{resourceId}"
	own := []struct {
		query string
		want  float64
	}{
		{fmt.Sprintf(`sum(eim_http_requests_total{listener="http",method="GET",route=%q,code="200"}) >= bool %d`, hostRoute, len(hosts)), 1},
		{`count(eim_http_requests_total{route=~".*host-[0-9a-f]{8}.*"}) or vector(0)`, 0},
		{`count(eim_rpc_requests_total{procedure="/eim.onboarding.v1.OnboardingService/Discover",code="ok"} > 0)`, 1},
		{`count(eim_rpc_requests_total{procedure="/eim.provisioning.v1.ProvisioningService/GetWorkflow",code="ok"} > 0)`, 1},
		{`eim_feed_live{consumer="host view"}`, 1},
		{`count(eim_store_transaction_duration_seconds_count{mode="write"} > 0)`, 1},
		{`count(go_goroutines) + count(process_resident_memory_bytes)`, 2},
	}
	for _, c := range own {
		prom.waitValue(t, c.query, c.want)
	}
	if n := count(provPrefix("Provisioning Failed")); n != 2 {
		t.Errorf("API: %v hosts Provisioning Failed, want 2", n)
	}

	// Per host: the labels as the API shows the host, the evil hostname
	// included; the total provisioning time from the stored timestamps.
	for _, h := range hosts {
		if h.Instance == nil || h.Instance.CurrentState != eim.InstanceStateRunning {
			continue
		}
		res := prom.query(t, fmt.Sprintf(`edge_host_status{hostID=%q, status="Running"}`, h.ResourceID))
		if len(res) != 1 {
			t.Fatalf("edge_host_status of %s: %d series", h.ResourceID, len(res))
		}
		p, err := s.admin.GetProject(ctx, project)
		if err != nil {
			t.Fatal(err)
		}
		m := res[0].Metric
		want := map[string]string{"__name__": "edge_host_status", "instance": hostPort(t, s.api), "job": "eim", "status": "Running",
			"hostID": h.ResourceID, "deviceGuid": h.UUID, "name": h.Name, "hostname": h.Hostname, "serial": h.SerialNumber, "projectId": p.ID}
		if fmt.Sprint(m) != fmt.Sprint(want) {
			t.Errorf("labels of %s: got %q, want %q", h.ResourceID, m, want)
		}
		total := float64(h.Instance.InstanceStatusTimestamp) - float64(h.RegistrationStatusTimestamp)
		prom.waitValue(t, fmt.Sprintf(`edge_host_total_provisioning_time{hostID=%q}`, h.ResourceID), total)
	}
	if res := prom.query(t, fmt.Sprintf(`edge_host_status{hostname=%q}`, evilNodeHostname)); len(res) != 9 {
		t.Errorf("series of the host with hostname %q: got %d, want 9", evilNodeHostname, len(res))
	}

	// A quantile of time to RUNNING: the buckets count what the API's
	// timestamps give, and histogram_quantile interpolates in them as
	// this test does.
	var toRunning []float64
	for _, h := range hosts {
		if h.Instance != nil && h.Instance.CurrentState == eim.InstanceStateRunning {
			created := float64(h.Timestamps.CreatedAt.UnixMilli()) / 1000
			toRunning = append(toRunning, math.Max(0, float64(h.Instance.InstanceStatusTimestamp)-created))
		}
	}
	for _, q := range []float64{0.5, 0.9} {
		prom.waitValue(t, fmt.Sprintf(`histogram_quantile(%v, sum by (le) (eim_host_time_to_running_seconds_bucket))`, q), promQuantile(q, toRunning))
	}

	// The shipped alert rules load and evaluate without error; the
	// provisioning failures show as pending (or firing) alerts.
	prom.waitRules(t)
	prom.waitAlerts(t, "EIMProvisioningFailed", 2)
	prom.waitAlerts(t, "EIMHostInMaintenance", 1)
	// The shipped dashboard's queries run.
	prom.checkDashboard(t, filepath.Join("..", "..", "deploy", "observability", "eim-dashboard.json"))

	// The project turns its per-host series off: they go stale; the
	// aggregates stay.
	off := true
	if _, err := s.admin.UpdateProjectSettings(ctx, project, client.SettingsChange{ExporterPerHostOff: &off}); err != nil {
		t.Fatal(err)
	}
	prom.waitEmpty(t, `edge_host_status`)
	prom.waitValue(t, `sum(eim_hosts{status="Running"})`, running)
}

// apiHosts lists a project's hosts (with their instances) through the API.
func apiHosts(t *testing.T, c *client.Client, project string) []*eim.Host {
	t.Helper()
	var out []*eim.Host
	for offset := 0; ; {
		page, err := c.List(context.Background(), project, eim.KindHost, client.ListOptions{PageSize: 100, Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			var h eim.Host
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, &h)
		}
		offset += len(page.Items)
		if !page.HasNext {
			return out
		}
	}
}

// promQuantile is histogram_quantile(q) over the exporter's buckets of
// the values, as Prometheus computes it: the bucket holding rank q·n,
// linear interpolation between its bounds (0 below the first).
func promQuantile(q float64, values []float64) float64 {
	bounds := []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 43200, 86400, 604800}
	counts := make([]float64, len(bounds))
	for _, v := range values {
		for i, b := range bounds {
			if v <= b {
				counts[i]++
			}
		}
	}
	n := float64(len(values))
	rank := q * n
	i := sort.Search(len(counts), func(i int) bool { return counts[i] >= rank })
	if i == len(bounds) {
		return bounds[len(bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], counts[i-1]
	}
	return lower + (bounds[i]-lower)*(rank-below)/(counts[i]-below)
}

// prometheus is a Prometheus server the test started.
type prometheus struct {
	base string
	hc   *http.Client
}

// startPrometheus runs Prometheus with a configuration of the test's own
// (scraping target every second, evaluating the shipped alert rules every
// second) on a free loopback port and a temporary storage directory.
func startPrometheus(t *testing.T, bin, target string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join("..", "..", "deploy", "observability", "eim-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: eim
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := &prometheus{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := p.hc.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, b)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30 s: %v", err)
		}
	}
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) float(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("value %v: %v", s.Value, err)
	}
	return v
}

// api calls the HTTP API and decodes its data.
func (p *prometheus) api(t *testing.T, path string, q url.Values, data any) error {
	t.Helper()
	resp, err := p.hc.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("%s: %d %q", path, resp.StatusCode, body)
	}
	if out.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, q, out.Error)
	}
	return json.Unmarshal(out.Data, data)
}

// query runs an instant PromQL query.
func (p *prometheus) query(t *testing.T, expr string) []promSample {
	t.Helper()
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := p.api(t, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		t.Fatal(err)
	}
	if data.ResultType != "vector" {
		t.Fatalf("%s: result type %s", expr, data.ResultType)
	}
	return data.Result
}

// waitValue waits until expr gives one series of value want.
func (p *prometheus) waitValue(t *testing.T, expr string, want float64) {
	t.Helper()
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := p.query(t, expr)
		if len(res) == 1 && math.Abs(res[0].float(t)-want) < 1e-6 {
			return
		}
		last = fmt.Sprint(res)
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %s after 30 s, want %v", expr, last, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitEmpty waits until expr gives no series.
func (p *prometheus) waitEmpty(t *testing.T, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := p.query(t, expr)
		if len(res) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d series after 30 s, want none", expr, len(res))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitRules waits until every loaded rule was evaluated, and fails on a
// rule whose evaluation failed.
func (p *prometheus) waitRules(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := p.api(t, "/api/v1/rules", nil, &data); err != nil {
			t.Fatal(err)
		}
		var groups []string
		pending := 0
		for _, g := range data.Groups {
			groups = append(groups, g.Name)
			for _, r := range g.Rules {
				switch r.Health {
				case "ok":
				case "err":
					t.Fatalf("rule %s of group %s: %s", r.Name, g.Name, r.LastError)
				default:
					pending++
				}
			}
		}
		slices.Sort(groups)
		if want := []string{"eim-exporter", "eim-fleet", "eim-hosts", "eim-self"}; !slices.Equal(groups, want) {
			t.Fatalf("rule groups: got %v, want %v", groups, want)
		}
		if pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rules not evaluated after 30 s", pending)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAlerts waits until alert name is pending or firing for n series.
func (p *prometheus) waitAlerts(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := p.api(t, "/api/v1/alerts", nil, &data); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, a := range data.Alerts {
			if a.Labels["alertname"] == name {
				got++
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alert %s: %d after 30 s, want %d (%v)", name, got, n, data.Alerts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkDashboard runs every query of the dashboard (its variables set to
// "all") and fails on one Prometheus refuses.
func (p *prometheus) checkDashboard(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	vars := strings.NewReplacer("$project", ".*", "$site", ".*")
	n := 0
	for _, panel := range dash.Panels {
		for _, tg := range panel.Targets {
			var data json.RawMessage
			if err := p.api(t, "/api/v1/query", url.Values{"query": {vars.Replace(tg.Expr)}}, &data); err != nil {
				t.Errorf("dashboard panel %q: %v", panel.Title, err)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("dashboard: %d queries, want its panels' (at least 10)", n)
	}
}
