package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the test reads the rollout's rows and the lease

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// TestRolloutReplicasKillPostgres: issue 27's rollout proof at a size for
// CI. Four "eim server" processes on one PostgreSQL, the modules apart: one
// of the API, and three of the modules devices call (host, workloads)
// behind round-robin proxies; 300 seeded devices in 3 sites, held by the
// simulator, which runs simulated pods and logs each deploy.
//
//  1. A workload on every device (revision 1, no policy), then revision 2
//     rolled out in ten batches of 10 %, a success threshold of 90 % and at
//     most 10 % of each site updating at once. Mid-batch, the process
//     whose targets loop drives the rollout (the holder of its lease) is
//     SIGKILLed. Another takes the lease over and the rollout goes on from
//     the stored batch to DONE; every device got revision 2 once, not
//     before its batch started, and at no moment did the store give a
//     device the revision outside a started batch or a site more updating
//     devices than its budget.
//  2. Revision 3 crashes on half of the devices: the rollout pauses after
//     its first batch with the reason naming the threshold; only the first
//     batch got revision 3.
//  3. A rollback makes revision 4 (revision 2's spec), rolled out to DONE
//     under the same checks.
func TestRolloutReplicasKillPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four server processes and kills one")
	}
	dsn := freshPostgres(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	seedBin := buildTool(t, "github.com/eimhq/eim/bench/seed", "seed")

	const (
		devices = 300
		sites   = 3
		lease   = 3 * time.Second
		project = eim.DefaultProject
		name    = "camera"
	)
	base := t.TempDir()
	dataDir := filepath.Join(base, "data")
	common := []string{"--database", dsn, "--data-dir", dataDir, "--log-level", "info", "--rate-limit", "0",
		"--lease-ttl", lease.String(), "--database-max-conns", "6"}
	core := &replica{name: "core", args: append(append([]string{}, common...), "--modules", "api"), logFile: filepath.Join(base, "core.log")}
	var mu sync.Mutex // guards the replicas' addresses and children, read by the proxies
	var wls []*replica
	for i := range 3 {
		wls = append(wls, &replica{name: fmt.Sprintf("wl%d", i+1), agent: true, logFile: filepath.Join(base, fmt.Sprintf("wl%d.log", i+1)),
			args: append(append([]string{}, common...), "--modules", "host,workloads", "--heartbeat-interval", "1s",
				"--heartbeat-timeout", "20s", "--workloads-rollout-tick", "300ms")})
	}
	live := func(agent bool) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			var out []string
			for _, r := range wls {
				if r.cmd == nil {
					continue
				}
				if agent {
					out = append(out, r.agentAt)
				} else {
					out = append(out, r.http)
				}
			}
			return out
		}
	}
	agentLB, apiLB := newRRProxy(t, live(true)), newRRProxy(t, live(false))
	for _, r := range wls {
		r.args = append(r.args, "--agent-url", "https://"+agentLB.Addr())
	}
	all := append([]*replica{core}, wls...)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range all {
			r.kill()
		}
		if t.Failed() {
			for _, r := range all {
				b, _ := os.ReadFile(r.logFile)
				t.Logf("%s output (%d starts):\n%s", r.name, r.starts, b)
			}
		}
	})

	// The store made, the sites created; the fleet seeded into them with
	// the server stopped (its caches start from the seeded store).
	core.start(t)
	ctx := context.Background()
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	admin := client.New("http://"+core.http, tok, nil)
	var region eim.Region
	if err := admin.Create(ctx, project, eim.KindRegion, map[string]string{"name": "r"}, &region); err != nil {
		t.Fatal(err)
	}
	var siteIDs []string
	for i := range sites {
		var s eim.Site
		if err := admin.Create(ctx, project, eim.KindSite, map[string]string{"name": fmt.Sprintf("s%d", i), "regionId": region.ResourceID}, &s); err != nil {
			t.Fatal(err)
		}
		siteIDs = append(siteIDs, s.ResourceID)
	}
	core.kill()
	nodesFile := filepath.Join(base, "nodes.jsonl")
	out, err := exec.Command(seedBin, "--database", dsn, "--nodes", fmt.Sprint(devices), "--out", nodesFile, "--seed", "27",
		"--sites", strings.Join(siteIDs, ",")).CombinedOutput()
	noChildRace(t, "seed", out)
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	nodes, err := sim.ReadNodes(strings.NewReader(string(must(os.ReadFile(nodesFile)))))
	if err != nil || len(nodes) != devices {
		t.Fatalf("nodes file: %d nodes, %v", len(nodes), err)
	}
	siteOf := map[string]string{}
	for i, n := range nodes {
		siteOf[n.HostID] = siteIDs[i%sites]
	}
	for _, r := range all {
		mu.Lock()
		r.start(t)
		mu.Unlock()
	}
	wl := client.New("http://"+apiLB.Addr(), tok, nil)

	// The fleet, logging each pod deployed; revision 3 crashes on half.
	var deployLog syncBuffer
	faults := sim.WorkloadFaults{ByRevision: map[int64]float64{3: 0.5}}
	o := sim.Options{URL: "https://" + agentLB.Addr(), CA: string(must(os.ReadFile(filepath.Join(dataDir, "ca.crt")))), Nodes: nodes, Seed: 27,
		Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second}, Connections: 6, Hold: sim.HoldUntilCancelled, Workers: 256,
		WorkloadStart: 300 * time.Millisecond, WorkloadRestart: 500 * time.Millisecond, WorkloadFaults: faults, WorkloadDeploys: &deployLog}
	fctx, stopFleet := context.WithTimeout(ctx, 5*time.Minute)
	defer stopFleet()
	fleetDone := make(chan *sim.Report, 1)
	go func() {
		rep, err := sim.Run(fctx, o)
		if err != nil {
			t.Errorf("simulator: %v", err)
		}
		fleetDone <- rep
	}()

	spec := func(tag string, pol *eim.RolloutPolicy) *client.EdgeWorkloadInput {
		return &client.EdgeWorkloadInput{Name: name, Spec: eim.EdgeWorkloadSpec{
			DeviceSelector: &eim.LabelSelector{MatchExpressions: []eim.LabelSelectorRequirement{{Key: "eim.io/host", Operator: "Exists"}}},
			Pod: eim.PodTemplate{Spec: eim.PodSpec{RestartPolicy: "Always", Containers: []eim.Container{
				{Name: "reader", Image: "registry.example:5000/cam:" + tag}}}},
			RolloutPolicy: pol,
		}}
	}
	policy := func(timeout string) *eim.RolloutPolicy {
		p := &eim.RolloutPolicy{SuccessThreshold: "90%", UpdateTimeout: timeout,
			DisruptionBudget: &eim.DisruptionBudget{GroupBy: []string{"eim.io/site"}, MaxUnavailable: "10%"}}
		for range 10 {
			p.Batches = append(p.Batches, eim.RolloutBatch{Limit: "10%"})
		}
		return p
	}
	status := func() *eim.EdgeWorkloadStatusView {
		st, _, err := wl.EdgeWorkloadStatus(ctx, project, name)
		if err != nil {
			return nil
		}
		return st
	}
	waitLong(t, "revision 1 Running on every device", func() bool {
		if st := status(); st != nil {
			return st.Devices.Running == devices
		}
		_, err := wl.CreateEdgeWorkload(ctx, project, spec("1", nil))
		if err != nil {
			// The modules' processes announce themselves within a
			// refresh: until then the API may refuse.
			t.Logf("create: %v", err)
		}
		return false
	})

	// What the rollouts do, observed: the API's view (polled; each
	// observation dated when its request was sent) and the store's rows,
	// checked at each poll for a device given the revision outside a
	// started batch and for a site over its budget.
	obs := newRolloutObserver(t, wl, db, project, name, siteOf, 10*devices/100/sites)
	octx, stopObs := context.WithCancel(ctx)
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); obs.run(octx) }()
	defer func() { stopObs(); <-obsDone }()

	// 1. Revision 2, its driver SIGKILLed mid-batch.
	if w, err := wl.ReplaceEdgeWorkload(ctx, project, spec("2", policy("2m"))); err != nil || w.Revision != 2 {
		t.Fatalf("revision 2: %+v, %v", w, err)
	}
	var killed *replica
	var atKill *eim.EdgeWorkloadRolloutView
	waitLong(t, "revision 2's third batch under way", func() bool {
		ro := obs.latest()
		if ro == nil || ro.ToRevision != 2 || ro.Batch < 3 || !ro.BatchStarted || ro.CurrentBatch.Updating == 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		killed = holderOf(t, db, "loop/workloads/targets", wls)
		if killed == nil {
			return false
		}
		killed.kill()
		atKill = ro
		return true
	})
	t.Logf("SIGKILLed %s, which held the targets loop's lease, at batch %d of %d (%d of its devices updating, %d done)",
		killed.name, atKill.Batch, atKill.Batches, atKill.CurrentBatch.Updating, atKill.CurrentBatch.Done)
	killedAt := time.Now()
	var taker *replica
	ro := waitRollout(t, obs, 2, eim.RolloutDone)
	waitLong(t, "another process holds the lease", func() bool {
		mu.Lock()
		defer mu.Unlock()
		taker = holderOf(t, db, "loop/workloads/targets", wls)
		return taker != nil
	})
	if taker == killed {
		t.Fatalf("the killed process %s still holds the lease", killed.name)
	}
	t.Logf("revision 2 DONE %s after the kill; the lease taken over by %s; %s", time.Since(killedAt).Round(time.Millisecond), taker.name, ro.Reason)
	batches2 := obs.batches(t, 2)
	waitLong(t, "revision 2 Running on every device", func() bool {
		st := status()
		return st != nil && st.Devices.Running == devices && st.Revision == 2
	})
	checkBatches(t, obs, batches2, 2, deployLog.String(), devices)

	// 2. Revision 3 crashes on half of the devices: the first batch
	// misses the threshold and the rollout pauses.
	if w, err := wl.ReplaceEdgeWorkload(ctx, project, spec("3", policy("8s"))); err != nil || w.Revision != 3 {
		t.Fatalf("revision 3: %+v, %v", w, err)
	}
	ro = waitRollout(t, obs, 3, eim.RolloutPaused)
	if !strings.Contains(ro.Reason, "batch 1 of 11 missed its success threshold (90%)") || ro.Batch != 2 || ro.BatchStarted {
		t.Errorf("revision 3 paused: batch %d (started %v), reason %q; want after batch 1, the threshold named", ro.Batch, ro.BatchStarted, ro.Reason)
	}
	t.Logf("revision 3 PAUSED: %s", ro.Reason)
	batches3 := obs.batches(t, 3)
	first := 0
	for _, b := range batches3 {
		if b != 0 {
			t.Errorf("revision 3: a device in batch %d after a pause at the first", b+1)
		}
		first++
	}
	got3 := map[string]int{}
	for _, d := range parseDeploys(t, deployLog.String()) {
		if d.Revision == 3 {
			got3[d.HostID]++
			if _, ok := batches3[d.HostID]; !ok {
				t.Errorf("%s deployed revision 3 outside its first batch", d.HostID)
			}
		}
	}
	if first != devices/10 || len(got3) != first {
		t.Errorf("revision 3: %d devices in the first batch, %d deployed it; want %d", first, len(got3), devices/10)
	}

	// 3. Roll back (under the first policy again: the rollback takes the
	// workload's current policy): revision 4, revision 2's spec.
	if w, err := wl.ReplaceEdgeWorkload(ctx, project, spec("3", policy("2m"))); err != nil || w.Revision != 3 {
		t.Fatalf("revision 3's policy: %+v, %v", w, err)
	}
	w, err := wl.RollbackEdgeWorkload(ctx, project, name)
	if err != nil || w.Revision != 4 || w.Spec.Pod.Spec.Containers[0].Image != "registry.example:5000/cam:2" {
		t.Fatalf("rollback: %+v, %v", w, err)
	}
	ro = waitRollout(t, obs, 4, eim.RolloutDone)
	if ro.FromRevision != 3 {
		t.Errorf("revision 4's rollout from %d, want 3", ro.FromRevision)
	}
	batches4 := obs.batches(t, 4)
	waitLong(t, "revision 4 Running on every device", func() bool {
		st := status()
		return st != nil && st.Devices.Running == devices && st.Revision == 4
	})
	checkBatches(t, obs, batches4, 4, deployLog.String(), devices)

	stopObs()
	<-obsDone
	obs.check(t)
	stopFleet()
	rep := <-fleetDone
	if rep == nil || rep.Hold == nil || rep.Hold.Workloads == nil {
		t.Fatalf("report without workloads: %+v", rep)
	}
	if h := rep.Hold.Workloads; h.Backwards != 0 || h.Nodes != devices {
		t.Errorf("simulator: %d nodes, %d answers older than the version applied", h.Nodes, h.Backwards)
	}
}

