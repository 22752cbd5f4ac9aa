package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/eimhq/eim/metrics"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

// series gathers reg and returns each sample of the family name as
// "label=value,…" (sorted by label name) → value; a histogram's value is
// its count.
func series(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			out[labelString(m)] = value(m)
		}
	}
	return out
}

func labelString(m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// apiLike is a handler with a mux of its own mounted at "/" of the
// listener's mux, as the API is: it names its route with SetRoute.
type apiLike struct{ mux *http.ServeMux }

func (a apiLike) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(context.WithoutCancel(r.Context())) // a copy, as the API makes
	a.mux.ServeHTTP(w, r)
	metrics.SetRoute(w, r.Pattern)
}

func newListener(reg prometheus.Registerer) http.Handler {
	inner := http.NewServeMux()
	inner.HandleFunc("GET /v1/projects/{projectName}/compute/hosts/{resourceId}", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.PathValue("resourceId"), "-gone") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		io.WriteString(w, "{}")
	})
	inner.HandleFunc("/", http.NotFound)
	outer := http.NewServeMux()
	outer.Handle("/", apiLike{inner})
	outer.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return metrics.NewHTTP(reg, "http").Wrap(outer)
}

// TestHTTPRouteTemplate: requests count under the route template that
// served them, by method and code, never under their raw path; 1,000
// distinct IDs and 1,000 unknown paths make no more series.
func TestHTTPRouteTemplate(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := httptest.NewServer(newListener(reg))
	defer srv.Close()
	get := func(path string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := range 1000 {
		get(fmt.Sprintf("/v1/projects/p%d/compute/hosts/host-%08x", i%7, i))
		get(fmt.Sprintf("/no/such/path/%d", i))
	}
	get("/v1/projects/default/compute/hosts/host-gone")
	get("/healthz")

	const route = "/v1/projects/{projectName}/compute/hosts/{resourceId}"
	got := series(t, reg, "eim_http_requests_total")
	want := map[string]float64{
		"code=200,listener=http,method=GET,route=" + route:  1000,
		"code=404,listener=http,method=GET,route=" + route:  1,
		"code=404,listener=http,method=GET,route=unmatched": 1000,
		"code=204,listener=http,method=GET,route=/healthz":  1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("eim_http_requests_total:\n got %v\nwant %v", got, want)
	}
	dur := series(t, reg, "eim_http_request_duration_seconds")
	if len(dur) != 3 || dur["listener=http,method=GET,route="+route] != 1001 {
		t.Errorf("eim_http_request_duration_seconds: got %v, want 3 series, 1001 requests of the hosts' route", dur)
	}
}

// TestHTTPMethodsBounded: made-up methods fold into "other".
func TestHTTPMethodsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newListener(reg)
	for i := range 50 {
		r := httptest.NewRequest("GET", "/healthz", nil)
		r.Method = fmt.Sprintf("X%d", i)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	got := series(t, reg, "eim_http_requests_total")
	if len(got) != 1 || got["code=404,listener=http,method=other,route=unmatched"] != 50 {
		t.Errorf("got %v, want the 50 requests under method other", got)
	}
}

// TestHTTPListenersShare: two listeners' instruments on one registry
// share the families (no duplicate registration), told apart by label.
func TestHTTPListenersShare(t *testing.T) {
	reg := prometheus.NewRegistry()
	for _, l := range []string{"http", "agent"} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /oauth2/token", func(w http.ResponseWriter, r *http.Request) {})
		metrics.NewHTTP(reg, l).Wrap(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/oauth2/token", nil))
	}
	got := series(t, reg, "eim_http_requests_total")
	if len(got) != 2 || got["code=200,listener=agent,method=POST,route=/oauth2/token"] != 1 {
		t.Errorf("got %v, want one request on each listener", got)
	}
}

// hostService answers heartbeats, refuses an empty boot ID, and leaves
// the rest unimplemented.
type hostService struct {
	hostv1connect.UnimplementedHostServiceHandler
}

func (hostService) Heartbeat(_ context.Context, req *connect.Request[hostv1.HeartbeatRequest]) (*connect.Response[hostv1.HeartbeatResponse], error) {
	if req.Msg.BootId == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("boot_id: required"))
	}
	return connect.NewResponse(&hostv1.HeartbeatResponse{}), nil
}

// TestRPCByProcedureAndCode: southbound calls through a real Connect
// handler count by procedure and code.
func TestRPCByProcedureAndCode(t *testing.T) {
	reg := prometheus.NewRegistry()
	rpc := metrics.NewRPC(reg)
	mux := http.NewServeMux()
	mux.Handle(hostv1connect.NewHostServiceHandler(hostService{}, connect.WithInterceptors(rpc.Interceptor())))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := hostv1connect.NewHostServiceClient(srv.Client(), srv.URL)
	ctx := context.Background()
	for range 3 {
		if _, err := c.Heartbeat(ctx, connect.NewRequest(&hostv1.HeartbeatRequest{BootId: "b"})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Heartbeat(ctx, connect.NewRequest(&hostv1.HeartbeatRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("empty boot ID: got %v, want invalid_argument", err)
	}
	if _, err := c.ReportHardware(ctx, connect.NewRequest(&hostv1.ReportHardwareRequest{})); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("ReportHardware: got %v, want unimplemented", err)
	}
	got := series(t, reg, "eim_rpc_requests_total")
	want := map[string]float64{
		"code=ok,procedure=" + hostv1connect.HostServiceHeartbeatProcedure:                 3,
		"code=invalid_argument,procedure=" + hostv1connect.HostServiceHeartbeatProcedure:   1,
		"code=unimplemented,procedure=" + hostv1connect.HostServiceReportHardwareProcedure: 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("eim_rpc_requests_total:\n got %v\nwant %v", got, want)
	}
	dur := series(t, reg, "eim_rpc_duration_seconds")
	if dur["procedure="+hostv1connect.HostServiceHeartbeatProcedure] != 4 {
		t.Errorf("eim_rpc_duration_seconds: got %v, want 4 heartbeats timed", dur)
	}
}

// TestRegisterShares: a second instance of a component gets the series
// registered first, not a duplicate-registration panic.
func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	mk := func() prometheus.Counter {
		return metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "eim_test_total", Help: "h"}))
	}
	a, b := mk(), mk()
	a.Inc()
	b.Inc()
	if got := series(t, reg, "eim_test_total")[""]; got != 2 {
		t.Errorf("got %v, want 2", got)
	}
	if metrics.Register(nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "x", Help: "h"})) == nil {
		t.Error("nil registerer: got nil, want the collector")
	}
}
