package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
)

// Version is the agent version sent to the server when none is configured.
const Version = "v0.1.0"

// Executor runs one workflow action, writing what it prints to out. It
// returns when the action is done; ctx carries the action's timeout.
type Executor interface {
	Run(ctx context.Context, a *provisioningv1.Action, out io.Writer) error
}

// Result is what a provisioning run ends with: the node's identity and
// credentials (for node mode), and whether the workflow reached its reboot
// action (false: the server said provisioning was done already).
type Result struct {
	HostID       string
	Project      string
	ClientID     string
	ClientSecret string
	TokenURL     string
	Rebooted     bool
}

// WorkflowFailedError is returned by Provisioner.Run with StopOnFailed when
// the server says the node's workflow failed.
type WorkflowFailedError struct {
	Message string
}

func (e *WorkflowFailedError) Error() string { return "workflow failed: " + e.Message }

// Provisioner is the micro-OS side of Day 0: it discovers (retrying until
// the host is onboarded), gets a node token, fetches the workflow and runs
// its actions from where the server says to resume, reporting each one.
type Provisioner struct {
	Client      *http.Client // trusts the server's CA (Dial)
	URL         string       // the server's agent URL, e.g. https://eim:8443
	EnrollToken string
	Identity    Identity
	Exec        Executor
	Logger      *slog.Logger
	Backoff     Backoff
	// OnPhase, if set, is called as the run enters a phase: "discover",
	// "pending" and "denied" (in a project's enrollment lobby, once per
	// change), "onboarded", "workflow", "action:<name>", "done".
	OnPhase func(phase string)
	// OnLobby, if set, is called at every answer of the enrollment lobby
	// (denied or not) with its message.
	OnLobby func(denied bool, message string)

	// Installed says the machine runs its OS already (Enroll): once
	// onboarded it skips provisioning. Labels and Hardware describe the
	// device to its enrollment request (auto-approval rules match on
	// Labels).
	Installed bool
	Labels    []Label
	Hardware  *onboardingv1.HardwareSummary
	// MaxPendingWait, when positive, caps the wait between the calls of
	// a device waiting in the lobby (tests, rehearsals); a denied device
	// backs off all the same.
	MaxPendingWait time.Duration

	// AgentVersion is sent to the server; "" sends Version.
	AgentVersion string
	// CACertPEM is written into the agent configuration of the installed
	// OS; when nil it is read from Pin (the CA learnt from its fingerprint).
	CACertPEM []byte
	Pin       *Pin
	// StopOnFailed makes Run return a *WorkflowFailedError when the
	// workflow failed, instead of asking again until a user retries it.
	StopOnFailed bool
	// OutputInterval is how often output of a running action is reported
	// (default 2 s).
	OutputInterval time.Duration
	// OpenTPM opens the TPM that quotes the measured boot
	// (Identity.MeasuredBoot, when it has one); nil is tpmseal.Open, the
	// node's /dev/tpmrm0.
	OpenTPM func() (io.ReadWriteCloser, error)
	// Now and Wait replace the clock in tests (Wait sleeps d or until ctx
	// ends).
	Now  func() time.Time
	Wait func(ctx context.Context, d time.Duration) error
}

// maxOutputChunk is the most output one report carries.
const maxOutputChunk = 64 << 10

func (p *Provisioner) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

func (p *Provisioner) phase(name string) {
	if p.OnPhase != nil {
		p.OnPhase(name)
	}
}

func (p *Provisioner) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Provisioner) wait(ctx context.Context, d time.Duration) error {
	if p.Wait != nil {
		return p.Wait(ctx, d)
	}
	return sleep(ctx, d)
}

func (p *Provisioner) version() string {
	if p.AgentVersion != "" {
		return p.AgentVersion
	}
	return Version
}

