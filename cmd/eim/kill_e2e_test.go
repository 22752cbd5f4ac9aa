package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/internal/racecheck"
)

// The Day-0 flow survives a real crash: "eim server" runs in a child
// process that is SIGKILLed (no draining, no flushing of the write
// batchers, no closing of the database) at several points of the nodes'
// flows and restarted on the same data directory and ports, while
// simulated nodes running the real agent code keep going.

// childServerEnv, set to 1, makes the test binary run "eim server" with its
// arguments instead of the tests (see TestMain).
const childServerEnv = "EIM_TEST_CHILD_SERVER"

// runChildServer is the child process: Main with the process's arguments,
// stopped gracefully by SIGINT or SIGTERM (the tests send SIGKILL). It
// exits at once when its standard input ends: the test process holds the
// other end, so a test binary that dies (a go test timeout, say) leaves no
// server behind.
func runChildServer() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	if err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "eim: "+errorText(err))
		return 1
	}
	return 0
}

// killServer is "eim server" in a child process that can be SIGKILLed.
type killServer struct {
	dataDir  string
	bootDir  string
	logFile  string // the children's stdout and stderr, one after the other
	extra    []string
	starts   int
	cmd      *exec.Cmd
	lifeline *os.File      // the child's standard input, closed after it is gone
	exited   chan struct{} // closed when cmd has been waited for
	api      string        // http://127.0.0.1:PORT
	agentURL string        // https://127.0.0.1:PORT
	admin    *client.Client
	hc       *http.Client
}

// startKillServer starts the child on fresh ports with a boot artifacts
// directory holding a tiny OS image. At cleanup the child is killed, and
// its output is logged if the test failed.
func startKillServer(t *testing.T, extra ...string) *killServer {
	t.Helper()
	base := t.TempDir()
	s := &killServer{dataDir: filepath.Join(base, "data"), bootDir: filepath.Join(base, "boot"),
		logFile: filepath.Join(base, "server.log"), extra: extra, hc: &http.Client{Transport: &http.Transport{}}}
	if err := os.MkdirAll(s.bootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.bootDir, "os.img"), []byte("a tiny disk image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		s.hc.CloseIdleConnections()
		b, _ := os.ReadFile(s.logFile)
		if racecheck.Reported(b) { // the child is this test binary: built with -race when the test is
			t.Errorf("the server process reported a data race")
		}
		if t.Failed() {
			t.Logf("server output (%d starts):\n%s", s.starts, b)
		}
	})
	s.start(t, "127.0.0.1:0", "127.0.0.1:0")
	return s
}

// start runs the child with the given listen addresses and waits until it
// prints both of its addresses.
func (s *killServer) start(t *testing.T, apiAddr, agentAddr string) {
	t.Helper()
	s.starts++
	args := append([]string{"server", "--data-dir", s.dataDir, "--http-addr", apiAddr, "--agent-addr", agentAddr,
		"--boot-artifacts", s.bootDir, "--log-level", "warn", "--rate-limit", "0"}, s.extra...)
	var api, ag []string
	c := startChild(t, s.logFile, fmt.Sprintf("server start %d", s.starts), args, func(out string) bool {
		api, ag = servingRE.FindStringSubmatch(out), agentsRE.FindStringSubmatch(out)
		return api != nil && ag != nil
	})
	s.cmd, s.lifeline, s.exited = c.cmd, c.lifeline, c.exited
	s.api, s.agentURL = api[1], ag[1]
	tok, err := os.ReadFile(filepath.Join(s.dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	s.admin = client.New(s.api, strings.TrimSpace(string(tok)), s.hc)
}

// child is "eim server" in a child process: the test binary run with
// childServerEnv (see runChildServer).
type child struct {
	cmd      *exec.Cmd
	lifeline *os.File      // the child's standard input, closed after it is gone
	exited   chan struct{} // closed when cmd has been waited for
}

// startChild starts a child with args, its output appended to logFile
// after a line naming the start, and waits up to 30 s until ready holds
// for what this start printed.
func startChild(t *testing.T, logFile, name string, args []string, ready func(out string) bool) child {
	t.Helper()
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "=== %s at %s\n", name, time.Now().Format(time.TimeOnly+".000"))
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	from := fi.Size()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childServerEnv+"=1")
	stdin, lifeline, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, f, f
	err = cmd.Start()
	f.Close() // the child has its own descriptors
	stdin.Close()
	if err != nil {
		lifeline.Close()
		t.Fatalf("%s: %v", name, err)
	}
	c := child{cmd: cmd, lifeline: lifeline, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		out := string(b[min(from, int64(len(b))):])
		if ready(out) {
			return c
		}
		select {
		case <-c.exited:
			t.Fatalf("%s: exited before serving (%v):\n%s", name, cmd.ProcessState, out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no addresses within 30 s:\n%s", name, out)
		}
	}
}

// kill SIGKILLs the child and waits until it is gone.
func (c *child) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	c.lifeline.Close()
	c.cmd, c.lifeline = nil, nil
}

