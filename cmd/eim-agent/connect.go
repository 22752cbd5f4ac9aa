package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/connect/wire"
)

// runConnect is the connect tunnel's agent on an edge cluster's
// control-plane node: it holds a tunnel to the gateway and proxies the
// gateway's requests to the cluster's API (--upstream), and nowhere else.
// Secrets come from files only, never from the command line.
func runConnect(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("connect", stderr)
	server := fs.String("server", "", "the EIM agent listener, https://HOST:PORT (required)")
	ca := fs.String("ca", "/etc/eim/ca.crt", "the CA to pin: a PEM file, or sha256:<hex> (its fingerprint)")
	cluster := fs.String("cluster", "", "the cluster, as PROJECT/CLUSTER; the gateway checks it against the token's")
	tokenFile := fs.String("token-file", "/etc/eim/connect.token", "the cluster's connect token (rotated tokens are written back here)")
	upstream := fs.String("upstream", "https://127.0.0.1:6443", "the Kubernetes API server: the one address the agent forwards to")
	upstreamCA := fs.String("upstream-ca", "", "CA bundle (PEM) of the upstream's certificate (default: the system's)")
	upstreamCert := fs.String("upstream-cert", "", "client certificate (PEM) the agent presents upstream; needs --upstream-key")
	upstreamKey := fs.String("upstream-key", "", "key of --upstream-cert")
	upstreamToken := fs.String("upstream-token-file", "", "bearer token the agent presents upstream (read at each request: a rotated file is picked up)")
	pingInterval := fs.Duration("ping-interval", wire.DefaultTiming.Interval, "how often the tunnel is pinged")
	pingTimeout := fs.Duration("ping-timeout", wire.DefaultTiming.Timeout, "a ping not answered within this ends the tunnel (then it reconnects)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *server == "" {
		return usagef("connect: --server is required")
	}
	if *cluster != "" && strings.Count(*cluster, "/") != 1 {
		return usagef("connect: --cluster %q: want PROJECT/CLUSTER", *cluster)
	}
	up, err := url.Parse(*upstream)
	if err != nil || (up.Scheme != "https" && up.Scheme != "http") || up.Host == "" {
		return usagef("connect: --upstream %q is not an http(s) URL", *upstream)
	}
	if (*upstreamCert == "") != (*upstreamKey == "") {
		return usagef("connect: --upstream-cert and --upstream-key go together")
	}
	pinSpec := *ca
	if !strings.HasPrefix(pinSpec, "sha256:") {
		b, err := os.ReadFile(*ca)
		if err != nil {
			return fmt.Errorf("--ca: %w", err)
		}
		pinSpec = string(b)
	}
	pin, err := agent.NewPin(pinSpec)
	if err != nil {
		return fmt.Errorf("--ca %s: %w", *ca, err)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *upstreamCA != "" {
		b, err := os.ReadFile(*upstreamCA)
		if err != nil {
			return fmt.Errorf("--upstream-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("--upstream-ca %s: no certificate in it", *upstreamCA)
		}
		tlsCfg.RootCAs = pool
	}
	if *upstreamCert != "" {
		cert, err := tls.LoadX509KeyPair(*upstreamCert, *upstreamKey)
		if err != nil {
			return fmt.Errorf("--upstream-cert: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	c := &agent.Connect{
		Server: *server, Pin: pin, Cluster: *cluster, TokenFile: *tokenFile, Upstream: up,
		Transport: &http.Transport{TLSClientConfig: tlsCfg, TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second},
		Timing:    wire.Timing{Interval: *pingInterval, Timeout: *pingTimeout},
		Backoff:   agent.Backoff{Min: time.Second, Max: 30 * time.Second},
		Logger:    newLogger(stderr, *debug).With("cluster", *cluster),
	}
	if *upstreamToken != "" {
		path := *upstreamToken
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("--upstream-token-file: %w", err)
		}
		c.UpstreamToken = func() (string, error) {
			b, err := os.ReadFile(path)
			return strings.TrimSpace(string(b)), err
		}
	}
	if _, err := os.Stat(*tokenFile); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	return c.Run(ctx)
}