// Run provisions the machine. It returns when the workflow reached its
// reboot action (after reporting it and running it), when the server says
// provisioning is done, or when ctx ends.
func (p *Provisioner) Run(ctx context.Context) (Result, error) {
	if p.Client == nil || p.URL == "" || p.Exec == nil {
		return Result{}, errors.New("provisioner: Client, URL and Exec are required")
	}
	base := strings.TrimSuffix(p.URL, "/")
	ob := onboardingv1connect.NewOnboardingServiceClient(p.Client, base)
	for {
		p.phase("discover")
		res, err := p.discover(ctx, ob)
		if err != nil {
			return Result{}, err
		}
		p.log().Info("onboarded", "host", res.HostID, "project", res.Project)
		p.phase("onboarded")
		err = p.provisionWith(ctx, base, &res)
		if errors.Is(err, errInvalidClient) {
			p.log().Warn("credentials refused; discovering again")
			continue
		}
		return res, err
	}
}

// Resume goes on with a machine onboarded by an earlier Run, which
// returned res (a *WorkflowFailedError with StopOnFailed): it asks for the
// workflow with res's credentials, as Run does after Discover, until it ran
// or ctx ends; credentials refused send it back to Discover.
func (p *Provisioner) Resume(ctx context.Context, res Result) (Result, error) {
	if p.Client == nil || p.URL == "" || p.Exec == nil {
		return Result{}, errors.New("provisioner: Client, URL and Exec are required")
	}
	err := p.provisionWith(ctx, strings.TrimSuffix(p.URL, "/"), &res)
	if errors.Is(err, errInvalidClient) {
		p.log().Warn("credentials refused; discovering again")
		return p.Run(ctx)
	}
	return res, err
}

// provisionWith runs provision with res's client credentials.
func (p *Provisioner) provisionWith(ctx context.Context, base string, res *Result) error {
	tk := &tokens{client: p.Client, url: res.TokenURL, clientID: res.ClientID, clientSecret: res.ClientSecret, now: p.now}
	pc := provisioningv1connect.NewProvisioningServiceClient(p.Client, base, connect.WithInterceptors(tk.interceptor()))
	return p.provision(ctx, pc, res)
}

// Label is a key=value label a device reports when it enrolls.
type Label struct{ Key, Value string }

// Enroll is Day 0 of a machine that runs its OS already (eim-agent
// enroll): it calls home until the host is onboarded — waiting in the
// project's enrollment lobby until approved, backing off when denied —
// and returns the credentials for node mode, with no provisioning.
func (p *Provisioner) Enroll(ctx context.Context) (Result, error) {
	if p.Client == nil || p.URL == "" {
		return Result{}, errors.New("enroll: Client and URL are required")
	}
	p.Installed = true
	ob := onboardingv1connect.NewOnboardingServiceClient(p.Client, strings.TrimSuffix(p.URL, "/"))
	p.phase("discover")
	res, err := p.discover(ctx, ob)
	if err != nil {
		return Result{}, err
	}
	p.phase("onboarded")
	return res, nil
}

// Waits of a device in the enrollment lobby: a denied one waits what the
// server says, doubling at each denial in a row, up to maxDeniedWait.
const maxDeniedWait = time.Hour

// deniedWait returns the wait after the n-th denial in a row (from 1),
// jittered by ±20 %.
func deniedWait(retryAfter time.Duration, n int) time.Duration {
	d := max(retryAfter, time.Minute)
	for i := 1; i < n && d < maxDeniedWait; i++ {
		d *= 2
	}
	d = min(d, maxDeniedWait)
	return d - d/5 + rand.N(2*d/5+1)
}

