package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
)

// NodeConfig is the agent's configuration on the installed OS
// (/etc/eim/agent.json), written by the write-agent-config action.
type NodeConfig struct {
	URL          string `json:"url"`
	CACertPEM    string `json:"caCertPem"`
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	HostID       string `json:"hostId"`
	Project      string `json:"project"`
	// TokenURL is the token endpoint; "" means URL + "/oauth2/token".
	TokenURL string `json:"tokenUrl,omitempty"`
}

// Marshal returns the configuration as indented JSON.
func (c NodeConfig) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	return append(b, '\n'), nil
}

// LoadNodeConfig reads and checks a node configuration file.
func LoadNodeConfig(path string) (NodeConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return NodeConfig{}, fmt.Errorf("read node config: %w", err)
	}
	var c NodeConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return NodeConfig{}, fmt.Errorf("node config %s: %w", path, err)
	}
	if c.URL == "" || c.ClientID == "" || c.ClientSecret == "" {
		return NodeConfig{}, fmt.Errorf("node config %s: url, clientId and clientSecret are required", path)
	}
	return c, nil
}

// Node is the agent on the installed OS: it reports in once, then sends
// a heartbeat every interval the server sets, sends its hardware inventory
// when the server lacks it or it changed, and carries out the host actions
// (reboot, shut down) that heartbeat answers bring.
type Node struct {
	Client  *http.Client // trusts the server's CA (Dial with Config.CACertPEM)
	Config  NodeConfig
	Logger  *slog.Logger
	Backoff Backoff

	AgentVersion string
	Hostname     string
	OSRelease    string
	BootID       string

	// Hardware collects the inventory; nil sends none. It may return a
	// partial inventory with an error, which is logged.
	Hardware func(context.Context) (*hostv1.Hardware, error)
	// HardwareCheck is how often the inventory is collected to see whether
	// it changed (default 5 min); a full report goes at least every
	// interval the server sets.
	HardwareCheck time.Duration
	// Health says how the node and the agent are; nil: healthy.
	Health func(context.Context) (agent, node *hostv1.Health)
	// Actions carries out host actions; nil refuses them (reported as
	// failed).
	Actions Actions
	// StateDir keeps the host actions already carried out, so that one is
	// not done twice across the reboot it causes; "" keeps them in memory.
	StateDir string
	// TelemetryFile is where the node's effective telemetry configuration
	// is written for the local collectors (see TelemetryConfig), whenever
	// a heartbeat's answer names a version the file does not have; ""
	// fetches none.
	TelemetryFile string
	// Updaters carry out OS updates in the node's maintenance windows; nil
	// takes none (the node does not ask for its maintenance plan).
	Updaters *Updaters
	// MaintenanceCheck is how often the maintenance windows are checked
	// (default 20 s).
	MaintenanceCheck time.Duration
	// Cluster applies the node's cluster plans when a heartbeat's answer
	// names a cluster_version the node has not applied; nil takes none
	// (the node does not ask for its plan). See cluster.go.
	Cluster ClusterInstaller
	// ClusterRetry bounds the waits before a failed plan is tried again
	// (default DefaultClusterRetry); ClusterCheck is how often the cluster
	// loop looks for retries and reports to deliver (default 15 s).
	ClusterRetry Backoff
	ClusterCheck time.Duration
	// Pods runs the node's edge workloads (a *pods.Runner on podman)
	// when a heartbeat's answer names a workloads_version the node has not
	// applied; nil takes none (the node does not ask for its workloads).
	// See workloads.go.
	Pods PodRunner
	// WorkloadCheck is how often podman is asked how the pods are, and a
	// changed status reported (default 10 s; every second while a
	// workload deploys); WorkloadRetry bounds the waits before a workload
	// that failed to deploy is tried again (default DefaultWorkloadRetry).
	WorkloadCheck time.Duration
	WorkloadRetry Backoff
	// UploadClient sends the data paths' requests where the upload and
	// download grants say (default: the system's roots and EIM's CA);
	// UploadRetry bounds the waits before a failed pass (of either
	// direction) is tried again (default DefaultUploadRetry).
	UploadClient *http.Client
	UploadRetry  Backoff

	// OnReportIn, if set, is called after every accepted ReportIn, and
	// OnHeartbeat after every answered heartbeat.
	OnReportIn  func(*hostv1.ReportInResponse)
	OnHeartbeat func(*hostv1.HeartbeatResponse)
	Now         func() time.Time
	Wait        func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) for jitter; nil: math/rand.
	Rand func() float64

	tokens *tokens
	hc     hostv1connect.HostServiceClient
	mc     maintenancev1connect.MaintenanceServiceClient
	cc     clusterv1connect.ClusterServiceClient
	wc     workloadsv1connect.WorkloadServiceClient
	maint  *maintenance // nil without Updaters
	clus   *clusterRun  // nil without Cluster
	edge   *edgeRun     // nil without Pods
}

