package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var metricsLineRE = regexp.MustCompile(`eim: serving metrics on (http://\S+/metrics)`)

// scrapeText fetches url and parses it as the text exposition format:
// the parser refuses a family written twice or a malformed line.
func scrapeText(t *testing.T, url string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return resp.StatusCode, fams
}

// TestServerOwnMetrics: a process without the exporter module serves its
// own series on /metrics; a request whose path holds an ID counts under
// its route template, so 100 IDs make one series; with the exporter and
// --metrics-addr, the fleet's series and the process's come in one answer
// on that listener, and the HTTP listener no longer serves /metrics.
func TestServerOwnMetrics(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, false, "--modules", "api")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	for i := range 100 {
		if code, _ := getJSON(t, "GET", fmt.Sprintf("%s/v1/projects/default/compute/hosts/host-%08x", s.http, i), tok, ""); code != 404 {
			t.Fatalf("GET an unknown host: %d, want 404", code)
		}
	}
	code, fams := scrapeText(t, s.http+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics of a process without the exporter: %d", code)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "eim_http_requests_total", "eim_store_transaction_duration_seconds", "eim_feed_live", "eim_batcher_queue_depth"} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	if fams["eim_hosts"] != nil || fams["eim_exporter_snapshot_live"] != nil {
		t.Error("the exporter's series served by a process without it")
	}
	var hostRoute float64
	for _, m := range fams["eim_http_requests_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if strings.Contains(labels["route"], "host-") {
			t.Errorf("a raw path as route: %v", labels)
		}
		if labels["route"] == "/v1/projects/{projectName}/compute/hosts/{resourceId}" && labels["code"] == "404" && labels["method"] == "GET" {
			hostRoute += m.Counter.GetValue()
		}
	}
	if hostRoute != 100 {
		t.Errorf("GETs of hosts by ID under their route template: got %v, want 100", hostRoute)
	}
	s.stop()

	s = startModules(t, t.TempDir(), false, "--modules", "exporter", "--metrics-addr", "127.0.0.1:0")
	m := metricsLineRE.FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no metrics listener line in:\n%s", s.out.String())
	}
	if code, _ := scrapeText(t, s.http+"/metrics"); code != 404 {
		t.Errorf("GET /metrics of the HTTP listener with --metrics-addr: %d, want 404", code)
	}
	code, fams = scrapeText(t, m[1])
	if code != 200 {
		t.Fatalf("GET %s: %d", m[1], code)
	}
	for _, name := range []string{"eim_exporter_snapshot_live", "go_goroutines", "eim_store_transaction_duration_seconds"} {
		if fams[name] == nil {
			t.Errorf("family %s missing from the metrics listener's answer", name)
		}
	}
}

// TestServerLeaseMetrics: on PostgreSQL a process holds the leases of its
// run-once loops and the host module's shards, and says so.
func TestServerLeaseMetrics(t *testing.T) {
	db := freshPostgres(t)
	s := startModules(t, t.TempDir(), true, "--modules", "api,host", "--database", db, "--database-max-conns", "4")
	want := map[string]float64{"loop/api/reaper": 1, "loop/api/audit-retention": 1, "host/shard": 64}
	poll(t, "the leases held", func() error {
		_, fams := scrapeText(t, s.http+"/metrics")
		got := map[string]float64{}
		for _, m := range fams["eim_leases_held"].GetMetric() {
			got[m.Label[0].GetValue()] = m.Gauge.GetValue()
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("eim_leases_held: got %v, want %v", got, want)
		}
		return nil
	})
}