// discover calls Discover until the host is onboarded.
func (p *Provisioner) discover(ctx context.Context, ob onboardingv1connect.OnboardingServiceClient) (Result, error) {
	req := &onboardingv1.DiscoverRequest{
		Uuid:            p.Identity.UUID,
		Serial:          p.Identity.Serial,
		Hostname:        p.Identity.Hostname,
		AgentVersion:    p.version(),
		EnrollmentToken: p.EnrollToken,
		Installed:       p.Installed,
		Hardware:        p.Hardware,
		SecureBoot:      p.Identity.SecureBoot,
	}
	for _, l := range p.Labels {
		req.Labels = append(req.Labels, &onboardingv1.Label{Key: l.Key, Value: l.Value})
	}
	for _, i := range p.Identity.Interfaces {
		req.Interfaces = append(req.Interfaces, &onboardingv1.NetworkInterface{Name: i.Name, Mac: i.MAC, IpAddresses: i.Addrs})
	}
	r := retrier{b: p.Backoff}
	var (
		denials int
		lobby   string // the last lobby answer, to log changes once
	)
	for {
		resp, err := ob.Discover(ctx, connect.NewRequest(req))
		if err == nil {
			m := resp.Msg
			switch m.GetStatus() {
			case onboardingv1.DiscoverResponse_STATUS_ONBOARDED:
				if m.GetHostId() == "" || m.GetClientId() == "" || m.GetClientSecret() == "" {
					err = connect.NewError(connect.CodeInternal, errors.New("discover: onboarded without credentials"))
					break
				}
				tokenURL := m.GetTokenUrl()
				if tokenURL == "" {
					tokenURL = strings.TrimSuffix(p.URL, "/") + "/oauth2/token"
				}
				return Result{HostID: m.GetHostId(), Project: m.GetProject(), ClientID: m.GetClientId(),
					ClientSecret: m.GetClientSecret(), TokenURL: tokenURL}, nil
			case onboardingv1.DiscoverResponse_STATUS_REGISTERED:
				r.reset()
				d := time.Duration(m.GetRetryAfterSeconds()) * time.Second
				d = min(max(d, time.Second), 5*time.Minute)
				p.log().Info("registered; waiting to be onboarded", "host", m.GetHostId(), "retry_in", d)
				if err := p.wait(ctx, d); err != nil {
					return Result{}, err
				}
				continue
			case onboardingv1.DiscoverResponse_STATUS_PENDING, onboardingv1.DiscoverResponse_STATUS_DENIED:
				r.reset()
				denied := m.GetStatus() == onboardingv1.DiscoverResponse_STATUS_DENIED
				d := time.Duration(m.GetRetryAfterSeconds()) * time.Second
				phase := "pending"
				if denied {
					denials++
					d, phase = deniedWait(d, denials), "denied"
				} else {
					denials = 0
					d = min(max(d, time.Second), 5*time.Minute)
					if p.MaxPendingWait > 0 {
						d = min(d, p.MaxPendingWait)
					}
				}
				if p.OnLobby != nil {
					p.OnLobby(denied, m.GetMessage())
				}
				if lobby != phase+m.GetMessage() {
					lobby = phase + m.GetMessage()
					p.phase(phase)
					p.log().Warn(m.GetMessage(), "enrollment", m.GetEnrollmentId(), "retry_in", d.Round(time.Second))
				}
				if err := p.wait(ctx, d); err != nil {
					return Result{}, err
				}
				continue
			default:
				err = connect.NewError(connect.CodeInternal, fmt.Errorf("discover: unknown status %v", m.GetStatus()))
			}
		}
		if ctx.Err() != nil {
			return Result{}, context.Cause(ctx)
		}
		d := r.next(err)
		p.log().Warn("discover failed", "err", err, "retry_in", d)
		if err := p.wait(ctx, d); err != nil {
			return Result{}, err
		}
	}
}