// Actions carries out host actions on the node. Both return once the
// action is under way (the agent is about to stop) or failed.
type Actions interface {
	Reboot(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// ErrCredentialsRevoked is returned by Node when the token endpoint refuses
// the node's credentials: the host was invalidated or deleted, or onboarded
// again elsewhere.
var ErrCredentialsRevoked = errors.New("node credentials refused (host invalidated, deleted or re-onboarded)")

func (n *Node) init() {
	if n.hc != nil {
		return
	}
	now := n.Now
	if now == nil {
		now = time.Now
	}
	tokenURL := n.Config.TokenURL
	if tokenURL == "" {
		tokenURL = strings.TrimSuffix(n.Config.URL, "/") + "/oauth2/token"
	}
	n.tokens = &tokens{client: n.Client, url: tokenURL, clientID: n.Config.ClientID, clientSecret: n.Config.ClientSecret, now: now}
	n.hc = hostv1connect.NewHostServiceClient(n.Client, strings.TrimSuffix(n.Config.URL, "/"), connect.WithInterceptors(n.tokens.interceptor()))
	n.mc = maintenancev1connect.NewMaintenanceServiceClient(n.Client, strings.TrimSuffix(n.Config.URL, "/"), connect.WithInterceptors(n.tokens.interceptor()))
	n.cc = clusterv1connect.NewClusterServiceClient(n.Client, strings.TrimSuffix(n.Config.URL, "/"), connect.WithInterceptors(n.tokens.interceptor()))
	n.wc = workloadsv1connect.NewWorkloadServiceClient(n.Client, strings.TrimSuffix(n.Config.URL, "/"), connect.WithInterceptors(n.tokens.interceptor()))
}

func (n *Node) log() *slog.Logger {
	if n.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return n.Logger
}

// ReportIn calls ReportIn once (getting a token if needed).
func (n *Node) ReportIn(ctx context.Context) (*hostv1.ReportInResponse, error) {
	n.init()
	resp, err := n.hc.ReportIn(ctx, connect.NewRequest(&hostv1.ReportInRequest{
		AgentVersion: n.version(), Hostname: n.Hostname, OsRelease: n.OSRelease, BootId: n.BootID,
	}))
	if errors.Is(err, errInvalidClient) {
		return nil, ErrCredentialsRevoked
	}
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// Run reports in (with back-off on errors) and then keeps the node's
// heartbeat going until ctx ends. It returns ErrCredentialsRevoked when the
// credentials stop working for good.
func (n *Node) Run(ctx context.Context) error {
	n.init()
	if n.Updaters != nil {
		m, err := loadMaintenance(n.StateDir)
		if err != nil {
			return err
		}
		n.maint = m
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.runMaintenance(mctx)
		}()
		defer func() { cancel(); <-done }()
	}
	if n.Cluster != nil {
		c, err := loadCluster(n.StateDir)
		if err != nil {
			return err
		}
		n.clus = c
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.runCluster(cctx)
		}()
		defer func() { cancel(); <-done }()
	}
	if n.Pods != nil {
		e, err := loadEdge(n.StateDir, n.BootID)
		if err != nil {
			return err
		}
		e.retry = retrier{b: n.Backoff}
		n.edge = e
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, 3)
		go func() {
			defer func() { done <- struct{}{} }()
			n.runWorkloads(wctx)
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			n.runData(wctx, false, e.pathsSet, n.uploads())
		}()
		go func() {
			defer func() { done <- struct{}{} }()
			n.runData(wctx, true, e.ingressSet, n.downloads())
		}()
		defer func() { cancel(); <-done; <-done; <-done }()
	}
	r := retrier{b: n.Backoff}
	for {
		resp, err := n.ReportIn(ctx)
		if err == nil {
			r.reset()
			if n.OnReportIn != nil {
				n.OnReportIn(resp)
			}
			return n.beat(ctx, time.Duration(resp.GetHeartbeatIntervalSeconds())*time.Second)
		}
		if errors.Is(err, ErrCredentialsRevoked) {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		d := r.next(err)
		n.log().Warn("report in failed", "err", err, "retry_in", d)
		if err := n.wait(ctx, d); err != nil {
			return err
		}
	}
}

func (n *Node) wait(ctx context.Context, d time.Duration) error {
	if n.Wait != nil {
		return n.Wait(ctx, d)
	}
	return sleep(ctx, d)
}

func (n *Node) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

func (n *Node) rand() float64 {
	if n.Rand != nil {
		return n.Rand()
	}
	return rand.Float64()
}

// heartbeat state of Run.
type beatState struct {
	interval   time.Duration
	hwEvery    time.Duration
	digest     string           // of the inventory the server accepted
	sent       *hostv1.Hardware // that inventory
	sentAt     time.Time
	checkedAt  time.Time
	result     *hostv1.ActionResult // to send with the next heartbeat
	done       *actionLog
	hwRetry    retrier
	hwNotUntil time.Time
	tel        telemetryState
}

// beat is Run's heartbeat loop. Every wait is the interval with ±10 %
// jitter, so nodes started together drift apart; errors back off.
func (n *Node) beat(ctx context.Context, interval time.Duration) error {
	st := &beatState{interval: interval, hwEvery: time.Hour, done: loadActionLog(n.StateDir)}
	if st.interval <= 0 {
		st.interval = 10 * time.Second
	}
	r := retrier{b: n.Backoff}
	for {
		resp, err := n.heartbeat(ctx, st)
		d := jitter(st.interval, n.rand())
		switch {
		case errors.Is(err, ErrCredentialsRevoked):
			return err
		case connect.CodeOf(err) == connect.CodeUnimplemented:
			n.log().Info("the server has no heartbeats: reporting in at every interval instead")
			return n.reportInLoop(ctx, st.interval)
		case err != nil:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			d = r.next(err)
			n.log().Warn("heartbeat failed", "err", err, "retry_in", d)
		default:
			r.reset()
			if n.OnHeartbeat != nil {
				n.OnHeartbeat(resp)
			}
			if now := n.act(ctx, st, resp.Action); now {
				d = 0 // report the action's start (or failure) at once
			}
		}
		if d > 0 {
			if err := n.wait(ctx, d); err != nil {
				return err
			}
		}
	}
}

// reportInLoop keeps a node alive against a server older than Heartbeat:
// it reports in at every interval.
func (n *Node) reportInLoop(ctx context.Context, interval time.Duration) error {
	r := retrier{b: n.Backoff}
	d := jitter(interval, n.rand()) // it just reported in
	for {
		if err := n.wait(ctx, d); err != nil {
			return err
		}
		d = jitter(interval, n.rand())
		resp, err := n.ReportIn(ctx)
		switch {
		case errors.Is(err, ErrCredentialsRevoked):
			return err
		case err != nil:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			d = r.next(err)
			n.log().Warn("report in failed", "err", err, "retry_in", d)
		default:
			r.reset()
			if n.OnReportIn != nil {
				n.OnReportIn(resp)
			}
			if s := resp.GetHeartbeatIntervalSeconds(); s > 0 {
				interval = time.Duration(s) * time.Second
				d = jitter(interval, n.rand())
			}
		}
	}
}

func jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (0.9 + 0.2*f))
}

