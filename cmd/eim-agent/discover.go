package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/eimhq/eim/agent"
)

// runDiscover is micro-OS mode: from the kernel command line to the
// reboot into the installed OS.
func runDiscover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("discover", stderr)
	cmdline := fs.String("cmdline", "/proc/cmdline", "kernel command line with eim.url, eim.ca and eim.enroll")
	sysRoot := fs.String("sys-root", "/", "root under which sys/ (SMBIOS identity, block devices) is read")
	url := fs.String("url", "", "server agent URL (overrides eim.url)")
	ca := fs.String("ca", "", "CA fingerprint (sha256:<hex>) or CA certificate file (overrides eim.ca)")
	enroll := fs.String("enroll", "", "project enrollment token (overrides eim.enroll)")
	debug := fs.Bool("debug", false, "log debug messages")
	if err := parse(fs, args); err != nil {
		return err
	}
	boot, trust, err := bootConfig(*cmdline, *url, *ca, *enroll)
	if err != nil {
		return err
	}
	log := newLogger(stderr, *debug)
	client, pin, err := agent.DialPin(boot.URL, trust)
	if err != nil {
		return err
	}
	id, err := agent.ReadIdentity(*sysRoot)
	if err != nil {
		return err
	}
	log.Info("calling home", "url", boot.URL, "uuid", id.UUID, "serial", id.Serial)
	p := &agent.Provisioner{
		Client: client, URL: boot.URL, EnrollToken: boot.EnrollToken, Identity: id,
		Exec:   &agent.Machine{SysRoot: *sysRoot},
		Logger: log, Backoff: agent.DefaultBackoff, Pin: pin,
		OnPhase: func(ph string) { log.Debug("phase", "phase", ph) },
	}
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	if res.Rebooted {
		fmt.Fprintf(stdout, "provisioned host %s; rebooting\n", res.HostID)
	} else {
		fmt.Fprintf(stdout, "host %s is provisioned; boot it from its disk\n", res.HostID)
	}
	return nil
}

// bootConfig reads the kernel command line (unless --url and --ca are both
// given), with flags overriding it. trust is what Dial takes: the CA
// fingerprint, or the PEM of the file --ca names.
func bootConfig(cmdlinePath, url, ca, enroll string) (c agent.BootConfig, trust string, err error) {
	if url == "" || ca == "" {
		b, err := os.ReadFile(cmdlinePath)
		if err != nil {
			return c, "", fmt.Errorf("read kernel command line: %w", err)
		}
		if c, err = agent.ParseCmdline(string(b)); err != nil {
			return c, "", fmt.Errorf("%s: %w", cmdlinePath, err)
		}
	}
	if url != "" {
		c.URL = url
	}
	if enroll != "" {
		c.EnrollToken = enroll
	}
	trust = c.CAFingerprint
	if ca != "" {
		if _, err := agent.ParseFingerprint(ca); err == nil {
			trust = ca
		} else {
			pem, err := os.ReadFile(filepath.Clean(ca))
			if err != nil {
				return c, "", usagef("--ca is neither a sha256 fingerprint nor a readable file: %v", err)
			}
			trust = string(pem)
		}
	}
	return c, trust, nil
}
