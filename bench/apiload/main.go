// Command apiload measures the northbound API of a running eim server: host
// creates per second with N concurrent clients, then latency percentiles of a
// filtered list (pageSize 100) and of get-by-id against the stored fleet.
//
// It sends traffic only to the server it is given (use a loopback address).
//
//	apiload --server http://127.0.0.1:8080 --token-file eim-data/admin.token --hosts 100000 --clients 32
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "apiload:", err)
		os.Exit(1)
	}
}

type config struct {
	server, token, project string
	hosts, clients         int
	samples, sites         int
	skipCreate             bool
	serverPID              int // >0: report the server's CPU per request of each phase
}

func run() error {
	var c config
	var tokenFile string
	flag.StringVar(&c.server, "server", "http://127.0.0.1:8080", "base URL of the eim server (loopback only)")
	flag.StringVar(&tokenFile, "token-file", "eim-data/admin.token", "file holding a bearer token with write access")
	flag.StringVar(&c.project, "project", "default", "project to create hosts in")
	flag.IntVar(&c.hosts, "hosts", 100000, "hosts to create")
	flag.IntVar(&c.clients, "clients", 32, "concurrent clients")
	flag.IntVar(&c.samples, "samples", 2000, "requests per latency measurement")
	flag.IntVar(&c.sites, "sites", 100, "sites (in one region) the hosts are spread over")
	flag.BoolVar(&c.skipCreate, "skip-create", false, "measure reads only, against hosts already there")
	flag.IntVar(&c.serverPID, "server-pid", 0, "process ID of the eim server (on this machine): report its CPU time per request of each phase")
	flag.Parse()

	u, err := url.Parse(c.server)
	if err != nil {
		return fmt.Errorf("--server: %w", err)
	}
	if h := u.Hostname(); h != "localhost" && !strings.HasPrefix(h, "127.") && h != "::1" {
		return fmt.Errorf("--server %s: only loopback targets are allowed", c.server)
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	c.token = strings.TrimSpace(string(tok))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.clients * 2, MaxConnsPerHost: c.clients * 2}, Timeout: 30 * time.Second}
	l := &loader{c: c, http: cl}

	var ids, sites []string
	var region string
	if !c.skipCreate {
		if region, sites, err = l.createSites(ctx); err != nil {
			return err
		}
		cpu := l.cpuMark()
		if ids, err = l.create(ctx, sites); err != nil {
			return err
		}
		cpu.report("create", c.hosts)
	} else if ids, region, sites, err = l.existing(ctx); err != nil {
		return err
	}
	// List measurements: each filter shape a user interface uses, paged 100
	// at a time through the first 1,000 matches.
	lists := []struct{ name, filter string }{
		{"list, no filter", ""},
		{"list, filter by site", fmt.Sprintf("site.resourceId=%q", sites[0])},
		{"list, filter by region (nested)", fmt.Sprintf("site.region.resourceId=%q", region)},
		{"list, filter by state (all match)", "desiredState=HOST_STATE_ONBOARDED"},
		{"list, filter by state and site", fmt.Sprintf("desiredState=HOST_STATE_ONBOARDED AND site.resourceId=%q", sites[1%len(sites)])},
		{"list, name substring (table scan)", `name="bench-1234*"`},
	}
	for _, m := range lists {
		if err := l.measure(ctx, m.name, func(i int) error {
			q := url.Values{"pageSize": {"100"}, "offset": {fmt.Sprint((i % 10) * 100)}}
			if m.filter != "" {
				q.Set("filter", m.filter)
			}
			return l.do(ctx, "GET", "/compute/hosts?"+q.Encode(), nil, nil)
		}); err != nil {
			return err
		}
	}
	return l.measure(ctx, "get by id", func(i int) error {
		return l.do(ctx, "GET", "/compute/hosts/"+ids[(i*7919)%len(ids)], nil, nil)
	})
}

type loader struct {
	c    config
	http *http.Client
}