// holderOf is the live replica holding the lease name (nil: none, or one
// whose lease expired).
func holderOf(t *testing.T, db *sql.DB, name string, rs []*replica) *replica {
	t.Helper()
	var h string
	err := db.QueryRow("SELECT holder FROM eim_leases WHERE name = $1 AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint", name).Scan(&h)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.cmd != nil && h == fmt.Sprintf("%s-%d", r.name, r.starts) {
			return r
		}
	}
	return nil
}

// waitRollout waits for the rollout of rev to reach state.
func waitRollout(t *testing.T, obs *rolloutObserver, rev int64, state string) *eim.EdgeWorkloadRolloutView {
	t.Helper()
	var ro *eim.EdgeWorkloadRolloutView
	waitLong(t, fmt.Sprintf("the rollout of revision %d %s", rev, state), func() bool {
		ro = obs.latest()
		if ro != nil && ro.ToRevision == rev && ro.State != state && ro.State != eim.RolloutProgressing {
			t.Fatalf("the rollout of revision %d is %s: %s", rev, ro.State, ro.Reason)
		}
		return ro != nil && ro.ToRevision == rev && ro.State == state
	})
	return ro
}

// checkBatches checks the deploys of rev against its rollout's batches:
// every device deployed it once, and not before its batch started.
func checkBatches(t *testing.T, obs *rolloutObserver, batchOf map[string]int, rev int64, log string, devices int) {
	t.Helper()
	if len(batchOf) != devices {
		t.Errorf("revision %d: %d devices in the rollout's batches, want %d", rev, len(batchOf), devices)
	}
	deploys := map[string][]int64{}
	for _, d := range parseDeploys(t, log) {
		if d.Revision == rev {
			deploys[d.HostID] = append(deploys[d.HostID], d.At)
		}
	}
	early, twice := 0, 0
	per := map[int]int{}
	for host, ats := range deploys {
		b, ok := batchOf[host]
		if !ok {
			t.Errorf("revision %d: %s deployed it outside the rollout", rev, host)
			continue
		}
		per[b]++
		if len(ats) > 1 {
			twice++
			t.Errorf("revision %d: %s deployed it %d times", rev, host, len(ats))
		}
		if ns := obs.notStarted(rev, b); ats[0] < ns.UnixNano() {
			early++
			t.Errorf("revision %d: %s of batch %d deployed it at %s, its batch was seen not started at %s",
				rev, host, b+1, time.Unix(0, ats[0]).Format(time.StampMilli), ns.Format(time.StampMilli))
		}
	}
	if len(deploys) != devices {
		t.Errorf("revision %d: deployed on %d devices, want %d", rev, len(deploys), devices)
	}
	keys := make([]int, 0, len(per))
	for b := range per {
		keys = append(keys, b)
	}
	sort.Ints(keys)
	var sizes []string
	for _, b := range keys {
		sizes = append(sizes, fmt.Sprint(per[b]))
	}
	t.Logf("revision %d: deployed once on each of %d devices (%d early, %d twice), by batch %s", rev, len(deploys), early, twice, strings.Join(sizes, ", "))
}