// kill SIGKILLs the child and waits until it is gone.
func (s *killServer) kill() {
	c := child{cmd: s.cmd, lifeline: s.lifeline, exited: s.exited}
	c.kill()
	s.cmd, s.lifeline = nil, nil
	s.hc.CloseIdleConnections()
}

// killAndRestart kills the child and starts a new one on the same data
// directory and ports.
func (s *killServer) killAndRestart(t *testing.T) {
	t.Helper()
	s.kill()
	s.start(t, hostPort(t, s.api), hostPort(t, s.agentURL))
}

// day0 is the running child as the helpers of the Day-0 tests take it.
func (s *killServer) day0() *day0Server {
	return &day0Server{dataDir: s.dataDir, bootDir: s.bootDir, api: s.api, agentURL: s.agentURL, admin: s.admin}
}

// fleetCounts counts the hosts of a project by how far their flow got.
type fleetCounts struct {
	hosts       int
	discovered  int // host current ONBOARDED: the node discovered
	inProgress  int // instance "Provisioning In Progress: …"
	provisioned int // instance "Provisioned": workflow done, node rebooting
	running     int // instance current RUNNING: the node reported in
}

func (c fleetCounts) String() string {
	return fmt.Sprintf("%d hosts: %d discovered, %d in their workflow, %d provisioned, %d running",
		c.hosts, c.discovered, c.inProgress, c.provisioned, c.running)
}

// counts lists the project's hosts (with their instances) through the API.
// An error (the server being down, for one) is returned, not fatal.
func (s *killServer) counts(project string) (fleetCounts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var c fleetCounts
	for offset := 0; ; {
		hosts, page, err := client.ListOf[eim.Host](ctx, s.admin, project, client.ListOptions{PageSize: 100, Offset: offset})
		if err != nil {
			return c, err
		}
		for _, h := range hosts {
			c.hosts++
			if h.CurrentState == eim.HostStateOnboarded {
				c.discovered++
			}
			if in := h.Instance; in != nil {
				switch {
				case strings.HasPrefix(in.ProvisioningStatus, "Provisioning In Progress"):
					c.inProgress++
				case in.ProvisioningStatus == "Provisioned":
					c.provisioned++
				}
				if in.CurrentState == eim.InstanceStateRunning {
					c.running++
				}
			}
		}
		offset += len(hosts)
		if !page.HasNext || len(hosts) == 0 {
			return c, nil
		}
	}
}

// waitCounts polls the counts until cond holds (the server may be
// restarting meanwhile), failing the test after 60 s.
func (s *killServer) waitCounts(t *testing.T, what, project string, cond func(fleetCounts) bool) fleetCounts {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last fleetCounts
	var lastErr error
	for {
		c, err := s.counts(project)
		if err == nil && cond(c) {
			return c
		}
		if err == nil {
			last = c
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last counts: %v (last error %v)", what, last, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDay0KillSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server process several times")
	}
	testDay0Kill(t, startKillServer(t))
}

func TestDay0KillPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server process several times")
	}
	testDay0Kill(t, startKillServer(t, "--database", freshPostgres(t)))
}

func testDay0Kill(t *testing.T, s *killServer) {
	// One after the other, on the same server and data directory.
	t.Run("at chosen points of the flow", func(t *testing.T) {
		const nodes = 24
		f := s.startFleet(t, eim.DefaultProject, nodes, 11)
		// Each point is a threshold of what the API shows, so the kill
		// still happens if the fleet outran the poll.
		for _, k := range []struct {
			when string
			cond func(fleetCounts) bool
		}{
			{"just after the first Discover", func(c fleetCounts) bool { return c.discovered >= 1 }},
			{"with a third of the nodes in their workflow", func(c fleetCounts) bool { return c.inProgress >= nodes/3 }},
			{"as the first workflows finish (nodes rebooting)", func(c fleetCounts) bool { return c.provisioned+c.running >= 1 }},
			{"while nodes report in from their OS", func(c fleetCounts) bool { return c.running >= nodes/4 }},
		} {
			c := s.waitCounts(t, k.when, f.project, k.cond)
			s.killAndRestart(t)
			t.Logf("killed %s (%v)", k.when, c)
		}
		f.check(t)
	})

	t.Run("at random moments", func(t *testing.T) {
		if _, err := s.admin.CreateProject(context.Background(), "storm"); err != nil {
			t.Fatal(err)
		}
		f := s.startFleet(t, "storm", 24, 12)
		seed := uint64(time.Now().UnixNano())
		rnd := rand.New(rand.NewPCG(seed, 0))
		kills := 0
		for ; kills < 12; kills++ {
			// Up to 600 ms of uptime: a workflow (7 actions of 100-300 ms)
			// spans several kills.
			select {
			case <-f.done:
			case <-time.After(time.Duration(rnd.Int64N(int64(600 * time.Millisecond)))):
			}
			if f.finished() {
				break
			}
			c, err := s.counts(f.project)
			s.killAndRestart(t)
			t.Logf("killed at random (%v, %v)", c, err)
		}
		t.Logf("%d kills (seed %d)", kills, seed)
		f.check(t)
	})
}

