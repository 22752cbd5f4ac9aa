package httpapi

import (
	"bytes"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
)

// TestEncodeFailureLoggedAndCounted: an answer that cannot be encoded (a
// bug, after a write that is committed by then) is a 500 that is logged
// with the request's method, route and ID, and counted in
// eim_http_encode_failures_total, for one resource and for a list alike.
func TestEncodeFailureLoggedAndCounted(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	h := New(nil, nil, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: reg}).(*handler)
	cyclic := func() *eim.Region {
		r := &eim.Region{Meta: eim.Meta{ResourceID: "region-00000001"}}
		r.ParentRegion = r
		return r
	}
	const one, list = "/v1/projects/{projectName}/encode-test", "/v1/projects/{projectName}/encode-test/list"
	h.mux.HandleFunc("POST "+one, func(w http.ResponseWriter, _ *http.Request) { h.writeJSON(w, 200, cyclic()) })
	h.mux.HandleFunc("GET "+list, func(w http.ResponseWriter, _ *http.Request) {
		h.writeList(w, "regions", []eim.Resource{cyclic()}, 1, false)
	})
	for _, c := range []struct{ method, path, route string }{
		{"POST", "/v1/projects/p1/encode-test", one},
		{"GET", "/v1/projects/p1/encode-test/list", list},
		{"GET", "/v1/projects/p1/encode-test/list", list},
	} {
		logs.Reset()
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("X-Request-Id", "rid-42")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 500 || !strings.Contains(w.Body.String(), `"code":"Internal"`) {
			t.Errorf("%s %s: got %d %s, want 500 Internal", c.method, c.path, w.Code, w.Body)
		}
		for _, want := range []string{"level=ERROR", "encode response", "method=" + c.method, "route=" + c.route, "request_id=rid-42", "cycle"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("%s %s: log %q does not have %s", c.method, c.path, logs.String(), want)
			}
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "eim_http_encode_failures_total" {
			continue
		}
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"method=POST,route=" + one: 1, "method=GET,route=" + list: 2}
	if !maps.Equal(got, want) {
		t.Errorf("eim_http_encode_failures_total: got %v, want %v", got, want)
	}
}
