package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"

	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
)

// The node's cluster membership: the heartbeat loop learns the version
// of the node's cluster plan (HeartbeatResponse.cluster_version) and
// wakes a loop of its own, which fetches the plan (ClusterService.GetPlan),
// applies it with the ClusterInstaller or runs the removal, and reports the
// original's agent states (ClusterService.ReportStatus). Installing takes
// minutes; the heartbeats go on meanwhile. What must survive a restart
// (the version applied, a failure and when to try again, the reports not
// yet delivered) is kept in StateDir/cluster.json; what was installed is
// the installer's to remember.

// clusterFile is the name of the cluster state in StateDir.
const clusterFile = "cluster.json"

// maxClusterMessage is the most of a message ReportStatus takes.
const maxClusterMessage = 1024

// DefaultClusterRetry bounds the waits before a failed plan is tried
// again (the same version; a new version is applied at once).
var DefaultClusterRetry = Backoff{Min: time.Minute, Max: 30 * time.Minute}

// ClusterInstaller applies a node's cluster plans (K3s on a real node).
// Its methods are called from one goroutine.
type ClusterInstaller interface {
	// Prepare checks p and gets what it needs (downloads, verification)
	// without changing anything on the node.
	Prepare(ctx context.Context, p *clusterv1.Plan, f Fetcher) error
	// Install applies p, named version, over what is installed: nothing
	// the second time; an upgrade drains (when p asks), replaces,
	// restarts and uncordons. It returns a message saying what runs.
	Install(ctx context.Context, version string, p *clusterv1.Plan) (string, error)
	// Installed returns the Kubernetes version running ("" before an
	// installation completed) and whether anything is installed at all
	// (a failed installation leaves something to remove).
	Installed() (kubernetes string, any bool)
	// Drain moves the node's workloads away before a removal.
	Drain(ctx context.Context, timeout time.Duration) error
	// Uninstall removes what was installed.
	Uninstall(ctx context.Context) error
}

type clusterStatus = clusterv1.ReportStatusRequest_State

// clusterState is what the cluster loop keeps in the state directory.
type clusterState struct {
	// Applied is the version of the last plan applied or removal done.
	Applied string `json:"applied,omitempty"`
	// Failed is the version whose application failed, Fails how many
	// times in a row, RetryAt when it is tried again (Unix seconds).
	Failed  string `json:"failed,omitempty"`
	Fails   int    `json:"fails,omitempty"`
	RetryAt int64  `json:"retryAt,omitempty"`
	// Reports are not yet delivered, oldest first.
	Reports []clusterReport `json:"reports,omitempty"`
}

type clusterReport struct {
	State      int32  `json:"state"`
	Version    string `json:"version,omitempty"`
	Message    string `json:"message,omitempty"`
	Kubernetes string `json:"kubernetes,omitempty"`
}

// clusterRun is a Node's cluster state, shared by the heartbeat loop
// (which sets the version wanted) and the cluster loop.
type clusterRun struct {
	mu       sync.Mutex
	path     string // "" keeps it in memory
	st       clusterState
	wanted   string
	off      bool // the server has no cluster service
	retry    retrier
	notUntil time.Time     // GetPlan failed: not before
	changed  chan struct{} // the version wanted changed
}

func loadCluster(dir string) (*clusterRun, error) {
	c := &clusterRun{changed: make(chan struct{}, 1)}
	if dir == "" {
		return c, nil
	}
	c.path = filepath.Join(dir, clusterFile)
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster state: %w", err)
	}
	if err := json.Unmarshal(b, &c.st); err != nil {
		// A damaged file forgets the version applied: the plan is
		// applied again, which changes nothing that is in place.
		c.st = clusterState{}
	}
	return c, nil
}

// save writes the state; c.mu is held.
func (c *clusterRun) save() error {
	if c.path == "" {
		return nil
	}
	b, err := json.Marshal(&c.st)
	if err != nil {
		return err
	}
	return writeFileAtomic(c.path, b, 0o600, 0o700)
}

// clusterVersion is the heartbeat's part: it notes the version a
// heartbeat's answer names and wakes the cluster loop when it is not the
// one applied. "" (a server without clusters) changes nothing: a node
// does not uninstall its cluster because a server does not know of it.
func (n *Node) clusterVersion(version string) {
	c := n.clus
	if c == nil || version == "" {
		return
	}
	c.mu.Lock()
	wake := version != c.wanted && version != c.st.Applied && !c.off
	c.wanted = version
	c.mu.Unlock()
	if wake {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}
}

// runCluster is the cluster loop: a check at start, whenever the version
// wanted changes, and every ClusterCheck (retries, reports to deliver).
func (n *Node) runCluster(ctx context.Context) {
	every := n.ClusterCheck
	if every <= 0 {
		every = 15 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n.clusterCheck(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.clus.changed:
		}
	}
}