func (l *loader) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.c.server+"/v1/projects/"+l.c.project+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+l.c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (l *loader) create(ctx context.Context, sites []string) ([]string, error) {
	ids := make([]string, l.c.hosts)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, l.c.clients)
	start := time.Now()
	lat := make([][]time.Duration, l.c.clients)
	for w := range l.c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= l.c.hosts || ctx.Err() != nil {
					return
				}
				var out struct {
					ResourceID string `json:"resourceId"`
				}
				t0 := time.Now()
				err := l.do(ctx, "POST", "/compute/hosts", map[string]any{"name": fmt.Sprintf("bench-%d", i), "uuid": uuid(), "siteId": sites[i%len(sites)]}, &out)
				if err != nil {
					errc <- err
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
				ids[i] = out.ResourceID
				if n := done.Add(1); n%10000 == 0 {
					fmt.Fprintf(os.Stderr, "  %d hosts, %.0f/s\n", n, float64(n)/time.Since(start).Seconds())
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	el := time.Since(start)
	fmt.Printf("create %d hosts, %d clients: %.1f s, %.0f creates/s, latency %s\n",
		l.c.hosts, l.c.clients, el.Seconds(), float64(l.c.hosts)/el.Seconds(), pct(slices.Concat(lat...)))
	return ids, nil
}

type idOnly struct {
	ResourceID string `json:"resourceId"`
}

// createSites creates one region and --sites sites in it.
func (l *loader) createSites(ctx context.Context) (string, []string, error) {
	var r idOnly
	if err := l.do(ctx, "POST", "/regions", map[string]any{"name": "bench-region"}, &r); err != nil {
		return "", nil, err
	}
	sites := make([]string, max(1, l.c.sites))
	for i := range sites {
		var s idOnly
		if err := l.do(ctx, "POST", "/sites", map[string]any{"name": fmt.Sprintf("bench-site-%d", i), "regionId": r.ResourceID}, &s); err != nil {
			return "", nil, err
		}
		sites[i] = s.ResourceID
	}
	return r.ResourceID, sites, nil
}

// existing finds the hosts, region and sites of an earlier run.
func (l *loader) existing(ctx context.Context) (ids []string, region string, sites []string, err error) {
	var rs struct {
		Regions []idOnly `json:"regions"`
	}
	if err := l.do(ctx, "GET", "/regions?filter=name%3D%22bench-region%22", nil, &rs); err != nil {
		return nil, "", nil, err
	}
	if len(rs.Regions) == 0 {
		return nil, "", nil, errors.New("no bench-region stored; run without --skip-create")
	}
	region = rs.Regions[0].ResourceID
	var ss struct {
		Sites []idOnly `json:"sites"`
	}
	if err := l.do(ctx, "GET", "/sites?pageSize=100&filter=regionId%3D%22"+region+"%22", nil, &ss); err != nil {
		return nil, "", nil, err
	}
	for _, s := range ss.Sites {
		sites = append(sites, s.ResourceID)
	}
	for off := 0; off < 10000; off += 100 {
		var out struct {
			Hosts []idOnly `json:"hosts"`
		}
		if err := l.do(ctx, "GET", fmt.Sprintf("/compute/hosts?pageSize=100&offset=%d", off), nil, &out); err != nil {
			return nil, "", nil, err
		}
		for _, h := range out.Hosts {
			ids = append(ids, h.ResourceID)
		}
		if len(out.Hosts) < 100 {
			break
		}
	}
	if len(ids) == 0 || len(sites) == 0 {
		return nil, "", nil, errors.New("no hosts or sites stored; run without --skip-create")
	}
	return ids, region, sites, nil
}

// measure runs f samples times from one client (latency, not throughput) and
// prints percentiles.
func (l *loader) measure(ctx context.Context, name string, f func(i int) error) error {
	for i := range 50 { // warm-up
		if err := f(i); err != nil {
			return err
		}
	}
	lat := make([]time.Duration, 0, l.c.samples)
	cpu := l.cpuMark()
	for i := range l.c.samples {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t0 := time.Now()
		if err := f(i); err != nil {
			return err
		}
		lat = append(lat, time.Since(t0))
	}
	fmt.Printf("%s: %s\n", name, pct(lat))
	cpu.report(name, l.c.samples)
	return nil
}

// cpuMark is the server's CPU time at the start of a phase (none without
// --server-pid).
type cpuMark struct {
	pid   int
	start time.Duration
}

func (l *loader) cpuMark() cpuMark {
	if l.c.serverPID <= 0 {
		return cpuMark{}
	}
	t, err := processCPU(l.c.serverPID)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiload: server CPU:", err)
		return cpuMark{}
	}
	return cpuMark{pid: l.c.serverPID, start: t}
}

// report prints the server's CPU time per request of the phase since m.
func (m cpuMark) report(name string, requests int) {
	if m.pid == 0 || requests == 0 {
		return
	}
	t, err := processCPU(m.pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apiload: server CPU:", err)
		return
	}
	d := t - m.start
	fmt.Printf("  server CPU, %s: %.2f s for %d requests, %d µs per request\n", name, d.Seconds(), requests, d.Microseconds()/int64(requests))
}

// processCPU is a process's user and system CPU time from /proc/PID/stat
// (fields 14 and 15, in clock ticks of 1/100 s, as on every Linux this
// runs on).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start past the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	var user, sys int64
	if _, err := fmt.Sscan(f[11], &user); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime: %w", pid, err)
	}
	if _, err := fmt.Sscan(f[12], &sys); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: stime: %w", pid, err)
	}
	return time.Duration(user+sys) * 10 * time.Millisecond, nil
}

func pct(d []time.Duration) string {
	if len(d) == 0 {
		return "no samples"
	}
	slices.Sort(d)
	p := func(q float64) time.Duration {
		return d[min(len(d)-1, int(q*float64(len(d))))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %s p95 %s p99 %s max %s (n=%d)", p(0.50), p(0.95), p(0.99), d[len(d)-1].Round(10*time.Microsecond), len(d))
}