// provision asks for the workflow and runs it until the reboot action or
// DONE. It returns errInvalidClient when the credentials stopped working.
func (p *Provisioner) provision(ctx context.Context, pc provisioningv1connect.ProvisioningServiceClient, res *Result) error {
	p.phase("workflow")
	r := retrier{b: p.Backoff}
	// The measured boot (some 13 KB) goes with the first request, and
	// again only when the server's last answer did not say it can do
	// without (measured_boot_later): when it asks for it, or predates that.
	// With a TPM that measured the boot, the agent quotes: it sends its
	// TPM's keys, the server answers with a nonce wrapped for them, and
	// the measured boot goes quoted over the latest one (the first request
	// has none yet: the server answers with one and asks again before it
	// creates the workflow).
	later := false
	var qt *quoter
	if canQuote(p.Identity.MeasuredBoot) {
		qt = p.newQuoter()
	}
	for {
		req := &provisioningv1.GetWorkflowRequest{AgentVersion: p.version(), SecureBoot: p.Identity.SecureBoot, MeasuredBoot: p.Identity.MeasuredBoot}
		if qt != nil {
			req.Quotes, req.TpmKeys = true, qt.keys
		}
		switch {
		case later && req.MeasuredBoot != nil:
			req.MeasuredBoot, req.MeasuredBootWithheld = nil, true
		case qt != nil:
			req.MeasuredBoot = qt.measured(req.MeasuredBoot)
		}
		resp, err := pc.GetWorkflow(ctx, connect.NewRequest(req))
		var d time.Duration
		switch {
		case errors.Is(err, errInvalidClient):
			return err
		case err != nil:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			d = r.next(err)
			p.log().Warn("get workflow failed", "err", err, "retry_in", d)
		default:
			r.reset()
			m := resp.Msg
			later = m.GetMeasuredBootLater()
			if qt != nil {
				qt.challenge = m.GetAttestationChallenge()
			}
			d = pollAfter(m.GetPollAfterSeconds())
			switch m.GetDisposition() {
			case provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT:
				p.log().Debug("no workflow yet", "retry_in", d)
			case provisioningv1.GetWorkflowResponse_DISPOSITION_DONE:
				p.phase("done")
				return nil
			case provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED:
				p.log().Error("workflow failed", "message", m.GetMessage())
				if p.StopOnFailed {
					return &WorkflowFailedError{Message: m.GetMessage()}
				}
			case provisioningv1.GetWorkflowResponse_DISPOSITION_RUN:
				rebooted, err := p.runWorkflow(ctx, pc, m.GetWorkflow(), res)
				if rebooted {
					res.Rebooted = true
					p.phase("done")
					return err
				}
				if errors.Is(err, errInvalidClient) || ctx.Err() != nil {
					return errors.Join(err, context.Cause(ctx))
				}
				if err == nil {
					continue // ask again: DONE, FAILED or a new attempt
				}
				d = r.next(err)
				p.log().Warn("workflow interrupted", "err", err, "retry_in", d)
			default:
				d = r.next(nil)
				p.log().Warn("unknown workflow disposition", "disposition", m.GetDisposition())
			}
		}
		if err := p.wait(ctx, d); err != nil {
			return err
		}
	}
}

func pollAfter(s uint32) time.Duration {
	if s == 0 {
		return 10 * time.Second
	}
	return min(time.Duration(s)*time.Second, 10*time.Minute)
}

// runWorkflow runs wf's actions from resume_from. It returns rebooted when
// the reboot action was reported and run; (false, nil) when an action failed
// or the server cancelled the attempt (the caller asks again).
func (p *Provisioner) runWorkflow(ctx context.Context, pc provisioningv1connect.ProvisioningServiceClient, wf *provisioningv1.Workflow, res *Result) (rebooted bool, err error) {
	acts := wf.GetActions()
	if int(wf.GetResumeFrom()) > len(acts) {
		return false, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("workflow resumes from %d of %d actions", wf.GetResumeFrom(), len(acts)))
	}
	p.log().Info("running workflow", "workflow", wf.GetId(), "attempt", wf.GetAttempt(), "resume_from", wf.GetResumeFrom(), "actions", len(acts))
	rep := &reporter{p: p, pc: pc, wf: wf, interval: p.outputInterval()}
	for _, a := range acts[wf.GetResumeFrom():] {
		p.phase("action:" + a.GetName())
		rep.start(a)
		// No RUNNING report up front: an action that ends within the
		// output interval is reported once, when it ends, and that report
		// waits for company (see reporter); a longer one is reported
		// RUNNING at the first tick (see runAction).
		if _, ok := a.GetSpec().(*provisioningv1.Action_Reboot); ok {
			// Reported first: after the reboot there is nobody to report.
			if cancel, err := rep.send(ctx, provisioningv1.ActionState_ACTION_STATE_SUCCEEDED, "rebooting", nil, 0, true); err != nil || cancel {
				return false, err
			}
			if err := p.Exec.Run(ctx, a, io.Discard); err != nil {
				return true, fmt.Errorf("reboot: %w", err)
			}
			return true, nil
		}
		ok, err := p.runAction(ctx, rep, a, res)
		if err != nil || !ok {
			return false, err
		}
	}
	_, err = rep.flush(ctx)
	return false, err
}