// clusterCheck delivers what is pending and, when the version wanted is
// not the one applied (and not a failure waiting for its retry), fetches
// the plan and applies it or runs the removal.
func (n *Node) clusterCheck(ctx context.Context) {
	c := n.clus
	if err := n.flushClusterReports(ctx); err != nil {
		n.log().Warn("cluster status not delivered; kept for the next check", "err", err)
	}
	now := n.now()
	c.mu.Lock()
	wanted, st, off := c.wanted, c.st, c.off
	c.mu.Unlock()
	if off || wanted == "" || wanted == st.Applied || now.Before(c.notUntil) {
		return
	}
	if st.Failed == wanted && now.Unix() < st.RetryAt {
		return
	}
	resp, err := n.cc.GetPlan(ctx, connect.NewRequest(&clusterv1.GetPlanRequest{Version: st.Applied}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		c.mu.Lock()
		c.off = true
		c.mu.Unlock()
		n.log().Info("the server has no cluster service: cluster plans ignored")
		return
	}
	if err == nil && resp.Msg.Unchanged {
		err = fmt.Errorf("the server says version %q is unchanged, its heartbeat named %q", resp.Msg.Version, wanted)
	}
	if err != nil {
		d := c.retry.next(err)
		c.notUntil = now.Add(d)
		n.log().Warn("cluster plan not fetched", "err", err, "retry_in", d)
		return
	}
	c.retry.reset()
	c.notUntil = time.Time{}
	m := resp.Msg
	if m.Plan != nil {
		n.applyPlan(ctx, m.Version, m.Plan)
	} else {
		n.removeCluster(ctx, m.Version, m.Removal)
	}
}

// applyPlan applies p: REGISTERING while its artifacts are fetched and
// checked, INSTALL_IN_PROGRESS while it is installed, ACTIVE once the
// node is Ready; ERROR with the step that failed.
func (n *Node) applyPlan(ctx context.Context, version string, p *clusterv1.Plan) {
	inst := n.Cluster
	kube, _ := inst.Installed()
	log := n.log().With("cluster", p.ClusterName, "version", version)
	log.Info("applying the cluster plan", "role", p.Role.String(), "kubernetes", p.KubernetesVersion)
	n.clusterReport(ctx, clusterv1.ReportStatusRequest_STATE_REGISTERING, version,
		fmt.Sprintf("Fetching and verifying %d artifacts for %s %s", len(p.Artifacts), p.Distribution, p.KubernetesVersion), kube)
	if err := inst.Prepare(ctx, p, n.fetcher()); err != nil {
		n.clusterFailed(ctx, version, "prepare: "+err.Error(), kube)
		return
	}
	msg := fmt.Sprintf("Installing %s %s as %s", p.Distribution, p.KubernetesVersion, roleName(p.Role))
	if kube != "" && kube != p.KubernetesVersion {
		msg = fmt.Sprintf("Upgrading %s from %s to %s", p.Distribution, kube, p.KubernetesVersion)
	} else if kube != "" {
		msg = fmt.Sprintf("Applying plan %s (%s %s)", version, p.Distribution, kube)
	}
	n.clusterReport(ctx, clusterv1.ReportStatusRequest_STATE_INSTALL_IN_PROGRESS, version, msg, kube)
	done, err := inst.Install(ctx, version, p)
	if err != nil {
		kube, _ = inst.Installed()
		n.clusterFailed(ctx, version, "install: "+err.Error(), kube)
		return
	}
	n.clusterDone(ctx, version, clusterv1.ReportStatusRequest_STATE_ACTIVE, version, done, p.KubernetesVersion)
	log.Info("cluster plan applied", "message", done)
}

// removeCluster runs a removal: DEREGISTERING while the node is drained,
// UNINSTALL_IN_PROGRESS while the distribution is removed, INACTIVE
// after. A node with nothing installed just says INACTIVE.
func (n *Node) removeCluster(ctx context.Context, version string, r *clusterv1.Removal) {
	inst := n.Cluster
	kube, any := inst.Installed()
	if !any {
		n.clusterDone(ctx, version, clusterv1.ReportStatusRequest_STATE_INACTIVE, "", "Not a member of a cluster", "")
		return
	}
	n.log().Info("leaving the cluster", "version", version, "drain", r.GetDrain())
	if r.GetDrain() && kube != "" {
		n.clusterReport(ctx, clusterv1.ReportStatusRequest_STATE_DEREGISTERING, version, "Draining the node", kube)
		if err := inst.Drain(ctx, seconds(r.GetDrainTimeoutSeconds(), 5*time.Minute)); err != nil {
			n.clusterFailed(ctx, version, "drain: "+err.Error()+" (a forced removal skips the drain)", kube)
			return
		}
	} else {
		n.clusterReport(ctx, clusterv1.ReportStatusRequest_STATE_DEREGISTERING, version, "Leaving the cluster without draining", kube)
	}
	n.clusterReport(ctx, clusterv1.ReportStatusRequest_STATE_UNINSTALL_IN_PROGRESS, version, "Uninstalling", kube)
	if err := inst.Uninstall(ctx); err != nil {
		n.clusterFailed(ctx, version, "uninstall: "+err.Error(), kube)
		return
	}
	n.clusterDone(ctx, version, clusterv1.ReportStatusRequest_STATE_INACTIVE, "", "Removed from the cluster", "")
}

func seconds(s uint32, def time.Duration) time.Duration {
	if s == 0 {
		return def
	}
	return time.Duration(s) * time.Second
}

func roleName(r clusterv1.Plan_Role) string {
	switch r {
	case clusterv1.Plan_ROLE_ALL:
		return "control plane and worker"
	case clusterv1.Plan_ROLE_CONTROLPLANE:
		return "control plane"
	case clusterv1.Plan_ROLE_WORKER:
		return "worker"
	}
	return r.String()
}

// clusterDone records that version is applied and reports its final
// state.
func (n *Node) clusterDone(ctx context.Context, version string, s clusterStatus, planVersion, msg, kube string) {
	c := n.clus
	c.mu.Lock()
	c.st.Applied = version
	c.st.Failed, c.st.Fails, c.st.RetryAt = "", 0, 0
	c.st.Reports = append(c.st.Reports, clusterReport{State: int32(s), Version: planVersion, Message: truncate(msg, maxClusterMessage), Kubernetes: kube})
	if err := c.save(); err != nil {
		n.log().Error("cannot record the cluster state", "err", err)
	}
	c.mu.Unlock()
	n.flushOrWarn(ctx)
}

// clusterFailed reports ERROR and sets when the same version is tried
// again.
func (n *Node) clusterFailed(ctx context.Context, version, msg, kube string) {
	c := n.clus
	b := n.ClusterRetry
	if b.Min <= 0 {
		b = DefaultClusterRetry
	}
	c.mu.Lock()
	if c.st.Failed != version {
		c.st.Failed, c.st.Fails = version, 0
	}
	d := b.Min
	for i := 0; i < c.st.Fails && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, max(b.Max, b.Min))
	c.st.Fails++
	c.st.RetryAt = n.now().Add(d).Unix()
	c.st.Reports = append(c.st.Reports, clusterReport{State: int32(clusterv1.ReportStatusRequest_STATE_ERROR), Version: version,
		Message: truncate(msg, maxClusterMessage), Kubernetes: kube})
	if err := c.save(); err != nil {
		n.log().Error("cannot record the cluster state", "err", err)
	}
	c.mu.Unlock()
	n.log().Error("cluster plan failed", "version", version, "err", msg, "retry_in", d)
	n.flushOrWarn(ctx)
}

