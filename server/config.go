package server

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/eimhq/eim/auth"
)

// Config is what `eim server` was told (cmd/eim parses and checks the
// flags).
type Config struct {
	DataDir    string
	HTTPAddr   string
	Database   string // "" for the SQLite file in DataDir
	DBConns    int
	JWKSURL    string
	OIDCIssuer string
	Audience   string
	// UIOIDCClientID, with OIDCIssuer, lets the web UI sign users in
	// through the issuer (its public client's ID).
	UIOIDCClientID string
	RateLimit      float64
	DebugAddr      string
	// MetricsAddr, when set, moves /metrics (the process's own series,
	// and the exporter module's when it runs here) from the HTTP listener
	// to a listener of its own on this address.
	MetricsAddr string
	// SigningKey is the token-signing key's file when the operator gives
	// one (every replica mounts the same); "" for DataDir/signing.key,
	// created on first start.
	SigningKey string

	// Registry is the modules this release has; nil: Builtin().
	Registry *Registry
	// Modules are the modules this process runs (Registry.Select); nil:
	// every one.
	Modules []*Module
	// ReplicaID names this process among the deployment's (leases,
	// membership); "" picks hostname-pid-random.
	ReplicaID string
	// LeaseTTL is how long a lease (run-once work, a share of the
	// fleet's liveness) and a membership last without renewal: a process
	// that dies hands its work on within about that (default 10 s).
	LeaseTTL time.Duration

	// Southbound (agents).
	AgentAddr     string
	AgentURL      string
	TLSCert       string
	TLSKey        string
	TLSCA         string
	BootArtifacts string // "" for DataDir/boot
	// RequireSecureBoot refuses to serve an EFI executable of the boot
	// artifacts (iPXE, the micro-OS kernel) not signed with the
	// deployment's Secure Boot db key (docs/security.md).
	RequireSecureBoot bool
	// TPMEKCAFiles and TPMEKCADirs are the TPM makers' CA certificates
	// (PEM bundles or DER files; directories of them) that nodes' EK
	// certificates must chain to before their TPM keys are pinned; none:
	// trust on first use (docs/security.md).
	TPMEKCAFiles []string
	TPMEKCADirs  []string
	// ActionTimeouts override the provisioning actions' default timeouts.
	ActionTimeouts map[string]time.Duration
	// The host module's defaults (projects may set their own heartbeat
	// interval and timeout).
	HeartbeatInterval, HeartbeatTimeout, RebootTimeout time.Duration
	UpdateTimeout                                      time.Duration
	// The OS catalog: a directory of the operator's manifests, and how
	// often they are read again (0: only at start).
	OSProfiles       string
	OSCatalogRefresh time.Duration
	FetchPackages    bool
	// TokenLeeway is how long past their expiry tokens are accepted.
	TokenLeeway time.Duration
	// NodeTokenRate is how many node token requests a second the agent
	// listener serves (0: southbound.DefaultTokenRate; negative: no
	// bound); the others are told when to retry.
	NodeTokenRate float64
	// ExporterPerHost: the exporter module serves the per-host series
	// (edge_host_*) of the projects that do not turn them off.
	ExporterPerHost bool
	// The connect module: the URL the other replicas reach this one's
	// HTTP listener at ("" for http://<http-addr>), the tunnels' pings,
	// and the lifetime of the connect tokens it issues.
	ConnectPeerURL                          string
	ConnectPingInterval, ConnectPingTimeout time.Duration
	ConnectTokenTTL                         time.Duration
	// ClusterArtifacts is the clusters module's artifact store (k3s
	// binaries and air-gap images served to nodes); "" none.
	ClusterArtifacts string
	// SecretsKey is the file of the key that seals secrets at rest (a
	// cluster's join and connect tokens): 64 hex digits, the operator's
	// (every replica mounts the same); "" for DataDir/secrets.key,
	// created on first start.
	SecretsKey string
	// AuditRetention is how long audit records are kept (default 90
	// days).
	AuditRetention time.Duration
	// WebhookAllowPrivate lets webhook URLs point at link-local and cloud
	// metadata addresses; WebhookTimeout bounds one delivery attempt
	// (default 10 s).
	WebhookAllowPrivate bool
	WebhookTimeout      time.Duration

	// The oob module's power jobs and polls (zero: its defaults, see
	// oob.Options): OOBWorkers jobs at once per process, every BMC read
	// every OOBPollEvery by up to OOBPollWorkers reads at once, at most OOBSiteLimit power-ons per site per
	// OOBSiteWindow (10 s)
	// (negative: no limit), OOBConfirmTimeout for a sent action to show
	// before it is sent again, OOBJobTimeout for a job to end, OOBLease
	// for a worker's hold on a job, OOBIPMITool the ipmitool binary.
	OOBWorkers        int
	OOBPollWorkers    int
	OOBPollEvery      time.Duration
	OOBSiteLimit      int
	OOBSiteWindow     time.Duration
	OOBConfirmTimeout time.Duration
	OOBJobTimeout     time.Duration
	OOBLease          time.Duration
	// OOBGracefulTimeout: how long a graceful shutdown has before the
	// machine is forced off.
	OOBGracefulTimeout time.Duration
	OOBIPMITool        string
	// OOBHTTPBootURL: the URL network-boot jobs give UEFI BMCs that list
	// HTTP boot (empty: PXE); OOBCallHomeTimeout: how long they wait for
	// the node to call home.
	OOBHTTPBootURL     string
	OOBCallHomeTimeout time.Duration
	// OOBVirtualMediaURL: the URL of the micro-OS CD image that
	// virtual-media jobs have BMCs insert (empty: such jobs are refused).
	OOBVirtualMediaURL string

	// WorkloadsRolloutTick is how often the workloads module's targets
	// loop steps the projects with a rollout in progress (zero: its
	// default, 10 s; see workloads.Options.RolloutTick).
	WorkloadsRolloutTick time.Duration
	// WorkloadsStatusGrace is how long a device has to report the status
	// of a new version before heartbeats ask it for its full status
	// (workloads.Options.StatusGrace; 0: its default).
	WorkloadsStatusGrace time.Duration

	Logger *slog.Logger
	// Stdout gets the lines that announce the listeners.
	Stdout io.Writer
}

