// Package onboarding is the Day-0 onboarding module: the southbound
// Discover call with which a node in the micro-OS is matched to its host
// and receives credentials, and the reconciler of hosts: it finishes
// invalidations (credentials revoked, current UNTRUSTED, "Invalidated") and,
// zero-touch (nZTP), gives onboarded hosts of a project with a default OS
// their instance.
package onboarding

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	"github.com/eimhq/eim/southbound"
)

// Status texts of hosts (as the original shows them).
const (
	StatusOnboarded  = "Onboarded"
	StatusRegistered = "Host is Registered"
	StatusMismatch   = "Host Registration Failed due to mismatch of UUID/Serial Number"
	// StatusBooting is the host status that replaces a Secure Boot
	// mismatch flagged at an earlier Discover once the device reports a
	// state its instance accepts.
	StatusBooting = "Booting"
	// StatusClaimed is the registration status of a host whose device
	// another project registered too and which carried that project's
	// enrollment token (ours: see lookup).
	StatusClaimed = "Host Registration Failed: the device is registered in another project, whose enrollment token it carries"
	// StatusHeld is the registration status of the hosts of a device
	// registered in more than one project that carried none of their
	// enrollment tokens: it is held until it does, or until only one
	// registration is left (ours: see lookup).
	StatusHeld = "Host Registration Held: the device is claimed by more than one project; boot it with this project's enrollment token"
)

// Options configure a Service. Store, Batcher and TokenURL are required.
type Options struct {
	Store   eim.Store
	Batcher *inventory.Batcher
	Logger  *slog.Logger
	// Metrics, when set, gets the count of node credentials issued and
	// the series of the nZTP reconciler's change-feed runner.
	Metrics prometheus.Registerer
	Now     func() time.Time
	// TokenURL is the absolute URL of the token endpoint given to nodes.
	TokenURL string
	// Resync is how often the nZTP reconciler re-lists everything
	// (default 30 s).
	Resync time.Duration
	// LobbyQuiet is how often a device waiting in the enrollment lobby
	// has its request written (default LobbyQuiet).
	LobbyQuiet time.Duration
}

// Service implements onboardingv1connect.OnboardingServiceHandler.
type Service struct {
	metrics prometheus.Registerer
	store   eim.Store
	batch   *inventory.Batcher
	// claims are the store's typed operations of Discover, their writes
	// run by batch.
	claims   eim.DeviceClaims
	log      *slog.Logger
	now      func() time.Time
	tokenURL string
	resync   time.Duration
	// invalidations wakes the scan for hosts whose invalidation is not
	// finished (see scanInvalidations).
	invalidations poker
	direct        bool
	// credentials counts the client secrets issued to nodes.
	credentials prometheus.Counter
	// The enrollment lobby's calls not written yet (lobby.go).
	unsaved    unsavedCalls
	lobbyQuiet time.Duration
}

var _ onboardingv1connect.OnboardingServiceHandler = (*Service)(nil)

// New returns the onboarding service.
func New(opts Options) *Service {
	s := &Service{store: opts.Store, batch: opts.Batcher, metrics: opts.Metrics, log: opts.Logger, now: opts.Now, tokenURL: opts.TokenURL, resync: opts.Resync, invalidations: newPoker()}
	// A store that takes concurrent writers (PostgreSQL): Discover decides
	// in the batched write transaction only, without a read-only look
	// first (see provisioning's GetWorkflow).
	s.direct = opts.Store.Capabilities().ConcurrentWriters
	var run eim.TxRunner // nil: a transaction of the store's each
	if opts.Batcher != nil {
		run = opts.Batcher
	}
	s.claims = opts.Store.DeviceClaims(run)
	s.credentials = metrics.Register(opts.Metrics, prometheus.NewCounter(prometheus.CounterOpts{Name: "eim_node_credentials_issued_total",
		Help: "Client credentials (a new client secret) issued to nodes that called home and were onboarded."}))
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.resync <= 0 {
		s.resync = 30 * time.Second
	}
	s.lobbyQuiet = opts.LobbyQuiet
	if s.lobbyQuiet <= 0 {
		s.lobbyQuiet = LobbyQuiet
	}
	return s
}

