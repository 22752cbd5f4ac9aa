package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim/agent"
)

// result is what the node kept from Day 0, as agent.Provisioner returns it.
func (n ProvisionedNode) result() agent.Result {
	return agent.Result{HostID: n.HostID, Project: n.Project, ClientID: n.ClientID, ClientSecret: n.ClientSecret, TokenURL: n.TokenURL}
}

// runProvisioned holds nodes provisioned before the run (Options.Nodes).
// They do not report in: their instances are running already, and a
// running agent whose server restarted just goes on heartbeating. The
// first node's first heartbeat tells the interval; the others' first
// heartbeats then spread over one interval at random, as those of agents
// that backed off while the server was down and come back each at its own
// time. Everything after that is the hold of a Day-0 run.
func runProvisioned(ctx context.Context, o Options, pool []*http.Client) (*Report, error) {
	if o.Hold <= 0 {
		return nil, errors.New("nodes provisioned before the run need a hold")
	}
	start := o.Now()
	h := newHolder(o, pool)
	h.start(ctx)
	defer h.close() // on an early return; h.hold closes it first
	first := h.enlist(0, 0, o.Nodes[0].result(), 0)
	h.sched.Add(first, h.clock())
	wait := ctx
	if !o.Deadline.IsZero() {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, o.Deadline)
		defer cancel()
	}
	n0 := o.Nodes[0]
	select {
	case <-h.answered:
	case <-wait.Done():
		return nil, fmt.Errorf("no heartbeat of host %s (line %d) answered (%w)%s", n0.HostID, n0.Line, wait.Err(), h.errSummary())
	}
	if first.revoked.Load() {
		return nil, fmt.Errorf("host %s (line %d): the server refused its credentials (invalid_client): are the nodes seeded in this server's store, and the host not invalidated?", n0.HostID, n0.Line)
	}
	for i, n := range o.Nodes[1:] {
		h.add(i+1, (i+1)%len(pool), n.result(), 0)
	}
	wall := o.Now().Sub(start)
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "%d provisioned nodes: the first heartbeat answered after %.1fs, interval %s; the others' first heartbeats spread over it\n",
			len(o.Nodes), wall.Seconds(), time.Duration(h.interval.Load()))
	}
	rep := &Report{
		Nodes:       len(o.Nodes),
		Final:       map[string]int{OutcomeRunning: len(o.Nodes), OutcomeFailed: 0, OutcomeStuck: 0},
		Injected:    map[string]int{"fail": 0, "reboot": 0},
		Phases:      map[string]Stats{},
		WallSeconds: math.Round(wall.Seconds()*1000) / 1000,
		Seeded:      true,
	}
	rep.Hold = h.hold(ctx)
	return rep, nil
}

// errSummary lists the errors the hold noted so far, for a run that could
// not start: "; errors: a (3×), b (1×)", or "".
func (h *holder) errSummary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		return ""
	}
	var parts []string
	for _, msg := range slices.Sorted(maps.Keys(h.errs)) {
		parts = append(parts, fmt.Sprintf("%s (%d×)", msg, h.errs[msg]))
	}
	return "; errors: " + strings.Join(parts, ", ")
}