// killFleet is a fleet of simulated nodes running against a killServer.
type killFleet struct {
	s       *killServer
	project string
	nodes   int
	hostIDs []string
	log     syncBuffer    // the agents' warnings and errors
	done    chan struct{} // closed when the run ended and rep is set
	rep     *sim.Report   // nil if the simulator could not start
}

// startFleet registers n nodes with instances in project (which has no
// OS yet) and starts them. They run with short back-offs, so they retry
// quickly while the server is down, and actions long enough for kills to
// land in the middle of workflows. The test waits for them at cleanup.
func (s *killServer) startFleet(t *testing.T, project string, n int, seed uint64) *killFleet {
	t.Helper()
	osID := s.day0().createOS(t, project)
	ids := sim.Generate(n, seed)
	hostIDs, err := sim.Registration{Client: s.admin, Project: project, OSID: osID}.Register(context.Background(), ids)
	if err != nil {
		t.Fatal(err)
	}
	f := &killFleet{s: s, project: project, nodes: n, hostIDs: hostIDs, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	opts := sim.Options{
		URL: s.agentURL, CA: s.day0().ca(t), Identities: ids,
		Connections: 2, ActionTime: 200 * time.Millisecond, RebootShare: 0.25, Seed: seed,
		Backoff: agent.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		Logger:  slog.New(slog.NewTextHandler(&f.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	go func() {
		defer close(f.done)
		rep, err := sim.Run(ctx, opts)
		if err != nil {
			fmt.Fprintf(&f.log, "simulator: %v\n", err)
		}
		f.rep = rep
	}()
	t.Cleanup(func() {
		cancel()
		if !f.wait(time.Minute) {
			t.Errorf("the fleet did not stop within a minute of its cancel; the agents' goroutines:\n%s", agentStacks())
		}
		if t.Failed() {
			t.Logf("agents' warnings and errors (project %s):\n%s", project, f.log.String())
		}
	})
	return f
}

// finished reports whether the fleet's run has ended.
func (f *killFleet) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the fleet's run to end and reports whether it did.
func (f *killFleet) wait(d time.Duration) bool {
	select {
	case <-f.done:
		return true
	case <-time.After(d):
		return false
	}
}

// check waits for the fleet and checks that every node ended RUNNING,
// provisioned once.
func (f *killFleet) check(t *testing.T) {
	t.Helper()
	if !f.wait(90 * time.Second) {
		t.Fatalf("the fleet did not finish within 90 s of the last restart; the agents' goroutines:\n%s", agentStacks())
	}
	if f.rep == nil {
		t.Fatalf("the simulator did not run: %s", f.log.String())
	}
	wantReport(t, f.rep, f.nodes, 0)
	f.s.day0().checkRunning(t, f.project, f.hostIDs)
	checkProvisionedOnce(t, f.s.admin, f.project, f.hostIDs)
}

// agentStacks returns the stacks of this process's goroutines that run
// agent code, to show where a node hangs.
func agentStacks() string {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "eim/agent") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// checkProvisionedOnce checks each host's provisioning log: one workflow,
// attempt 1, created once, every action succeeded exactly once and none
// failed.
func checkProvisionedOnce(t *testing.T, admin *client.Client, project string, hostIDs []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range hostIDs {
		var h eim.Host
		if err := admin.Get(ctx, project, eim.KindHost, id, &h); err != nil {
			t.Fatal(err)
		}
		if h.Instance == nil {
			t.Errorf("host %s: no instance", id)
			continue
		}
		log, err := admin.ProvisioningLog(ctx, project, h.Instance.ResourceID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if log.Attempt != 1 || log.State != eim.WorkflowSucceeded || log.TotalActions == 0 {
			t.Errorf("host %s: workflow attempt %d %s of %d actions; want attempt 1 SUCCEEDED", id, log.Attempt, log.State, log.TotalActions)
		}
		created := 0
		succeeded := make(map[int]int)
		for _, e := range log.Entries {
			switch {
			case e.Action < 0 && strings.HasPrefix(e.Message, "workflow created"):
				created++
			case e.Action >= 0 && e.Attempt != 1:
				t.Errorf("host %s: log entry %d is of attempt %d, want 1: %+v", id, e.Seq, e.Attempt, e)
			case e.State == eim.ActionFailed:
				t.Errorf("host %s: action %d %s FAILED: %s", id, e.Action, e.Name, e.Message)
			case e.State == eim.ActionSucceeded:
				succeeded[e.Action]++
			}
		}
		if created != 1 {
			t.Errorf("host %s: the workflow was created %d times, want once", id, created)
		}
		for i := range log.TotalActions {
			if succeeded[i] != 1 {
				t.Errorf("host %s: action %d succeeded %d times in the log, want once", id, i, succeeded[i])
			}
		}
		if len(succeeded) != log.TotalActions {
			t.Errorf("host %s: %d actions succeeded, want %d", id, len(succeeded), log.TotalActions)
		}
		if t.Failed() {
			t.Logf("host %s provisioning log: %+v", id, log)
			return
		}
	}
}