// Discover matches the calling device to its host (see the proto for the
// answers and errors).
func (s *Service) Discover(ctx context.Context, req *connect.Request[onboardingv1.DiscoverRequest]) (*connect.Response[onboardingv1.DiscoverResponse], error) {
	resp, err := s.discover(ctx, req.Msg)
	if err != nil {
		return nil, s.rpcError(err, req.Msg)
	}
	return connect.NewResponse(resp), nil
}

func (s *Service) discover(ctx context.Context, req *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
	return s.discoverPass(ctx, req, false)
}

// discoverAgain runs a call again once a rule approved its device: its
// host exists now.
func (s *Service) discoverAgain(ctx context.Context, req *onboardingv1.DiscoverRequest) (*onboardingv1.DiscoverResponse, error) {
	return s.discoverPass(ctx, req, true)
}

func (s *Service) discoverPass(ctx context.Context, req *onboardingv1.DiscoverRequest, again bool) (*onboardingv1.DiscoverResponse, error) {
	id, err := parseIdentity(req)
	if err != nil {
		return nil, err
	}
	token := req.GetEnrollmentToken()
	// The project of the token, if any: it enrolls an unknown device, and
	// proves which project a device registered in several belongs to.
	var (
		project   *eim.Project
		tokenRule *eim.EnrollmentRule
		tokenErr  error
		proof     string
	)
	if token != "" {
		project, tokenRule, tokenErr = s.projectOfToken(ctx, token)
		if project != nil {
			proof = project.Name
		}
	}
	now := s.now()
	// With one writer (SQLite), a read-only look first: refusals and
	// unchanged answers then cost the writer nothing. With concurrent
	// writers the batched transaction below decides alone.
	if !s.direct {
		set, err := s.claims.Claims(ctx, id.uuid, id.serial)
		if err != nil {
			return nil, err
		}
		d, err := decide(set, id, proof, now)
		if err != nil {
			return nil, err
		}
		if d.enroll == nil && !d.writes() {
			return d.answer(s, "")
		}
		if d.enroll != nil {
			if token == "" {
				return nil, unknownDevice(id)
			}
			if tokenErr != nil {
				return nil, tokenErr
			}
			return s.lobby(ctx, project, tokenRule, id, req, again)
		}
	}
	// Decide (again) in the write transaction, which is authoritative.
	// Refusals are answers, not failures of the call: a failed call would
	// make its whole batch run again.
	var (
		resp    *onboardingv1.DiscoverResponse
		answer  error
		toLobby bool
	)
	secret, hash := southbound.NewSecret() // used when the host is onboarded
	err = s.claims.RecordDiscover(ctx, id.uuid, id.serial, func(set eim.DeviceClaimSet) ([]eim.ClaimChange, error) {
		resp, answer, toLobby = nil, nil, false
		d, err := decide(set, id, proof, now)
		if err != nil {
			if refusal(err) {
				answer = err
				return nil, nil
			}
			return nil, err
		}
		if d.enroll != nil {
			switch {
			case tokenErr != nil:
				answer = tokenErr
				return nil, nil
			case project == nil: // no token, or its host went away meanwhile
				answer = unknownDevice(id)
				return nil, nil
			}
			toLobby = true // after this transaction: the lobby owns its own
			return nil, nil
		}
		// The answer of a mismatch is an error that must not roll back
		// the status written with it.
		resp, answer = d.answer(s, secret)
		return d.changes(id, hash, now), nil // none when nothing changes
	})
	if err != nil {
		return nil, err
	}
	if toLobby {
		return s.lobby(ctx, project, tokenRule, id, req, again)
	}
	if answer != nil {
		return nil, answer
	}
	if resp.GetClientSecret() != "" {
		s.credentials.Inc()
	}
	s.log.Debug("discover", "host", resp.GetHostId(), "project", resp.GetProject(), "status", resp.GetStatus().String())
	return resp, nil
}

