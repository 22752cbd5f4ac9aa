package sim

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim/agent"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// node is one simulated machine's record: its identity, the faults it was
// given, the phases it went through and how it ended.
type node struct {
	idx    int
	id     Identity
	fail   bool // its stream-image action fails
	reboot bool // it reboots once mid-workflow

	rnd      *rand.Rand // jitter; used by the node's goroutine only
	rebooted atomic.Bool
	t        *tracker
	now      func() time.Time

	mu      sync.Mutex
	evs     []event
	cat     string
	outcome string
	err     error
}

// enter records that the node entered phase.
func (n *node) enter(phase string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.evs = append(n.evs, event{phase, n.now()})
	c := category(phase)
	if n.cat == "" {
		n.cat = "waiting"
	}
	n.t.move(n.cat, c)
	n.cat = c
}

// finish records the node's outcome (and, for a stuck node, why).
func (n *node) finish(outcome string, err error) {
	n.enter(outcome)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.outcome, n.err = outcome, err
}

// ended returns the node's outcome, "" while it runs.
func (n *node) ended() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.outcome
}

func (n *node) events() []event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]event(nil), n.evs...)
}

func (n *node) phase() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.evs) == 0 {
		return "waiting"
	}
	return n.evs[len(n.evs)-1].phase
}

// errReportedIn ends a simulated node's node mode after its first
// accepted ReportIn.
var errReportedIn = errors.New("reported in")

// reportIn is node mode on the installed OS, with the credentials from
// Discover: the real agent.Node reports in (getting a token first), with its
// own retries and back-off, until the server accepts it once; that makes the
// instance RUNNING. It returns the heartbeat interval the server answered.
func reportIn(ctx context.Context, hc *http.Client, url string, res agent.Result, hostname string, b agent.Backoff, logger *slog.Logger) (time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var interval time.Duration
	n := &agent.Node{
		Client: hc, Logger: logger, Backoff: b,
		Config: agent.NodeConfig{URL: url, ClientID: res.ClientID, ClientSecret: res.ClientSecret,
			TokenURL: res.TokenURL, HostID: res.HostID, Project: res.Project},
		AgentVersion: simVersion, Hostname: hostname, OSRelease: "EIM simulated OS", BootID: simBootID,
		OnReportIn: func(r *hostv1.ReportInResponse) {
			interval = time.Duration(r.GetHeartbeatIntervalSeconds()) * time.Second
			cancel(errReportedIn)
		},
	}
	err := n.Run(ctx)
	if errors.Is(context.Cause(ctx), errReportedIn) {
		return interval, nil
	}
	return 0, err
}
