package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// The server rides out a PostgreSQL outage: "eim server" runs in its own
// process on a PostgreSQL of the test's own, with a fleet heartbeating and
// clients calling the API, and the database is stopped (fast shutdown, as
// an operator's restart) for 15 s and started again. The process must
// still be alive, clients see only success or 503 with Retry-After, the
// nodes only retryable errors, no host is ever flagged "No Connection"
// (the heartbeat timeout is 4 s: the outage is almost four timeouts), and
// the API serves reads and writes again within 5 s of the database's
// return.
func TestDatabaseOutagePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and starts a PostgreSQL server of its own for 15 s")
	}
	pg := storetest.StartPostgres(t)
	const (
		nodes    = 24
		interval = time.Second
		timeout  = 4 * time.Second
		outage   = 15 * time.Second
	)
	s := startKillServer(t, "--database", pg.URL(), "--heartbeat-interval", interval.String(), "--heartbeat-timeout", timeout.String())
	d := s.day0()
	osID := d.createOS(t, eim.DefaultProject)
	ids := sim.Generate(nodes, 21)
	hostIDs := register(t, d, eim.DefaultProject, osID, ids)

	// The fleet: Day 0, then heartbeats until the test ends.
	var agentLog syncBuffer
	fctx, stopFleet := context.WithCancel(context.Background())
	fleetDone := make(chan *sim.Report, 1)
	go func() {
		rep, err := sim.Run(fctx, sim.Options{
			URL: s.agentURL, CA: d.ca(t), Identities: ids, Connections: 2,
			ActionTime: 5 * time.Millisecond, Hold: 10 * time.Minute,
			Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second},
			Logger:  slog.New(slog.NewTextHandler(&agentLog, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			fmt.Fprintf(&agentLog, "simulator: %v\n", err)
		}
		fleetDone <- rep
	}()
	var rep *sim.Report
	defer func() {
		stopFleet()
		if rep == nil {
			rep = <-fleetDone
		}
		if t.Failed() {
			t.Logf("agents' warnings and errors:\n%s", agentLog.String())
		}
	}()
	running := func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hosts, _, err := client.ListOf[eim.Host](ctx, s.admin, eim.DefaultProject, client.ListOptions{PageSize: 100, Filter: `hostStatus="Running"`})
		return len(hosts), err
	}
	waitFor(t, "every node provisioned and heartbeating", func() bool {
		n, err := running()
		return err == nil && n == nodes
	})

	// "No Connection" is watched through the API for the whole test: a
	// host flagged by mistake shows it until its next heartbeat (1 s), so
	// a poll every 100 ms sees it.
	var watch struct {
		sync.Mutex
		maxFlagged int
		flaggedAt  time.Time
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stopWatch(); wg.Wait() }()
	wg.Go(func() {
		for wctx.Err() == nil {
			ctx, cancel := context.WithTimeout(wctx, 2*time.Second)
			hosts, _, err := client.ListOf[eim.Host](ctx, s.admin, eim.DefaultProject, client.ListOptions{PageSize: 100, Filter: `hostStatus="No Connection"`})
			cancel()
			if err == nil && len(hosts) > 0 {
				watch.Lock()
				if len(hosts) > watch.maxFlagged {
					watch.maxFlagged, watch.flaggedAt = len(hosts), time.Now()
				}
				watch.Unlock()
			}
			select {
			case <-wctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})

	// API clients: reads and writes, counted by answer.
	api := newAPILoad(t, s)
	for w := range 4 {
		wg.Go(func() { api.run(wctx, w) })
	}
	time.Sleep(time.Second) // a moment of load before the outage

	api.phase.Store(phaseOutage)
	stoppedAt := time.Now()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL stopped; keeping it down for %s", outage)
	// Live, not ready: an orchestrator must not restart the server for
	// the database's outage, and a load balancer may route around it.
	if code := probeStatus(t, s.api+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz during the outage: %d, want 200", code)
	}
	if code := probeStatus(t, s.api+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage: %d, want 503", code)
	}
	select {
	case <-s.exited:
		t.Fatalf("the server exited during the outage (%v)", s.cmd.ProcessState)
	case <-time.After(outage - time.Since(stoppedAt)):
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	api.phase.Store(phaseBack)
	t.Logf("PostgreSQL started again after %s", backAt.Sub(stoppedAt).Round(time.Millisecond))

	// Full service: a read and a write through the API.
	var served time.Duration
	for {
		if api.probe() {
			served = time.Since(backAt)
			break
		}
		if time.Since(backAt) > time.Minute {
			t.Fatal("the API did not serve a read and a write within a minute of the database's return")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the API served a read and a write %s after the database was back", served.Round(time.Millisecond))
	// Ready again once every module loop follows the feed again (each
	// resumes after its back-off).
	var ready time.Duration
	for {
		if probeStatus(t, s.api+"/readyz") == http.StatusOK {
			ready = time.Since(backAt)
			break
		}
		if time.Since(backAt) > 15*time.Second {
			t.Fatal("/readyz not 200 within 15 s of the database's return")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("/readyz 200 again %s after the database was back", ready.Round(time.Millisecond))
	if served > 5*time.Second {
		t.Errorf("the API served again %s after the database came back, want within 5 s", served)
	}

	// Three timeouts more: nobody may be flagged for the database's
	// silence, and the nodes are all still heartbeating.
	time.Sleep(3 * timeout)
	waitFor(t, "every host Running after the outage", func() bool {
		n, err := running()
		return err == nil && n == nodes
	})
	select {
	case <-s.exited:
		t.Fatalf("the server exited (%v)", s.cmd.ProcessState)
	default:
	}
	stopWatch()
	wg.Wait()

	watch.Lock()
	if watch.maxFlagged > 0 {
		t.Errorf("%d hosts shown \"No Connection\" at %s (the database came back at %s): the nodes never stopped",
			watch.maxFlagged, watch.flaggedAt.Format(time.TimeOnly+".000"), backAt.Format(time.TimeOnly+".000"))
	}
	watch.Unlock()
	api.check(t)

	stopFleet()
	rep = <-fleetDone
	if rep == nil {
		t.Fatal("the simulator did not run")
	}
	if rep.Hold == nil || rep.Hold.Revoked != 0 {
		t.Errorf("fleet hold: %+v, want no node's credentials refused", rep.Hold)
	}
	if rep.Hold != nil {
		for msg, n := range rep.Hold.Errors {
			if !strings.Contains(strings.ToLower(msg), "unavailable") {
				t.Errorf("nodes saw %d× %q during the test; want only retryable (unavailable) errors", n, msg)
			}
		}
	}
	checkProvisionedOnce(t, s.admin, eim.DefaultProject, hostIDs)
}

// Phases of the outage test, for the API load's counts.
const (
	phaseBefore int32 = iota
	phaseOutage
	phaseBack
)

// apiLoad calls the API in a loop and counts the answers by phase and
// status; a 503 without Retry-After counts apart.
type apiLoad struct {
	s     *killServer
	token string
	hc    *http.Client
	phase atomic.Int32
	seq   atomic.Int64

	mu        sync.Mutex
	counts    [3]map[int]int
	noRetry   int
	lastOther string
}

func newAPILoad(t *testing.T, s *killServer) *apiLoad {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(s.dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	l := &apiLoad{s: s, token: strings.TrimSpace(string(tok)), hc: &http.Client{Timeout: 20 * time.Second}}
	for i := range l.counts {
		l.counts[i] = map[int]int{}
	}
	return l
}

func (l *apiLoad) do(method, path, body string) (int, http.Header, string, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, l.s.api+"/v1/projects/"+eim.DefaultProject+path, rd)
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := l.hc.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), nil
}

// run calls until ctx ends: a list of hosts, a get, a region created.
func (l *apiLoad) run(ctx context.Context, w int) {
	for ctx.Err() == nil {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/compute/hosts?pageSize=20", ""},
			{"GET", "/compute/hosts/summary", ""},
			{"POST", "/regions", fmt.Sprintf(`{"name":"r-%d-%d"}`, w, l.seq.Add(1))},
		} {
			ph := l.phase.Load()
			status, h, body, err := l.do(c.method, c.path, c.body)
			if err != nil {
				status = -1 // the connection failed: counted, never expected
				body = err.Error()
			}
			l.mu.Lock()
			l.counts[ph][status]++
			if status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
				l.noRetry++
			}
			if status != http.StatusOK && status != http.StatusServiceUnavailable {
				l.lastOther = fmt.Sprintf("%s %s: %d %s", c.method, c.path, status, body)
			}
			l.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probe reports whether a read and a write both succeed now.
func (l *apiLoad) probe() bool {
	status, _, _, err := l.do("GET", "/compute/hosts?pageSize=5", "")
	if err != nil || status != http.StatusOK {
		return false
	}
	status, _, _, err = l.do("POST", "/regions", fmt.Sprintf(`{"name":"probe-%d"}`, l.seq.Add(1)))
	return err == nil && status == http.StatusOK
}

// check: only 200 and 503 (with Retry-After) ever, and the outage did
// answer 503 (it was seen).
func (l *apiLoad) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	names := []string{"before", "during", "after"}
	for ph, c := range l.counts {
		t.Logf("API answers %s the outage: %v", names[ph], c)
		for status, n := range c {
			if status != http.StatusOK && status != http.StatusServiceUnavailable {
				t.Errorf("%d answers %d %s the outage (want only 200 and 503); last: %s", n, status, names[ph], l.lastOther)
			}
		}
	}
	if l.counts[phaseOutage][http.StatusServiceUnavailable] == 0 {
		t.Error("no request was answered 503 during the outage: was the database really away?")
	}
	if l.noRetry > 0 {
		t.Errorf("%d answers 503 without Retry-After", l.noRetry)
	}
}

// probeStatus is the status of a GET of url, without a token.
func probeStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