// refusal reports whether err, from decide, refuses the device (rather
// than being a failure of the store).
func refusal(err error) bool {
	switch eim.ErrorCode(err) {
	case eim.EPRECONDITION, eim.EINVALID:
		return true
	}
	return false
}

// decision is what Discover does for a device.
type decision struct {
	host     *eim.DeviceClaim   // the device's host, when matched
	mismatch []*eim.DeviceClaim // UUID and serial point at different hosts
	conflict []*eim.DeviceClaim // registrations of the device in other projects than the one it proved
	held     []*eim.DeviceClaim // registrations in several projects, none proved: held
	enroll   *struct{}          // unknown device: enroll it if it has a token

	// instance is the host's instance, if it has one. secureBoot is the
	// Secure Boot state the device reported, sbAt when (unix seconds), and
	// sbMismatch, when the instance asks for another, why: the device is
	// refused (eim.CheckSecureBoot).
	instance   *eim.Instance
	secureBoot eim.SecureBootState
	sbAt       uint64
	sbMismatch error
}

// decide looks the device up among its claims and applies the rules that
// refuse it; proof is the project whose enrollment token the device
// carries, if any, and now the time of the call (when the device's Secure
// Boot state was read). It is pure: the store's operation may run it
// again.
func decide(set eim.DeviceClaimSet, id identity, proof string, now time.Time) (decision, error) {
	m, err := lookup(set, id, proof)
	if err != nil {
		return decision{}, err
	}
	if len(m.held) > 0 {
		return decision{held: m.held}, nil
	}
	if len(m.mismatch) > 0 {
		return decision{mismatch: m.mismatch, conflict: m.conflict}, nil
	}
	if m.host == nil {
		return decision{enroll: &struct{}{}}, nil
	}
	// Refusals name no host or project: the caller is not authenticated.
	h := m.host
	switch h.DesiredState {
	case eim.HostStateUntrusted:
		return decision{}, eim.Errorf(eim.EPRECONDITION, "this device's host is invalidated (untrusted); delete it and register the device again")
	case eim.HostStateDeleted:
		return decision{}, eim.Errorf(eim.EPRECONDITION, "this device's host is being deleted")
	}
	if h.InstanceState == eim.InstanceStateRunning {
		return decision{}, eim.Errorf(eim.EPRECONDITION, "this device's host is already provisioned; invalidate or delete the host to re-onboard")
	}
	d := decision{host: h, conflict: m.conflict, secureBoot: id.secureBoot, sbAt: uint64(now.Unix())}
	if in := h.Instance(); in != nil {
		d.instance = in
		// As the original's onboarding: an instance known already is held
		// to the Secure Boot state the node booted with, before the node
		// gets credentials (provisioning checks the instances that come
		// later). A device that runs its OS already is not provisioned;
		// an agent that did not report the state is left to provisioning,
		// which refuses it only for an instance that asks for Secure Boot.
		if !id.installed && id.secureBoot != eim.SecureBootStateUnspecified {
			d.sbMismatch = eim.CheckSecureBoot(d.instance, id.secureBoot)
		}
	}
	return d, nil
}

// onboarding reports whether the host gets credentials.
func (d decision) onboarding() bool {
	return d.host != nil && d.host.DesiredState == eim.HostStateOnboarded && d.sbMismatch == nil
}

// writes reports whether applying d changes anything. Onboarding always
// does (a new secret every call).
func (d decision) writes() bool {
	return d.onboarding() || len(d.changes(identity{}, "", time.Time{})) > 0
}