// heartbeat sends one heartbeat and, when the answer asks for it or the
// inventory changed, the hardware inventory.
func (n *Node) heartbeat(ctx context.Context, st *beatState) (*hostv1.HeartbeatResponse, error) {
	req := &hostv1.HeartbeatRequest{AgentVersion: n.version(), BootId: n.BootID, HardwareDigest: st.digest, ActionResult: st.result}
	if n.Health != nil {
		req.AgentHealth, req.NodeHealth = n.Health(ctx)
	}
	resp, err := n.hc.Heartbeat(ctx, connect.NewRequest(req))
	if errors.Is(err, errInvalidClient) {
		return nil, ErrCredentialsRevoked
	}
	if err != nil {
		return nil, err
	}
	m := resp.Msg
	if st.result != nil && (m.Action == nil || m.Action.Id != st.result.Id) {
		st.result = nil // recorded
	}
	if s := m.GetIntervalSeconds(); s > 0 {
		st.interval = time.Duration(s) * time.Second
	}
	if s := m.GetHardwareIntervalSeconds(); s > 0 {
		st.hwEvery = time.Duration(s) * time.Second
	}
	n.hardware(ctx, st, m.SendHardware)
	n.telemetry(ctx, &st.tel, m.GetTelemetryVersion())
	n.maintenancePlan(ctx, m.GetMaintenanceVersion())
	n.clusterVersion(m.GetClusterVersion())
	n.workloadsVersion(m.GetWorkloadsVersion(), m.GetWorkloadsStatusWanted())
	return m, nil
}

