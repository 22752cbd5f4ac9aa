package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"runtime"
	"strings"

	"github.com/eimhq/eim/agent"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
)

// runEnroll is Day 0 of a machine that runs its OS already: call home with
// a project's enrollment token, wait in the project's enrollment lobby
// until approved (backing off while denied), save the node's credentials
// to --config, then run node mode (report in, heartbeats) with no
// provisioning. With --config present it goes straight to node mode, so a
// service may run it at every boot. Flags after "--" go to node mode.
func runEnroll(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var nodeArgs []string
	for i, a := range args {
		if a == "--" {
			args, nodeArgs = args[:i], args[i+1:]
			break
		}
	}
	fs := newFlags("enroll", stderr)
	url := fs.String("url", "", "server agent URL, https://HOST:8443 (required)")
	ca := fs.String("ca", "", "CA fingerprint (sha256:<hex>) or CA certificate file (required)")
	token := fs.String("enroll", "", "the project's enrollment token (or a site's: a TOKEN rule's)")
	tokenFile := fs.String("enroll-file", "", "file holding the enrollment token (instead of --enroll)")
	config := fs.String("config", "/etc/eim/agent.json", "where to save the node's credentials once approved (node mode reads it)")
	stateDir := fs.String("state-dir", "/var/lib/eim-agent", "node mode's state directory")
	sysRoot := fs.String("sys-root", "/", "root under which sys/ (SMBIOS identity) is read")
	var labels labelFlags
	fs.Var(&labels, "label", "a key=value label to report to the enrollment lobby (repeatable; rules may match on them)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parse(fs, args); err != nil {
		return err
	}
	node := append([]string{"--config", *config, "--state-dir", *stateDir}, nodeArgs...)
	if *debug {
		node = append(node, "--debug")
	}
	if _, err := os.Stat(*config); err == nil {
		return runNode(ctx, node, stdout, stderr)
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	if *url == "" || *ca == "" {
		return usagef("--url and --ca are required to enroll (no %s yet)", *config)
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		*token = strings.TrimSpace(string(b))
	}
	if *token == "" {
		return usagef("--enroll or --enroll-file is required to enroll (no %s yet)", *config)
	}
	_, trust, err := bootConfig("", *url, *ca, *token)
	if err != nil {
		return err
	}
	log := newLogger(stderr, *debug)
	client, pin, err := agent.DialPin(*url, trust)
	if err != nil {
		return err
	}
	id, err := agent.ReadIdentity(*sysRoot)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	id.Hostname = host
	p := &agent.Provisioner{
		Client: client, URL: *url, EnrollToken: *token, Identity: id, Labels: labels,
		Hardware: &onboardingv1.HardwareSummary{Architecture: runtime.GOARCH, Os: prettyName("/etc/os-release")},
		Logger:   log, Backoff: agent.DefaultBackoff, Pin: pin,
	}
	log.Info("enrolling", "url", *url, "uuid", id.UUID, "serial", id.Serial)
	res, err := p.Enroll(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	cfg := agent.NodeConfig{URL: *url, CACertPEM: string(pin.CACertPEM()), ClientID: res.ClientID, ClientSecret: res.ClientSecret,
		HostID: res.HostID, Project: res.Project, TokenURL: res.TokenURL}
	if err := cfg.Save(*config); err != nil {
		return fmt.Errorf("save node config: %w", err)
	}
	fmt.Fprintf(stdout, "enrolled as host %s in project %s\n", res.HostID, res.Project)
	return runNode(ctx, node, stdout, stderr)
}