// changes are what d writes, in order: the registration errors of the
// hosts the device mismatches, conflicts with or is held on (unless they
// show it already), then the matched host's: its registration status,
// the Secure Boot state the device reported (when eim.SecureBootDue says
// so), and either the host and onboarding statuses of a Secure Boot
// mismatch or, when it is onboarded, its new credentials (secretHash, the
// hash of the secret the answer carries) with the host status back to
// Booting after a mismatch.
func (d decision) changes(id identity, secretHash string, now time.Time) []eim.ClaimChange {
	var out []eim.ClaimChange
	for _, group := range []struct {
		hosts []*eim.DeviceClaim
		text  string
	}{{d.mismatch, StatusMismatch}, {d.conflict, StatusClaimed}, {d.held, StatusHeld}} {
		for _, h := range group.hosts {
			if h.Registration.Text == group.text && h.Registration.Indicator == eim.StatusError {
				continue
			}
			out = append(out, eim.ClaimChange{Project: h.Project, ID: h.ID,
				Registration: &eim.StatusValue{Text: group.text, Indicator: eim.StatusError, Timestamp: uint64(now.Unix())}})
		}
	}
	h := d.host
	if h == nil {
		return out
	}
	ch := eim.ClaimChange{Project: h.Project, ID: h.ID}
	if h.Registration.Text != StatusRegistered || h.Registration.Indicator != eim.StatusIdle {
		ch.Registration = &eim.StatusValue{Text: StatusRegistered, Indicator: eim.StatusIdle, Timestamp: uint64(now.Unix())}
	}
	if eim.SecureBootDue(h.SecureBoot, h.SecureBootAt, d.secureBoot, d.sbAt) {
		ch.SecureBoot = &eim.SecureBootReport{State: d.secureBoot, At: d.sbAt}
	}
	switch {
	case d.sbMismatch != nil:
		// As the original's onboarding: the host status
		// SecureBootMismatch and the onboarding status that says why
		// (both ERROR), each unless shown already. The device gets no
		// credentials (answer refuses it).
		if h.HostStatus.Text != eim.SecureBootMismatch || h.HostStatus.Indicator != eim.StatusError {
			ch.HostStatus = &eim.StatusValue{Text: eim.SecureBootMismatch, Indicator: eim.StatusError, Timestamp: uint64(now.Unix())}
		}
		if why := eim.ErrorMessage(d.sbMismatch); h.Onboarding.Text != why || h.Onboarding.Indicator != eim.StatusError {
			ch.Onboarding = &eim.StatusValue{Text: why, Indicator: eim.StatusError, Timestamp: uint64(now.Unix())}
		}
	case d.onboarding():
		if h.HostStatus.Text == eim.SecureBootMismatch && strings.HasPrefix(h.Onboarding.Text, eim.SecureBootMismatch) {
			// Flagged by an earlier Discover (provisioning's refusals
			// stand until the instance is reprovisioned), and right now:
			// the firmware or the instance changed, and the node boots
			// on.
			ch.HostStatus = &eim.StatusValue{Text: StatusBooting, Indicator: eim.StatusInProgress, Timestamp: uint64(now.Unix())}
		}
		// The device's identity fills in what the registration lacked.
		ch.Credentials = &eim.IssuedCredentials{SecretHash: secretHash, UUID: id.uuid, SerialNumber: id.serial,
			Status: eim.StatusValue{Text: StatusOnboarded, Indicator: eim.StatusIdle, Timestamp: uint64(now.Unix())}}
	}
	if ch.Registration != nil || ch.SecureBoot != nil || ch.HostStatus != nil || ch.Onboarding != nil || ch.Credentials != nil {
		out = append(out, ch)
	}
	return out
}

// answer is the response (or refusal) of a decision.
func (d decision) answer(s *Service, secret string) (*onboardingv1.DiscoverResponse, error) {
	if len(d.mismatch) > 0 {
		return nil, eim.Errorf(eim.EINVALID, "the device's UUID and serial number match different registrations, or a registration with another serial number; correct the registration")
	}
	if len(d.held) > 0 {
		// Retry later, as a registered device does; the answer names no
		// host or project (the caller is not authenticated).
		return &onboardingv1.DiscoverResponse{Status: onboardingv1.DiscoverResponse_STATUS_REGISTERED, RetryAfterSeconds: retryAfter()}, nil
	}
	if d.sbMismatch != nil {
		// Refused, as a device whose host is not to be onboarded would
		// be: it retries with back-off, and passes once its firmware or
		// its instance changed. The reason names no host or project (the
		// caller is not authenticated); the host's statuses say which.
		return nil, eim.Errorf(eim.EPRECONDITION, "%s: this device's instance asks for %s and the device booted %s; the host's onboarding status says what to change",
			eim.SecureBootMismatch, wantSecureBoot(d.instance), eim.DescribeSecureBoot(d.secureBoot))
	}
	h := d.host
	resp := &onboardingv1.DiscoverResponse{HostId: h.ID, Project: h.Project}
	if !d.onboarding() {
		resp.Status = onboardingv1.DiscoverResponse_STATUS_REGISTERED
		resp.RetryAfterSeconds = retryAfter()
		return resp, nil
	}
	resp.Status = onboardingv1.DiscoverResponse_STATUS_ONBOARDED
	resp.ClientId = southbound.ClientID(h.ID)
	resp.ClientSecret = secret
	resp.TokenUrl = s.tokenURL
	return resp, nil
}

