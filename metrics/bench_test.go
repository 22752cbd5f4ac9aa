package metrics_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim/metrics"
)

// nopWriter is a ResponseWriter that keeps nothing.
type nopWriter struct{ h http.Header }

func (w nopWriter) Header() http.Header       { return w.h }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}

// BenchmarkHTTPOverhead: a request routed by a ServeMux with an API-like
// pattern, bare and instrumented; the difference is the instrument's cost
// per request.
//
//	go test -run '^$' -bench HTTPOverhead -benchmem ./metrics
func BenchmarkHTTPOverhead(b *testing.B) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/projects/{projectName}/compute/hosts/{resourceId}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	req := httptest.NewRequest("GET", "/v1/projects/default/compute/hosts/host-1a2b3c4d", nil)
	w := nopWriter{h: http.Header{}}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", mux},
		{"instrumented", metrics.NewHTTP(prometheus.NewRegistry(), "http").Wrap(mux)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(w, req)
			}
		})
	}
}