func parseDeploys(t *testing.T, log string) []sim.WorkloadDeploy {
	t.Helper()
	var out []sim.WorkloadDeploy
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var d sim.WorkloadDeploy
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("deploy line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

// rolloutObserver polls a workload's rollout through the API and its rows
// in the store.
type rolloutObserver struct {
	t       *testing.T
	cl      *client.Client
	db      *sql.DB
	project string
	name    string
	siteOf  map[string]string
	budget  int

	mu   sync.Mutex
	seen []observation
	last *eim.EdgeWorkloadRolloutView
	// violations of the store's rows: a device given the rollout's
	// revision outside a started batch, a site over its budget.
	outside, over []string
	polls         int
}

type observation struct {
	sent time.Time
	ro   eim.EdgeWorkloadRolloutView
}

func newRolloutObserver(t *testing.T, cl *client.Client, db *sql.DB, project, name string, siteOf map[string]string, budget int) *rolloutObserver {
	return &rolloutObserver{t: t, cl: cl, db: db, project: project, name: name, siteOf: siteOf, budget: budget}
}

func (o *rolloutObserver) run(ctx context.Context) {
	for ctx.Err() == nil {
		sent := time.Now()
		ro, err := o.cl.EdgeWorkloadRollout(ctx, o.project, o.name)
		if err == nil {
			o.mu.Lock()
			o.seen = append(o.seen, observation{sent, *ro})
			o.last = ro
			o.mu.Unlock()
		}
		o.rows(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rows checks the store's rows in one snapshot: every device whose target
// is the rollout's revision is in a started batch (its row not waiting,
// its batch not after the current one), and no site has more devices
// updating than its budget.
func (o *rolloutObserver) rows(ctx context.Context) {
	rows, err := o.db.QueryContext(ctx, `SELECT t.host_id, t.revision, r.to_revision, r.batch, d.batch, d.state
		FROM edge_workload_targets t JOIN edge_workload_rollouts r ON r.project = t.project AND r.name = t.name
		LEFT JOIN edge_workload_rollout_devices d ON d.project = t.project AND d.name = t.name AND d.host_id = t.host_id
		WHERE t.project = $1 AND t.name = $2`, o.project, o.name)
	if err != nil {
		return
	}
	defer rows.Close()
	updating := map[string]int{}
	var outside []string
	for rows.Next() {
		var host string
		var target, rev, cur int64
		var batch sql.NullInt64
		var state sql.NullString
		if err := rows.Scan(&host, &target, &rev, &cur, &batch, &state); err != nil {
			return
		}
		if state.String == eim.RolloutDeviceUpdating {
			updating[o.siteOf[host]]++
		}
		if target == rev && (!state.Valid || state.String == eim.RolloutDeviceWaiting || batch.Int64 > cur) {
			outside = append(outside, fmt.Sprintf("%s has revision %d as its target in batch %d (%s), the rollout at batch %d",
				host, target, batch.Int64+1, state.String, cur+1))
		}
	}
	if rows.Err() != nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polls++
	o.outside = append(o.outside, outside...)
	for site, n := range updating {
		if n > o.budget {
			o.over = append(o.over, fmt.Sprintf("site %s: %d devices updating, budget %d", site, n, o.budget))
		}
	}
}

// latest is the last rollout seen.
func (o *rolloutObserver) latest() *eim.EdgeWorkloadRolloutView {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.last
}

// notStarted is the last time batch b (from 0) of the rollout of rev was
// seen not started (the time its request was sent): a device of that
// batch given the revision before it was given it outside its batch.
func (o *rolloutObserver) notStarted(rev int64, b int) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var at time.Time
	for _, x := range o.seen {
		ro := x.ro
		if ro.ToRevision < rev || ro.ToRevision == rev && (ro.Batch < b+1 || ro.Batch == b+1 && !ro.BatchStarted) {
			at = x.sent
		}
	}
	return at
}

// batches reads each device's batch (from 0) of the rollout of rev from
// the store, and checks that the rollout never went back to an earlier
// batch.
func (o *rolloutObserver) batches(t *testing.T, rev int64) map[string]int {
	t.Helper()
	o.mu.Lock()
	prev := 0
	for _, x := range o.seen {
		if x.ro.ToRevision != rev {
			continue
		}
		if x.ro.Batch < prev {
			t.Errorf("the rollout of revision %d went back from batch %d to %d", rev, prev, x.ro.Batch)
		}
		prev = x.ro.Batch
	}
	o.mu.Unlock()
	rows, err := o.db.Query(`SELECT d.host_id, d.batch FROM edge_workload_rollout_devices d JOIN edge_workload_rollouts r ON r.project = d.project AND r.name = d.name
		WHERE d.project = $1 AND d.name = $2 AND r.to_revision = $3`, o.project, o.name, rev)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var host string
		var b int
		if err := rows.Scan(&host, &b); err != nil {
			t.Fatal(err)
		}
		out[host] = b
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// check reports what the store's rows showed.
func (o *rolloutObserver) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	t.Logf("the store's rows checked %d times, the API's rollout seen %d times", o.polls, len(o.seen))
	if o.polls < 10 {
		t.Errorf("the store's rows were checked %d times", o.polls)
	}
	for i, v := range o.outside {
		if i == 10 {
			t.Errorf("… %d more", len(o.outside)-i)
			break
		}
		t.Errorf("given outside its batch: %s", v)
	}
	for i, v := range o.over {
		if i == 10 {
			t.Errorf("… %d more", len(o.over)-i)
			break
		}
		t.Errorf("over the disruption budget: %s", v)
	}
}