// wantSecureBoot says what an instance asks of its node's Secure Boot.
func wantSecureBoot(in *eim.Instance) string {
	if in.SecurityFeature == eim.SecurityFeatureSecureBootFDE {
		return "Secure Boot enforced"
	}
	return "no Secure Boot"
}

// retryAfter is how long a device not onboarded yet waits before it calls
// again (spread, so that a fleet powered on at once does not call at once).
func retryAfter() uint32 {
	return uint32(minRetrySeconds + rand.IntN(maxRetrySeconds-minRetrySeconds+1))
}

func unknownDevice(id identity) error {
	return eim.Errorf(eim.ENOTFOUND, "no host is registered for this device (%s): register it in its project (eim host register), or boot it with a project's enrollment token (eim project set --enrollment-token new)", id)
}

// projectOfToken returns the project whose enrollment token is token, or
// the project and the rule whose token (a TOKEN rule's, a site's) it is.
func (s *Service) projectOfToken(ctx context.Context, token string) (*eim.Project, *eim.EnrollmentRule, error) {
	hash := tokenHash(token)
	projects, err := s.store.ListProjects(ctx)
	if err != nil {
		return nil, nil, err
	}
	var found *eim.Project
	for _, p := range projects {
		if p.Deleting {
			continue // takes no new hosts
		}
		h := p.Settings.EnrollmentTokenHash
		if h != "" && subtle.ConstantTimeCompare([]byte(h), []byte(hash)) == 1 {
			found = p
		}
	}
	if found != nil {
		return found, nil, nil
	}
	rule, err := s.store.FindEnrollmentRuleByToken(ctx, hash)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, nil, eim.Errorf(eim.EFORBIDDEN, "the enrollment token is not valid for any project")
	}
	if err != nil {
		return nil, nil, err
	}
	for _, p := range projects {
		if p.Name == rule.Project && !p.Deleting {
			return p, rule, nil
		}
	}
	return nil, nil, eim.Errorf(eim.EFORBIDDEN, "the enrollment token is not valid for any project")
}

// rpcError translates an error for the node, logging the unexpected ones.
func (s *Service) rpcError(err error, req *onboardingv1.DiscoverRequest) error {
	code := connect.CodeInternal
	switch eim.ErrorCode(err) {
	case eim.ENOTFOUND:
		code = connect.CodeNotFound
	case eim.EINVALID:
		code = connect.CodeInvalidArgument
	case eim.EPRECONDITION:
		code = connect.CodeFailedPrecondition
	case eim.EFORBIDDEN, eim.EUNAUTHORIZED:
		code = connect.CodePermissionDenied
	case eim.ECONFLICT:
		code = connect.CodeAborted
	case eim.EUNAVAILABLE:
		code = connect.CodeUnavailable
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code = connect.CodeCanceled
	}
	var e *eim.Error
	msg := "internal error"
	if errors.As(err, &e) && code != connect.CodeInternal {
		msg = e.Message
	}
	if code == connect.CodeInternal {
		s.log.Error("discover", "uuid", truncate(req.GetUuid(), 64), "serial", truncate(req.GetSerial(), 64), "err", err)
	} else {
		s.log.Debug("discover refused", "uuid", truncate(req.GetUuid(), 64), "serial", truncate(req.GetSerial(), 64), "code", code.String(), "err", err)
	}
	return connect.NewError(code, errors.New(msg))
}