// runAction runs one action, reporting its output while it runs and its
// end. ok is false when the action failed or the attempt was cancelled.
func (p *Provisioner) runAction(ctx context.Context, rep *reporter, a *provisioningv1.Action, res *Result) (ok bool, err error) {
	a, err = p.prepare(ctx, rep, a, res)
	if err != nil {
		_, rerr := rep.send(ctx, provisioningv1.ActionState_ACTION_STATE_FAILED, err.Error(), nil, 1, true)
		return false, rerr
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var timeout time.Duration
	if a.GetTimeoutSeconds() > 0 {
		timeout = time.Duration(a.GetTimeoutSeconds()) * time.Second
		actx, cancel = context.WithTimeout(actx, timeout)
		defer cancel()
	}
	out := &outputBuffer{}
	done := make(chan error, 1)
	start := p.now()
	go func() { done <- p.Exec.Run(actx, a, out) }()
	tick := time.NewTicker(rep.interval)
	defer tick.Stop()
	var (
		runErr  error
		running bool // RUNNING was reported
	)
wait:
	for {
		select {
		case runErr = <-done:
			break wait
		case <-tick.C:
			chunk := out.peek(maxOutputChunk)
			if len(chunk) == 0 && running {
				continue
			}
			// One try: on failure the output stays for the next report.
			cancelled, err := rep.send(ctx, provisioningv1.ActionState_ACTION_STATE_RUNNING, "", chunk, 0, false)
			if err == nil {
				out.consume(len(chunk))
				running = true
			}
			if cancelled || errors.Is(err, errInvalidClient) {
				cancel()
				<-done
				return false, err
			}
		}
	}
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	// Flush all but the last chunk as RUNNING reports.
	for out.len() > maxOutputChunk {
		chunk := out.peek(maxOutputChunk)
		if cancelled, err := rep.send(ctx, provisioningv1.ActionState_ACTION_STATE_RUNNING, "", chunk, 0, true); err != nil || cancelled {
			return false, err
		}
		out.consume(len(chunk))
	}
	state, msg, code := provisioningv1.ActionState_ACTION_STATE_SUCCEEDED, "", int32(0)
	if runErr != nil {
		state, code = provisioningv1.ActionState_ACTION_STATE_FAILED, exitCode(runErr)
		msg = runErr.Error()
		if errors.Is(actx.Err(), context.DeadlineExceeded) {
			msg = fmt.Sprintf("timed out after %ds", int(timeout.Seconds()))
		}
		p.log().Error("action failed", "action", a.GetName(), "err", msg)
	} else {
		p.log().Info("action succeeded", "action", a.GetName(), "took", p.now().Sub(start).Round(time.Millisecond))
	}
	// A success waits for the next report; a failure is told at once.
	var cancelled bool
	if runErr == nil {
		cancelled, err = rep.hold(ctx, state, msg, out.peek(maxOutputChunk), code)
	} else {
		cancelled, err = rep.send(ctx, state, msg, out.peek(maxOutputChunk), code, true)
	}
	if err != nil || cancelled {
		return false, err
	}
	return runErr == nil, nil
}

// outputInterval is how often a running action's output is reported, and
// how long the report of a quick action may wait for company.
func (p *Provisioner) outputInterval() time.Duration {
	if p.OutputInterval > 0 {
		return p.OutputInterval
	}
	return 2 * time.Second
}

// prepare turns a write-agent-config action into the write-file of the node
// configuration: only the agent knows its client secret. An encrypt-root
// action gets a new recovery key, escrowed with the server first: a disk
// whose only key is sealed to its TPM is lost with the TPM. An executor
// that can tell the action would be refused (RootPreflight: the partition
// is encrypted already) fails it before, escrowing nothing.
func (p *Provisioner) prepare(ctx context.Context, rep *reporter, a *provisioningv1.Action, res *Result) (*provisioningv1.Action, error) {
	if er, ok := a.GetSpec().(*provisioningv1.Action_EncryptRoot); ok {
		if c, ok := p.Exec.(RootPreflight); ok {
			if err := c.CheckEncryptRoot(ctx, er.EncryptRoot); err != nil {
				return nil, err
			}
		}
		return p.escrow(ctx, rep, a, er.EncryptRoot)
	}
	wc, ok := a.GetSpec().(*provisioningv1.Action_WriteAgentConfig)
	if !ok {
		return a, nil
	}
	ca := p.CACertPEM
	if ca == nil && p.Pin != nil {
		ca = p.Pin.CACertPEM()
	}
	cfg := NodeConfig{
		URL:          strings.TrimSuffix(p.URL, "/"),
		CACertPEM:    string(ca),
		ClientID:     res.ClientID,
		ClientSecret: res.ClientSecret,
		TokenURL:     res.TokenURL,
		HostID:       res.HostID,
		Project:      res.Project,
	}
	content, err := cfg.Marshal()
	if err != nil {
		return nil, err
	}
	out := proto.CloneOf(a)
	out.Spec = &provisioningv1.Action_WriteFile{WriteFile: &provisioningv1.WriteFile{
		Device:    wc.WriteAgentConfig.GetDevice(),
		Partition: wc.WriteAgentConfig.GetPartition(),
		Path:      wc.WriteAgentConfig.GetPath(),
		Content:   content,
		Mode:      0o600,
	}}
	return out, nil
}

// escrow makes the recovery key and the volume UUID of an encrypt-root
// action, sends them to the server (retrying transient errors) and returns
// the action carrying them for the Executor.
func (p *Provisioner) escrow(ctx context.Context, rep *reporter, a *provisioningv1.Action, er *provisioningv1.EncryptRoot) (*provisioningv1.Action, error) {
	key, err := NewRecoveryKey()
	if err != nil {
		return nil, err
	}
	uuid, err := newVolumeUUID()
	if err != nil {
		return nil, err
	}
	req := &provisioningv1.EscrowRecoveryKeyRequest{WorkflowId: rep.wf.GetId(), Attempt: rep.wf.GetAttempt(), Index: a.GetIndex(), RecoveryKey: key, VolumeUuid: uuid}
	rt := retrier{b: p.Backoff}
	for {
		_, err := rep.pc.EscrowRecoveryKey(ctx, connect.NewRequest(req))
		if err == nil {
			break
		}
		if errors.Is(err, errInvalidClient) || ctx.Err() != nil || !transient(err) {
			return nil, fmt.Errorf("escrow the recovery key (the disk is not encrypted without it): %w", errors.Join(err, context.Cause(ctx)))
		}
		d := rt.next(err)
		p.log().Warn("escrowing the recovery key failed", "err", err, "retry_in", d)
		if err := p.wait(ctx, d); err != nil {
			return nil, err
		}
	}
	p.log().Info("recovery key escrowed", "volume", uuid)
	out := proto.CloneOf(a)
	enc := proto.CloneOf(er)
	enc.RecoveryKey, enc.VolumeUuid = key, uuid
	out.Spec = &provisioningv1.Action_EncryptRoot{EncryptRoot: enc}
	return out, nil
}

func exitCode(err error) int32 {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return int32(ee.ExitCode())
	}
	return 1
}

