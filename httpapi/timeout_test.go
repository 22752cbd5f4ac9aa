package httpapi

import (
	"net/http/httptest"
	"testing"
	"time"
)

func TestTimeoutOf(t *testing.T) {
	h := New(nil, nil, Options{}).(*handler)
	const log = "/v1/projects/p1/compute/instances/inst-0000abcd/provisioning_log"
	for _, c := range []struct {
		method, target string
		want           time.Duration
	}{
		{"GET", log + "?wait=20", 25 * time.Second},
		{"GET", log + "?wait=30&after=3", 35 * time.Second},
		{"GET", log + "?wait=5", 15 * time.Second}, // the request timeout covers it
		{"GET", log, 15 * time.Second},
		{"GET", log + "?wait=31", 15 * time.Second}, // refused by the handler
		{"GET", log + "?wait=x", 15 * time.Second},
		{"POST", log + "?wait=20", 15 * time.Second},
		{"GET", "/v1/projects/p1/compute/hosts?wait=20", 15 * time.Second},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if got := h.timeoutOf(r); got != c.want {
			t.Errorf("%s %s: got %v, want %v", c.method, c.target, got, c.want)
		}
	}
}