// withDefaults fills in what was left unset.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Registry == nil {
		c.Registry = Builtin()
	}
	if c.Modules == nil {
		c.Modules = c.Registry.Modules()
	}
	if c.BootArtifacts == "" {
		c.BootArtifacts = filepath.Join(c.DataDir, "boot")
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.ReplicaID == "" {
		c.ReplicaID = defaultReplicaID()
	}
	return c
}

// AdminTokenFile is the admin token's file in the data directory.
const AdminTokenFile = "admin.token"

func (c *Config) dsn() string { return DatabaseDSN(c.DataDir, c.Database) }

// DatabaseDSN is --database, or the SQLite file in the data directory.
func DatabaseDSN(dataDir, database string) string {
	if database != "" {
		return database
	}
	return filepath.Join(dataDir, "eim.db")
}

// IsPostgres reports whether dsn names a PostgreSQL database.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// RedactDSN hides a password in a PostgreSQL URL for logs.
func RedactDSN(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	scheme, rest, _ := strings.Cut(dsn, "://")
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return dsn
	}
	if user, _, hasPw := strings.Cut(userinfo, ":"); hasPw {
		return scheme + "://" + user + ":***@" + host
	}
	return dsn
}

// CheckAgentURL accepts an absolute https URL without query or fragment.
func CheckAgentURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("--agent-url %q: want an https://host[:port][/path] URL", s)
	}
	return nil
}

// defaultAgentURL is https://ADDR of the bound agent listener, with the
// machine's name in place of an unspecified address (0.0.0.0, ::), which
// nodes cannot dial.
func defaultAgentURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "https://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "https://" + net.JoinHostPort(host, port)
}

// certHosts are the names the generated agent certificate must carry: the
// listen host and the agent URL's host (the machine's name and loopback are
// added by pki).
func certHosts(agentAddr, agentURL string) []string {
	var hosts []string
	if h, _, err := net.SplitHostPort(agentAddr); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if u, err := url.Parse(agentURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// buildVersion is the version of the main module the binary was built
// from ("(devel)" for a build from a work tree).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

// leewayOption turns --token-leeway into the auth and southbound option,
// where 0 selects the default and a negative value none.
func leewayOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// LoadIssuer reads the token-signing key from keyFile when one is given
// (never writing it), else from the data directory, creating it there.
func LoadIssuer(dataDir, keyFile string) (*auth.Issuer, error) {
	if keyFile != "" {
		return auth.LoadIssuerFile(keyFile)
	}
	return auth.LoadIssuer(dataDir)
}
