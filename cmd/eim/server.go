package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/oscatalog"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/server"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
)

func (c *cli) server(args []string) error {
	fs := c.flagSet("eim server", "eim server [flags]",
		"Runs EIM's modules (all of them by default; --modules or --profile choose, --list-modules\n"+
			"lists them): the inventory, the northbound REST API (with the network boot under /boot/) and the\n"+
			"southbound HTTPS API the nodes' agents call. On first start it creates the project\n"+
			"\"default\", writes an admin token (role eim-admin, valid one year) to <data-dir>/admin.token\n"+
			"and creates a CA for the agent listener (<data-dir>/ca.crt). Several processes (replicas of\n"+
			"any module) may run on one PostgreSQL database.")
	var cfg server.Config
	var modules, profile string
	var listModules bool
	fs.StringVar(&cfg.DataDir, "data-dir", defaultDataDir, "directory for the SQLite database, the signing key and the admin token")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the REST API (port 0 picks a free port)")
	fs.StringVar(&cfg.Database, "database", c.getenv("EIM_DATABASE"), "postgres://… for PostgreSQL, or a SQLite file (default <data-dir>/eim.db; env EIM_DATABASE)")
	fs.IntVar(&cfg.DBConns, "database-max-conns", sqlstore.DefaultMaxConns, "PostgreSQL: the most connections this process opens (plus one listening for changes); every process of a deployment opens its own, within the server's max_connections")
	fs.StringVar(&cfg.SigningKey, "signing-key", "", "the token-signing key (Ed25519, PEM PKCS #8) to use as it is, e.g. a Secret every replica mounts; not readable by others (default: <data-dir>/signing.key, created on first start)")
	fs.StringVar(&cfg.JWKSURL, "jwks-url", "", "JWKS URL of an external OIDC issuer whose tokens are accepted too (default: discovered from --oidc-issuer)")
	fs.StringVar(&cfg.OIDCIssuer, "oidc-issuer", "", "issuer (iss) of external tokens, e.g. https://keycloak.example.com/realms/master")
	fs.StringVar(&cfg.Audience, "oidc-audience", "", "if set, external tokens must carry this audience (aud)")
	fs.StringVar(&cfg.UIOIDCClientID, "ui-oidc-client-id", "", "the web UI's public client at --oidc-issuer: users sign in there (authorization code with PKCE; redirect URI <this server>/ui/oidc/callback) besides pasting a token")
	var logLevel string
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 200, "requests per second per client IP (0 = off)")
	fs.StringVar(&cfg.DebugAddr, "debug-addr", "", "if set, serve Go profiles (/debug/pprof/) on this address; keep it on loopback")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "if set, serve /metrics (the process's own metrics, and the exporter module's fleet series) on this address instead of the HTTP listener (--http-addr)")
	fs.StringVar(&cfg.AgentAddr, "agent-addr", "127.0.0.1:8443", "address of the southbound HTTPS API for agents (port 0 picks a free port)")
	fs.StringVar(&cfg.AgentURL, "agent-url", "", "URL nodes use to reach the agent listener (default https://<agent-addr>)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "server certificate (PEM chain) of the agent listener instead of the generated one; needs --tls-key")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "root CA of --tls-cert that nodes pin (default: the last certificate of --tls-cert)")
	fs.StringVar(&cfg.BootArtifacts, "boot-artifacts", "", "directory of the micro-OS kernel and initramfs served under /boot/artifacts/ (default <data-dir>/boot)")
	fs.BoolVar(&cfg.RequireSecureBoot, "require-secure-boot", false, "serve an EFI executable of the boot artifacts (iPXE, the micro-OS kernel) only when it is signed with the deployment's Secure Boot db key (<data-dir>/secureboot-db.crt; docs/security.md)")
	fs.Func("tpm-ek-ca-file", "a TPM maker's CA certificates (PEM bundle, or one DER certificate) that nodes' EK certificates must chain to before their TPM keys are pinned (repeatable; without it and --tpm-ek-ca-dir a host's keys are trusted on first use; docs/security.md)", func(v string) error {
		cfg.TPMEKCAFiles = append(cfg.TPMEKCAFiles, v)
		return nil
	})
	fs.Func("tpm-ek-ca-dir", "a directory of TPM makers' CA certificates (*.pem, *.crt, *.cer, *.der), as --tpm-ek-ca-file (repeatable)", func(v string) error {
		cfg.TPMEKCADirs = append(cfg.TPMEKCADirs, v)
		return nil
	})
	fs.Func("action-timeout", "NAME=DURATION: the timeout of a provisioning action, by name or type (repeatable; e.g. stream-image=4h; defaults: stream-image 9800s, others 560s)", func(v string) error {
		name, d, err := provisioning.ParseActionTimeout(v)
		if err != nil {
			return err
		}
		if cfg.ActionTimeouts == nil {
			cfg.ActionTimeouts = map[string]time.Duration{}
		}
		cfg.ActionTimeouts[name] = d
		return nil
	})
	fs.Float64Var(&cfg.NodeTokenRate, "node-token-rate", southbound.DefaultTokenRate,
		"node token requests a second the agent listener serves; the others (a fleet back after a restart) are answered 503 with a Retry-After that spreads them (0: no bound)")
	fs.DurationVar(&cfg.TokenLeeway, "token-leeway", auth.DefaultLeeway, "how long past its expiry a token (API or node) is still accepted, for clocks out of step (0: not at all)")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", eim.DefaultHeartbeatInterval*time.Second, "how often nodes send heartbeats, in projects that do not set their own")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 0, "silence after which a host is \"No Connection\", in projects that do not set their own (default 3 heartbeat intervals)")
	fs.DurationVar(&cfg.RebootTimeout, "reboot-timeout", 15*time.Minute, "how long a rebooting host may take to call again before it is \"No Connection\"")
	fs.StringVar(&cfg.OSProfiles, "os-profiles", "", "directory of OS profile manifests (*.yaml) loaded into every project with the shipped ones; one with a shipped profile's profileName and osImageVersion replaces it")
	fs.DurationVar(&cfg.OSCatalogRefresh, "os-catalog-refresh", oscatalog.DefaultRefresh, "how often the OS profile manifests are read again and every project brought in line (0: only at start)")
	fs.BoolVar(&cfg.FetchPackages, "os-package-lists", false, "download each OS profile's package list (osPackageManifestURL) into its installedPackages, at every catalog read (off: only lists inline in the manifests)")
	fs.BoolVar(&cfg.ExporterPerHost, "exporter-per-host", true, "the exporter module serves the original's per-host series (edge_host_*, ~27 a host) besides its aggregates; false for large fleets (a project can turn them off for itself: eim project set --exporter-per-host=false)")
	fs.DurationVar(&cfg.UpdateTimeout, "update-timeout", 2*time.Hour, "how long after its last update report a node updating its OS may stay silent before it is \"No Connection\"")
	fs.StringVar(&cfg.ConnectPeerURL, "connect-peer-url", "", "connect: the URL the other replicas forward a cluster's requests to when this replica holds its tunnel (default http://<http-addr>; set it when that address is not reachable from them, e.g. http://$(POD_IP):8080)")
	fs.DurationVar(&cfg.ConnectPingInterval, "connect-ping-interval", 10*time.Second, "connect: how often each tunnel is pinged (its round-trip time recorded)")
	fs.DurationVar(&cfg.ConnectPingTimeout, "connect-ping-timeout", 10*time.Second, "connect: a tunnel whose ping is not answered within this is closed (a dead tunnel is found within interval + timeout)")
	fs.StringVar(&cfg.ClusterArtifacts, "cluster-artifacts", "", "clusters: directory of the artifact store served to cluster nodes (k3s/<version>/k3s and air-gap images; see docs/clusters.md)")
	fs.StringVar(&cfg.SecretsKey, "secrets-key", "", "the key (64 hex digits) that seals secrets in the database (clusters' join and connect tokens, webhooks' secrets), e.g. a Secret every replica mounts; not readable by others (default: <data-dir>/secrets.key, created on first start)")
	fs.DurationVar(&cfg.ConnectTokenTTL, "connect-token-ttl", 30*24*time.Hour, "connect: lifetime of the connect tokens issued (agents rotate theirs when a third is left)")
	cfg.AuditRetention = inventory.DefaultAuditRetention
	fs.Func("audit-retention", "how long audit records are kept, e.g. 90d or 720h (default 90d)", func(v string) error {
		d, err := parseSpan(v)
		if err != nil {
			return err
		}
		if d < time.Hour {
			return fmt.Errorf("must be at least 1h")
		}
		cfg.AuditRetention = d
		return nil
	})
	fs.BoolVar(&cfg.WebhookAllowPrivate, "webhook-allow-private", false, "webhook URLs may point at link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal …); loopback and private networks are allowed anyway")
	fs.DurationVar(&cfg.WebhookTimeout, "webhook-timeout", 10*time.Second, "how long one webhook delivery attempt may take before it counts as failed (and is retried)")
	fs.IntVar(&cfg.OOBWorkers, "oob-workers", 4, "oob: power jobs carried out at once by this process (and the fewest BMCs polled at once)")
	fs.IntVar(&cfg.OOBPollWorkers, "oob-poll-workers", 256, "oob: the most BMCs polled at once (the poll runs as many as finish a round within 3/4 of --oob-poll-every)")
	fs.DurationVar(&cfg.OOBPollEvery, "oob-poll-every", time.Minute, "oob: how often every BMC's power state is read")
	fs.IntVar(&cfg.OOBSiteLimit, "oob-site-limit", 20, "oob: at most this many power-ons per site per --oob-site-window, across the deployment (negative: no limit)")
	fs.DurationVar(&cfg.OOBSiteWindow, "oob-site-window", 10*time.Second, "oob: the window of --oob-site-limit")
	fs.DurationVar(&cfg.OOBConfirmTimeout, "oob-confirm-timeout", time.Minute, "oob: how long a sent power action has to show in the BMC's state before it is sent again")
	fs.DurationVar(&cfg.OOBJobTimeout, "oob-job-timeout", 10*time.Minute, "oob: a power job's deadline from its creation (it then ends FAILED)")
	fs.DurationVar(&cfg.OOBLease, "oob-lease", 30*time.Second, "oob: how long a process holds a power job without renewing it (another takes it over after)")
	fs.DurationVar(&cfg.OOBGracefulTimeout, "oob-graceful-timeout", time.Minute, "oob: how long a graceful shutdown through the BMC has before the machine is forced off")
	fs.StringVar(&cfg.OOBHTTPBootURL, "oob-http-boot-url", "", "oob: the URL a network-boot job gives a UEFI BMC that lists HTTP boot (UEFI HTTP boot of EIM's iPXE); empty: PXE always")
	fs.StringVar(&cfg.OOBVirtualMediaURL, "oob-virtual-media-url", "", "oob: the http(s) URL of EIM's micro-OS CD image that a virtual-media job (boot VIRTUAL_MEDIA) has the BMC insert, as the BMC reaches this server, e.g. http://eim.example.com:8080/boot/artifacts/eim-microos.iso; empty: such jobs are refused")
	fs.DurationVar(&cfg.OOBCallHomeTimeout, "oob-call-home-timeout", 10*time.Minute, "oob: how long a network-boot job waits for the node to call home after powering it on or resetting it")
	fs.StringVar(&cfg.OOBIPMITool, "oob-ipmitool", "ipmitool", "oob: the ipmitool binary the IPMI driver runs")
	fs.DurationVar(&cfg.WorkloadsRolloutTick, "workloads-rollout-tick", 10*time.Second, "workloads: how often the projects with an edge workload rollout in progress are stepped (devices' status reports and timeouts move rollouts, and are no change events)")
	fs.DurationVar(&cfg.WorkloadsStatusGrace, "workloads-status-grace", 2*time.Minute, "workloads: how long a device has to report the status of a new version before heartbeat answers ask it for its full status")
	fs.StringVar(&modules, "modules", "", "comma-separated modules this process runs (default: every module; see --list-modules)")
	fs.StringVar(&profile, "profile", "", "run the modules of a deployment profile: full, provisioning, observability, day2, clusters, devices or oob (see --list-modules)")
	fs.BoolVar(&listModules, "list-modules", false, "print the modules, what each needs and the profiles that hold it, and exit")
	fs.StringVar(&cfg.ReplicaID, "replica-id", "", "this process's name among the deployment's processes, in leases and logs (default hostname-pid-random)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 10*time.Second, "how long leases on run-once work and on shares of the fleet's liveness last unrenewed: a process that dies hands its work on within about that")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("server", pos, 0, "no arguments"); err != nil {
		return err
	}
	if listModules {
		return printModules(c.stdout)
	}
	if cfg.Modules, err = server.Select(modules, profile); err != nil {
		return usagef("%v", err)
	}
	if cfg.LeaseTTL < time.Second || cfg.LeaseTTL > 5*time.Minute {
		return usagef("--lease-ttl: must be 1s..5m, got %s", cfg.LeaseTTL)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", logLevel)
	}
	if cfg.UIOIDCClientID != "" && cfg.OIDCIssuer == "" {
		return usagef("--ui-oidc-client-id: needs --oidc-issuer (the issuer the UI sends users to)")
	}
	if cfg.HeartbeatInterval < time.Second || cfg.HeartbeatInterval > eim.MaxHeartbeatInterval*time.Second {
		return usagef("--heartbeat-interval: must be 1s..%ds, got %s", eim.MaxHeartbeatInterval, cfg.HeartbeatInterval)
	}
	if cfg.HeartbeatTimeout != 0 && cfg.HeartbeatTimeout < 2*cfg.HeartbeatInterval {
		return usagef("--heartbeat-timeout: must be at least two heartbeat intervals (%s), got %s", 2*cfg.HeartbeatInterval, cfg.HeartbeatTimeout)
	}
	if cfg.NodeTokenRate < 0 {
		return usagef("--node-token-rate: must be 0 (no bound) or more, got %v", cfg.NodeTokenRate)
	}
	if cfg.NodeTokenRate == 0 {
		cfg.NodeTokenRate = -1 // no bound (the zero value of the config is the default)
	}
	if cfg.TokenLeeway < 0 || cfg.TokenLeeway > 5*time.Minute {
		return usagef("--token-leeway: must be 0s..5m, got %s", cfg.TokenLeeway)
	}
	if cfg.UpdateTimeout < time.Minute {
		return usagef("--update-timeout: must be at least 1m, got %s", cfg.UpdateTimeout)
	}
	if cfg.OSCatalogRefresh < 0 || (cfg.OSCatalogRefresh > 0 && cfg.OSCatalogRefresh < time.Minute) {
		return usagef("--os-catalog-refresh: must be 0 (only at start) or at least 1m, got %s", cfg.OSCatalogRefresh)
	}
	if cfg.OOBWorkers < 1 || cfg.OOBWorkers > 256 {
		return usagef("--oob-workers: must be 1..256, got %d", cfg.OOBWorkers)
	}
	if cfg.OOBPollWorkers < cfg.OOBWorkers || cfg.OOBPollWorkers > 4096 {
		return usagef("--oob-poll-workers: must be --oob-workers (%d) to 4096, got %d", cfg.OOBWorkers, cfg.OOBPollWorkers)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--oob-poll-every", cfg.OOBPollEvery}, {"--oob-confirm-timeout", cfg.OOBConfirmTimeout}, {"--oob-job-timeout", cfg.OOBJobTimeout}, {"--oob-lease", cfg.OOBLease}, {"--oob-graceful-timeout", cfg.OOBGracefulTimeout}, {"--oob-call-home-timeout", cfg.OOBCallHomeTimeout}, {"--oob-site-window", cfg.OOBSiteWindow}} {
		if d.v < time.Second {
			return usagef("%s: must be at least 1s, got %s", d.name, d.v)
		}
	}
	for _, f := range []struct{ name, u string }{{"--oob-http-boot-url", cfg.OOBHTTPBootURL}, {"--oob-virtual-media-url", cfg.OOBVirtualMediaURL}} {
		if f.u == "" {
			continue
		}
		if p, err := url.Parse(f.u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return usagef("%s: want an http or https URL, got %q", f.name, f.u)
		}
	}
	if cfg.WorkloadsRolloutTick < 100*time.Millisecond || cfg.WorkloadsRolloutTick > 10*time.Minute {
		return usagef("--workloads-rollout-tick: must be 100ms..10m, got %s", cfg.WorkloadsRolloutTick)
	}
	if cfg.WorkloadsStatusGrace < 400*time.Millisecond || cfg.WorkloadsStatusGrace > time.Hour {
		return usagef("--workloads-status-grace: must be 400ms..1h, got %s", cfg.WorkloadsStatusGrace)
	}
	if cfg.OOBSiteLimit == 0 {
		return usagef("--oob-site-limit: must not be 0 (negative: no limit)")
	}
	if cfg.RebootTimeout < time.Minute {
		return usagef("--reboot-timeout: must be at least 1m, got %s", cfg.RebootTimeout)
	}
	if cfg.WebhookTimeout < 100*time.Millisecond || cfg.WebhookTimeout > 5*time.Minute {
		return usagef("--webhook-timeout: must be 100ms..5m, got %s", cfg.WebhookTimeout)
	}
	if cfg.RateLimit < 0 {
		return usagef("--rate-limit: must not be negative")
	}
	if cfg.DBConns < 2 {
		return usagef("--database-max-conns: must be at least 2, got %d", cfg.DBConns)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if cfg.TLSCA != "" && cfg.TLSCert == "" {
		return usagef("--tls-ca needs --tls-cert and --tls-key")
	}
	if cfg.AgentURL != "" {
		if err := server.CheckAgentURL(cfg.AgentURL); err != nil {
			return usagef("%v", err)
		}
	}
	if cfg.ConnectPeerURL != "" {
		cfg.ConnectPeerURL = bracketIPv6(cfg.ConnectPeerURL)
		if u, err := url.Parse(cfg.ConnectPeerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" {
			return usagef("--connect-peer-url %q: want http://HOST:PORT (this replica's HTTP listener as the others reach it)", cfg.ConnectPeerURL)
		}
		cfg.ConnectPeerURL = strings.TrimSuffix(cfg.ConnectPeerURL, "/")
	}
	if cfg.ConnectPingInterval < 100*time.Millisecond || cfg.ConnectPingTimeout < 100*time.Millisecond {
		return usagef("--connect-ping-interval and --connect-ping-timeout: at least 100ms")
	}
	if cfg.ConnectTokenTTL < time.Minute {
		return usagef("--connect-token-ttl: at least 1m, got %v", cfg.ConnectTokenTTL)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
	cfg.Stdout = c.stdout
	setMemoryLimit(cfg.Logger)
	return server.Run(c.ctx, cfg)
}

// printModules prints --list-modules: each module, what it does, what it
// needs and the profiles that hold it; then the profiles.
func printModules(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tLISTENERS\tPROFILES\tWHAT IT DOES")
	for _, m := range server.Modules() {
		listen := "http"
		if m.Agent {
			listen = "http, agent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, listen, strings.Join(server.ProfilesOf(m.Name), ","), m.Summary)
		for _, n := range m.Needs {
			fmt.Fprintf(tw, "\t\t\t  needs %s: %s\n", n.Module, n.Why)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPROFILES (--profile NAME; or --modules a,b,c)")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range server.Profiles {
		mods := "every module"
		if p.Modules != nil {
			mods = strings.Join(p.Modules, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, mods, p.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEvery process serves /healthz and /readyz on --http-addr; one with a module that serves\nnodes opens the agent listener (--agent-addr). Replicas of any module need PostgreSQL.")
	return nil
}

// bracketIPv6 puts the IPv6 address of SCHEME://ADDRESS:PORT in brackets:
// the Helm chart's http://$(POD_IP):8080 is http://fd00::1:8080 on an IPv6
// pod network. Anything else is returned as it is.
func bracketIPv6(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	rest = strings.TrimSuffix(rest, "/")
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return s
	}
	if ip := net.ParseIP(rest[:i]); ip != nil && ip.To4() == nil {
		return scheme + "://[" + rest[:i] + "]" + rest[i:]
	}
	return s
}
