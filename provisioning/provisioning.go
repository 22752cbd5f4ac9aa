// Package provisioning is EIM's OS provisioning module: it renders the
// workflow that installs an instance's OS (erase the disk, stream the image,
// write the cloud-init seed and the agent configuration, set the boot order,
// reboot), serves it to the agent in the micro-OS, records every action's
// state and output, fails actions that time out, and turns the instance
// RUNNING when the installed OS reports in. It also serves the iPXE boot
// script and the micro-OS artifacts (BootHandler).
//
// Every write from the southbound path goes through a Batcher (the
// inventory's group commit), so thousands of nodes reporting at once cost a
// few transactions, not thousands.
package provisioning

import (
	"context"
	"crypto/x509"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/southbound"
)

// Batcher runs fn in a shared write transaction of the project (see
// inventory.Batcher): fns must be re-runnable, and one fn's error affects
// only its caller. Project-scoped, so that the node's lookups by host use
// the (project, host_id) indexes.
type Batcher interface {
	DoIn(ctx context.Context, project string, fn func(tx eim.Tx) error) error
}

// Options configure a Service. Zero values select defaults.
type Options struct {
	Store eim.Store
	// Metrics, when set, gets the series of its change-feed runner
	// (feed.Options.Metrics).
	Metrics prometheus.Registerer
	// Batcher coalesces the southbound writes; nil writes with one
	// Store.Update (project "") per call.
	Batcher Batcher
	Logger  *slog.Logger
	Now     func() time.Time
	// AgentURL is the southbound URL the installed OS's agent calls.
	AgentURL string
	// CACertPEM is the CA the installed OS trusts (cloud-init ca_certs) and
	// the agent pins; CAFingerprint its "sha256" hex, for the boot script.
	CACertPEM     []byte
	CAFingerprint string
	// ActionTimeouts override the default timeout of actions by name or
	// type ("stream-image": 2*time.Hour).
	ActionTimeouts map[string]time.Duration
	// ArtifactsDir holds the micro-OS kernel and initramfs BootHandler
	// serves.
	ArtifactsDir string
	// SecureBootCert is the deployment's Secure Boot db certificate;
	// with RequireSecureBoot, BootHandler serves an EFI executable of
	// ArtifactsDir only when it is signed with its key.
	SecureBootCert    *x509.Certificate
	RequireSecureBoot bool
	// ScanInterval is how often Run looks for timed-out workflows
	// (default 30 s).
	ScanInterval time.Duration
	// LogCap bounds a workflow's log (default 1 MiB): the oldest output is
	// dropped first; transitions are always kept.
	LogCap int
	// SecretsKey seals the recovery keys of encrypted disks; without it
	// nodes cannot escrow one, and full-disk encryption fails.
	SecretsKey *seal.Key
	// EKRoots are the TPM makers' CAs (--tpm-ek-ca-file): with them, a
	// node's quote is believed only when its EK's certificate chains to
	// one of them and is for the EK the nonce was wrapped for. nil: the
	// keys of a host's first quote are pinned as they are (trust on first
	// use).
	EKRoots *tpmquote.EKRoots
}

// Service implements the provisioning and host southbound services.
type Service struct {
	metrics prometheus.Registerer
	store   eim.Store
	batch   Batcher
	// reports are the store's typed operations of the nodes' reports
	// (action reports, report-in), run by batch.
	reports  eim.NodeReports
	log      *slog.Logger
	now      func() time.Time
	agentURL string
	caPEM    []byte
	timeouts map[string]time.Duration
	scan     time.Duration
	logCap   int
	direct   bool
	// instances remembers host ID → instance ID (see instanceOf).
	instances sync.Map
	secrets   *seal.Key
	// served are the EFI binaries of the artifacts directory, which
	// measured boots are checked against.
	served *servedArtifacts
	// keys are the attestation keys pinned to hosts; nonces makes and
	// checks the nonces nodes' TPMs quote over.
	keys   attestationKeys
	nonces nonces
	// ekRoots check EK certificates; nil: trust on first use.
	ekRoots *tpmquote.EKRoots
}

// attestationKeys is the store's part the quote checks and the pinned
// keys' API use.
type attestationKeys interface {
	UseAttestationKey(ctx context.Context, k *eim.AttestationKey) (*eim.AttestationKey, error)
	AttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error)
	ResetAttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error)
}

// Service is the provisioning service; its ReportIn is served by the host
// module's HostService (hostmgr), which calls it.
var _ provisioningv1connect.ProvisioningServiceHandler = (*Service)(nil)

// Defaults.
const (
	defaultScan   = 30 * time.Second
	defaultLogCap = 1 << 20
	// maxOutput is the most output one report may carry.
	maxOutput = 64 << 10
	// waitPoll is how long a node without an instance waits before asking
	// again; failedPoll is that of a node whose workflow failed.
	waitPoll   = 10
	failedPoll = 60
	// heartbeatInterval is the node-mode report interval the server sets.
	heartbeatInterval = 10
)

// New returns a Service.
func New(opts Options) *Service {
	s := &Service{
		metrics:  opts.Metrics,
		store:    opts.Store,
		batch:    opts.Batcher,
		log:      opts.Logger,
		now:      opts.Now,
		agentURL: opts.AgentURL,
		caPEM:    opts.CACertPEM,
		timeouts: opts.ActionTimeouts,
		scan:     opts.ScanInterval,
		logCap:   opts.LogCap,
		secrets:  opts.SecretsKey,
		ekRoots:  opts.EKRoots,
		// A store that takes concurrent writers (PostgreSQL): calls that
		// may write go straight to the batcher, which reads what they
		// need anyway, instead of looking in a read-only transaction
		// first: that look keeps unchanged answers away from SQLite's
		// single writer, and with concurrent writers only doubles the
		// reads.
		direct: opts.Store.Capabilities().ConcurrentWriters,
	}
	s.served = &servedArtifacts{dir: opts.ArtifactsDir}
	s.keys = opts.Store
	if s.batch == nil {
		s.batch = storeBatcher{opts.Store}
	}
	s.reports = opts.Store.NodeReports(s.batch)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.served.log = s.log
	if s.now == nil {
		s.now = time.Now
	}
	s.nonces = newNonces(s.secrets, s.now)
	if s.scan <= 0 {
		s.scan = defaultScan
	}
	if s.logCap <= 0 {
		s.logCap = defaultLogCap
	}
	return s
}

// storeBatcher is the unbatched fallback: one transaction per call.
type storeBatcher struct{ st eim.Store }

func (b storeBatcher) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return b.st.Update(ctx, project, fn)
}

// caller returns the node of a southbound call (set by the southbound
// interceptor), or an Unauthenticated error.
func (s *Service) caller(ctx context.Context) (southbound.Node, error) {
	return southbound.Caller(ctx)
}

// rpcError translates an error of this package or the store into a Connect
// error once, at the edge; internal details are logged, not sent.
func (s *Service) rpcError(ctx context.Context, op string, err error) error {
	return southbound.Error(ctx, s.log, "provisioning: "+op, err)
}
