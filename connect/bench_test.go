package connect_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkTunnelVsDirect measures one request to the upstream directly
// and the same request through the gateway, the tunnel and the agent, in
// one run: sequential small GETs (latency) and 1 MiB answers
// (throughput). It reports both and their ratio.
//
//	go test -run '^$' -bench TunnelVsDirect -benchtime 2000x ./connect
func BenchmarkTunnelVsDirect(b *testing.B) {
	e := newEnv(b, 1)
	gw := e.gws[0]
	e.await(e.runAgent("edge", e.token(gw, "edge", "")))
	admin := e.admin()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer hc.CloseIdleConnections()
	get := func(url string, auth bool) int64 {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+admin)
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %s, %v", url, resp.Status, err)
		}
		return n
	}
	direct, tunnel := e.upstream.URL, gw.http.URL+"/kubernetes/p-one-edge"
	for range 50 { // warm both paths' connections
		get(direct+"/api", false)
		get(tunnel+"/api", true)
	}
	measure := func(base, path string, auth bool, n int) (time.Duration, int64) {
		var bytes int64
		start := time.Now()
		for range n {
			bytes += get(base+path, auth)
		}
		return time.Since(start), bytes
	}
	b.ResetTimer()
	dSmall, _ := measure(direct, "/api", false, b.N)
	tSmall, _ := measure(tunnel, "/api", true, b.N)
	big := max(b.N/50, 10)
	dBig, dBytes := measure(direct, "/big", false, big)
	tBig, tBytes := measure(tunnel, "/big", true, big)
	b.StopTimer()
	us := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
	mbs := func(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / (1 << 20) }
	b.ReportMetric(us(dSmall, b.N), "direct-µs/req")
	b.ReportMetric(us(tSmall, b.N), "tunnel-µs/req")
	b.ReportMetric(float64(tSmall)/float64(dSmall), "latency-ratio")
	b.ReportMetric(mbs(dBytes, dBig), "direct-MiB/s")
	b.ReportMetric(mbs(tBytes, tBig), "tunnel-MiB/s")
	b.ReportMetric(mbs(dBytes, dBig)/mbs(tBytes, tBig), "throughput-ratio")
	b.ReportMetric(0, "ns/op")
}

// bigBody is the upstream's 1 MiB answer.
var bigBody = strings.Repeat("0123456789abcdef", 1<<16)