// reporter sends the action reports of one workflow attempt. The report of
// an action that ended within the output interval is held and goes with
// the next report that must be sent (a longer action's first output, a
// failure, the reboot), or on its own once the oldest held report is an
// interval old: quick actions (writing a file, setting the boot order) then
// cost the server one call and one write between them. A node that reboots
// before sending what it held runs those actions again, as after any lost
// report.
type reporter struct {
	p        *Provisioner
	pc       provisioningv1connect.ProvisioningServiceClient
	wf       *provisioningv1.Workflow
	interval time.Duration
	a        *provisioningv1.Action // the action being run
	// off is how much output this run of the action reported: the offset
	// of the next report's output. A report whose answer was lost is sent
	// again from the same offset, so the server drops what it has.
	off       uint64
	held      []*provisioningv1.ReportActionRequest
	heldSince time.Time
	// single: the server predates ReportActions; send reports one by one.
	single bool
}

// maxHeld is the most reports held before they are sent (the server takes
// up to 32 in one call).
const maxHeld = 16

// start makes a the action whose reports follow.
func (r *reporter) start(a *provisioningv1.Action) { r.a, r.off = a, 0 }

func (r *reporter) request(state provisioningv1.ActionState, msg string, output []byte, code int32) *provisioningv1.ReportActionRequest {
	return &provisioningv1.ReportActionRequest{
		WorkflowId:   r.wf.GetId(),
		Attempt:      r.wf.GetAttempt(),
		Index:        r.a.GetIndex(),
		State:        state,
		Message:      msg,
		Output:       output,
		OutputOffset: r.off,
		ExitCode:     code,
	}
}