// clusterReport queues a report and tries to deliver what is queued.
func (n *Node) clusterReport(ctx context.Context, s clusterStatus, version, msg, kube string) {
	c := n.clus
	c.mu.Lock()
	c.st.Reports = append(c.st.Reports, clusterReport{State: int32(s), Version: version, Message: truncate(msg, maxClusterMessage), Kubernetes: kube})
	if err := c.save(); err != nil {
		n.log().Warn("cannot keep a cluster status report", "err", err)
	}
	c.mu.Unlock()
	n.flushOrWarn(ctx)
}

func (n *Node) flushOrWarn(ctx context.Context) {
	if err := n.flushClusterReports(ctx); err != nil {
		n.log().Warn("cluster status not delivered; kept for the next check", "err", err)
	}
}

// maxQueuedClusterReports bounds the queue while the server is away: the
// oldest go first (the server wants the node's state, and the last
// reports say it).
const maxQueuedClusterReports = 32

// flushClusterReports delivers the queued reports in order.
func (n *Node) flushClusterReports(ctx context.Context) error {
	c := n.clus
	for {
		c.mu.Lock()
		if len(c.st.Reports) > maxQueuedClusterReports {
			c.st.Reports = c.st.Reports[len(c.st.Reports)-maxQueuedClusterReports:]
		}
		if len(c.st.Reports) == 0 || c.off {
			c.mu.Unlock()
			return nil
		}
		r := c.st.Reports[0]
		c.mu.Unlock()
		_, err := n.cc.ReportStatus(ctx, connect.NewRequest(&clusterv1.ReportStatusRequest{
			State: clusterStatus(r.State), PlanVersion: r.Version, Message: r.Message, KubernetesVersion: r.Kubernetes,
		}))
		switch code := connect.CodeOf(err); {
		case err == nil:
		case code == connect.CodeInvalidArgument || code == connect.CodeFailedPrecondition || code == connect.CodeNotFound:
			n.log().Warn("cluster status refused; dropped", "state", clusterStatus(r.State).String(), "err", err)
		default:
			return err
		}
		c.mu.Lock()
		if len(c.st.Reports) > 0 && c.st.Reports[0] == r {
			c.st.Reports = c.st.Reports[1:]
		}
		c.save()
		c.mu.Unlock()
	}
}

// fetcher downloads plan artifacts: server paths with the node's token
// through the pinned client, URLs through a client that trusts the
// system's roots and EIM's CA.
func (n *Node) fetcher() Fetcher {
	return &httpFetcher{server: n.Config.URL, client: n.Client, token: n.tokens.get, other: n.urlClient()}
}

func (n *Node) urlClient() *http.Client {
	c, err := imageClient(n.Config.CACertPEM)
	if err != nil {
		c, _ = imageClient("")
	}
	return c
}