// hardware collects the inventory when it is due (asked for, never sent,
// a full-report interval passed, or the change check is due) and sends it
// when asked for, due, or changed. A failure is logged and retried with
// back-off: the heartbeat goes on.
func (n *Node) hardware(ctx context.Context, st *beatState, asked bool) {
	if n.Hardware == nil {
		return
	}
	now := n.now()
	check := n.HardwareCheck
	if check <= 0 {
		check = 5 * time.Minute
	}
	full := st.sent == nil || now.Sub(st.sentAt) >= st.hwEvery
	if now.Before(st.hwNotUntil) || !(asked || full || now.Sub(st.checkedAt) >= check) {
		return
	}
	st.checkedAt = now
	hw, err := n.Hardware(ctx)
	if err != nil {
		n.log().Warn("hardware inventory incomplete", "err", err)
	}
	if hw == nil || (!asked && !full && !hardwareChanged(st.sent, hw)) {
		return
	}
	resp, err := n.hc.ReportHardware(ctx, connect.NewRequest(&hostv1.ReportHardwareRequest{Hardware: hw}))
	if err != nil {
		d := st.hwRetry.next(err)
		st.hwNotUntil = now.Add(d)
		n.log().Warn("report hardware failed", "err", err, "retry_in", d)
		return
	}
	st.hwRetry.reset()
	st.hwNotUntil = time.Time{}
	st.digest, st.sent, st.sentAt = resp.Msg.Digest, hw, now
	n.log().Info("reported hardware", "digest", st.digest)
}

func hardwareChanged(a, b *hostv1.Hardware) bool { return !proto.Equal(a, b) }

// act handles the action of an answer. It reports whether to send the next
// heartbeat at once (to say an action started or failed).
func (n *Node) act(ctx context.Context, st *beatState, a *hostv1.HostAction) bool {
	if a == nil || a.Id == "" {
		return false
	}
	if r, ok := st.done.get(a.Id); ok {
		// Carried out before (the server missed the result, or this is
		// the boot after the reboot): say so again.
		if st.result == nil {
			st.result = r
			return true
		}
		return false
	}
	r := &hostv1.ActionResult{Id: a.Id, State: hostv1.ActionResult_STATE_STARTED}
	var run func(context.Context) error
	switch {
	case n.Actions == nil:
		r.State, r.Detail = hostv1.ActionResult_STATE_FAILED, "this agent does not carry out host actions"
	case a.Kind == hostv1.HostAction_KIND_REBOOT:
		run = n.Actions.Reboot
	case a.Kind == hostv1.HostAction_KIND_SHUTDOWN:
		run = n.Actions.Shutdown
	default:
		r.State, r.Detail = hostv1.ActionResult_STATE_FAILED, fmt.Sprintf("unknown host action %v", a.Kind)
	}
	if run != nil {
		// Record it before doing it: the reboot ends this process, and
		// the next boot must not reboot again.
		if err := st.done.add(r); err != nil {
			r.State, r.Detail = hostv1.ActionResult_STATE_FAILED, "cannot record the action: "+err.Error()
			run = nil
		}
	}
	if run == nil {
		st.done.add(r) // in memory at least: do not retry a refusal
		st.result = r
		return true
	}
	// Tell the server first (best effort): once the action runs, this
	// agent may not get another chance.
	st.result = r
	if _, err := n.heartbeat(ctx, st); err != nil {
		n.log().Warn("heartbeat before a host action failed", "err", err)
	}
	n.log().Info("carrying out a host action", "action", a.Kind.String(), "id", a.Id)
	if err := run(ctx); err != nil {
		r = &hostv1.ActionResult{Id: a.Id, State: hostv1.ActionResult_STATE_FAILED, Detail: truncate(err.Error(), 1000)}
		st.done.add(r)
		st.result = r
		n.log().Error("host action failed", "action", a.Kind.String(), "err", err)
		return true
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func (n *Node) version() string {
	if n.AgentVersion != "" {
		return n.AgentVersion
	}
	return Version
}

// Save writes the configuration to path (mode 0600: it holds the node's
// client secret) atomically, as eim-agent enroll does once approved.
func (c NodeConfig) Save(path string) error {
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o600, 0o700)
}