// send reports now, after the held reports; with retry it retries
// transient errors until ctx ends. An error the server means
// (InvalidArgument and the like) is returned.
func (r *reporter) send(ctx context.Context, state provisioningv1.ActionState, msg string, output []byte, code int32, retry bool) (cancel bool, err error) {
	reqs := append(r.held[:len(r.held):len(r.held)], r.request(state, msg, output, code))
	cancel, err = r.post(ctx, reqs, retry)
	if err == nil {
		r.off += uint64(len(output))
		r.held = nil
	}
	return cancel, err
}

// hold keeps the report of the current action's end for the next send. It
// sends the held reports at once when the oldest is an interval old or
// maxHeld are held.
func (r *reporter) hold(ctx context.Context, state provisioningv1.ActionState, msg string, output []byte, code int32) (cancel bool, err error) {
	if len(r.held) == 0 {
		r.heldSince = r.p.now()
	}
	r.held = append(r.held, r.request(state, msg, output, code))
	r.off += uint64(len(output))
	if len(r.held) >= maxHeld || r.p.now().Sub(r.heldSince) >= r.interval {
		return r.flush(ctx)
	}
	return false, nil
}

// flush sends the held reports, retrying transient errors.
func (r *reporter) flush(ctx context.Context) (cancel bool, err error) {
	if len(r.held) == 0 {
		return false, nil
	}
	cancel, err = r.post(ctx, r.held, true)
	if err == nil {
		r.held = nil
	}
	return cancel, err
}

// post delivers reqs in order, retrying transient errors when retry is set.
func (r *reporter) post(ctx context.Context, reqs []*provisioningv1.ReportActionRequest, retry bool) (cancel bool, err error) {
	rt := retrier{b: r.p.Backoff}
	for {
		cancel, err := r.call(ctx, reqs)
		if err == nil {
			if cancel {
				r.p.log().Warn("workflow attempt superseded", "workflow", r.wf.GetId(), "attempt", r.wf.GetAttempt())
			}
			return cancel, nil
		}
		if !retry || errors.Is(err, errInvalidClient) || ctx.Err() != nil || !transient(err) {
			return false, errors.Join(err, context.Cause(ctx))
		}
		d := rt.next(err)
		r.p.log().Warn("report failed", "action", r.a.GetName(), "err", err, "retry_in", d)
		if err := r.p.wait(ctx, d); err != nil {
			return false, err
		}
	}
}

// call makes one attempt at delivering reqs: one ReportActions call, or
// ReportAction calls to a server without it (a report delivered before a
// failed one is recorded once when sent again).
func (r *reporter) call(ctx context.Context, reqs []*provisioningv1.ReportActionRequest) (cancel bool, err error) {
	if len(reqs) > 1 && !r.single {
		resp, err := r.pc.ReportActions(ctx, connect.NewRequest(&provisioningv1.ReportActionsRequest{Reports: reqs}))
		if err == nil {
			return resp.Msg.GetCancel(), nil
		}
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			return false, err
		}
		r.single = true
	}
	for _, req := range reqs {
		resp, err := r.pc.ReportAction(ctx, connect.NewRequest(req))
		if err != nil {
			return false, err
		}
		if resp.Msg.GetCancel() {
			return true, nil
		}
	}
	return false, nil
}
