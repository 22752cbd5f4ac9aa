package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"slices"
	"time"

	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/pki"
)

// A listener is a port a process may serve: its name, its address from
// the config, and how its handler is made of what the modules mount on it.
// A process opens those whose address is set (and that it wants) before
// it builds its modules, so that their bound addresses are known to them
// (the agent URL nodes are given, the connect module's peer URL); it makes
// their handlers once the modules are built.
type listener struct {
	name string
	addr func(c *Config) string
	// want, when set, says whether a process of these modules opens it
	// (on any port when addr is ""); by default it is opened when addr is
	// set.
	want func(modules []*Module) bool
	// bound, when set, runs once it listens, before the modules are built.
	bound func(p *Process, ln net.Listener) error
	// server makes its server of the modules' mounts (Process.mounts).
	server func(p *Process) (*http.Server, error)
	// announce says where it serves (stdout or the log).
	announce func(p *Process, addr net.Addr)
	// abrupt: closed at once when the process stops, where the others
	// have shutdownGrace to finish their requests (a profile of the debug
	// listener may take 30 s).
	abrupt bool
}

// listeners are the ports of a process, in the order they are opened
// and announced. Modules mount routes on "http" (Parts.Routes) and
// "agent" (Parts.Agent, Parts.AgentStreams), and may replace the handler
// of /metrics (Parts.Metrics), served on "metrics" when it is open and on
// "http" otherwise.
func listeners() []listener {
	return []listener{
		{name: "http", addr: func(c *Config) string { return c.HTTPAddr },
			want: func([]*Module) bool { return true }, // every process: health
			bound: func(p *Process, ln net.Listener) error {
				p.b.httpAddr = ln.Addr().String()
				return nil
			},
			server: httpServer, announce: func(p *Process, addr net.Addr) {
				if p.b.Selected("api") {
					fmt.Fprintf(p.stdout, "eim: serving API on http://%s\n", addr)
				} else {
					fmt.Fprintf(p.stdout, "eim: serving HTTP on http://%s (health%s)\n", addr, map[bool]string{true: ", /boot/"}[p.b.Selected("provisioning")])
				}
			}},
		{name: "agent", addr: func(c *Config) string { return c.AgentAddr },
			want:  func(ms []*Module) bool { return slices.ContainsFunc(ms, func(m *Module) bool { return m.Agent }) },
			bound: agentBound, server: agentServer,
			announce: func(p *Process, addr net.Addr) {
				fmt.Fprintf(p.stdout, "eim: serving agents on https://%s (CA fingerprint sha256:%s)\n", addr, p.b.ca.Fingerprint())
			}},
		{name: "metrics", addr: func(c *Config) string { return c.MetricsAddr },
			server: func(p *Process) (*http.Server, error) {
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", p.metrics)
				return &http.Server{
					Handler:           metrics.NewHTTP(p.b.Metrics, "metrics").Wrap(mux),
					ReadHeaderTimeout: 10 * time.Second,
					WriteTimeout:      60 * time.Second,
					IdleTimeout:       2 * time.Minute,
					MaxHeaderBytes:    64 << 10,
					ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
				}, nil
			},
			announce: func(p *Process, addr net.Addr) {
				fmt.Fprintf(p.stdout, "eim: serving metrics on http://%s/metrics\n", addr)
			}},
		// The runtime profiles of net/http/pprof, on a mux of their own, so
		// that they are only reachable on --debug-addr.
		{name: "debug", addr: func(c *Config) string { return c.DebugAddr }, abrupt: true,
			server: func(p *Process) (*http.Server, error) {
				mux := http.NewServeMux()
				mux.HandleFunc("/debug/pprof/", pprof.Index)
				mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
				mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
				mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
				mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
				return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, nil
			},
			announce: func(p *Process, addr net.Addr) { p.log.Info("serving profiles", "addr", addr.String()) }},
	}
}

// httpServer serves the modules' routes, /healthz and /readyz, and
// /metrics when it has no listener of its own; a process without the api
// module answers the API's other paths 404, saying so.
func httpServer(p *Process) (*http.Server, error) {
	mux := http.NewServeMux()
	for _, m := range p.mounts["http"] {
		mux.Handle(m.Pattern, actAs(m.module, m.Handler))
	}
	mux.HandleFunc("GET /healthz", p.health.healthz)
	mux.HandleFunc("GET /readyz", p.health.readyz)
	if p.Addr("metrics") == nil {
		mux.Handle("GET /metrics", p.metrics)
	}
	if !slices.ContainsFunc(p.mounts["http"], func(m mount) bool { return m.Pattern == "/" }) {
		mux.Handle("/", notServed(moduleNames(p.cfg.Modules)))
	}
	return &http.Server{
		Handler:           metrics.NewHTTP(p.b.Metrics, "http").Wrap(mux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
	}, nil
}

// agentBound makes what the agent side needs once its address is known:
// the agent URL (port 0: the bound port) that the boot script and the
// provisioned nodes are given, the listener's certificate, and the keys
// that sign what nodes boot.
func agentBound(p *Process, ln net.Listener) error {
	b, cfg, log := p.b, &p.cfg, p.log
	b.agentURL = cfg.AgentURL
	if b.agentURL == "" {
		b.agentURL = defaultAgentURL(ln.Addr())
	}
	var err error
	b.ca, err = pki.Load(cfg.DataDir, pki.Options{
		CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSCA,
		Hosts: certHosts(cfg.AgentAddr, b.agentURL),
	})
	if err != nil {
		return fmt.Errorf("agent listener certificates: %w", err)
	}
	if b.ca.Generated() {
		log.Info("created the agent CA", "file", filepath.Join(cfg.DataDir, pki.CACertFile), "fingerprint", b.ca.Fingerprint())
	} else if b.ca.Renewed() {
		log.Info("issued a new agent listener certificate", "dns", b.ca.ServerCert().DNSNames, "ips", b.ca.ServerCert().IPAddresses)
	}
	// The key that signs the micro-OS's manifest (eim microos build);
	// made here so that a fresh server has it.
	if _, err := pki.LoadArtifactKey(cfg.DataDir); err != nil {
		return fmt.Errorf("artifact-signing key: %w", err)
	}
	// The Secure Boot db key that signs the EFI executables (eim microos
	// build): made here too; the server keeps only its certificate, to
	// check what it serves.
	sb, err := pki.LoadSecureBootKey(cfg.DataDir)
	if err != nil {
		return err
	}
	if sb.Generated {
		log.Info("created the Secure Boot db key", "certificate", filepath.Join(cfg.DataDir, pki.SecureBootCertFile))
	}
	b.sbCert = sb.Cert
	return nil
}

// agentServer serves the nodes over TLS: the southbound server (node
// authentication, tokens) with the modules' services mounted on it.
func agentServer(p *Process) (*http.Server, error) {
	sb, err := Use(p.b, southboundServer)
	if err != nil {
		return nil, err
	}
	for _, m := range p.mounts["agent"] {
		if m.stream {
			sb.MountStream(m.Pattern, actAs(m.module, m.Handler))
		} else {
			sb.Mount(m.Pattern, actAs(m.module, m.Handler))
		}
	}
	return &http.Server{
		Handler:           metrics.NewHTTP(p.b.Metrics, "agent").Wrap(sb),
		TLSConfig:         p.b.ca.ServerTLS(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelInfo), // TLS handshake failures: nodes with a wrong CA, scanners
	}, nil
}
