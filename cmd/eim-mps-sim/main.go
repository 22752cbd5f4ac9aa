// Command eim-mps-sim runs the test MPS (internal/mpssim), a simulator of
// the REST API of Intel's Open AMT Cloud Toolkit Management Presence
// Server, on its own, to try EIM's AMT driver or curl against it. It is a
// test tool, not part of EIM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/eimhq/eim/internal/mpssim"
	"github.com/eimhq/eim/internal/redfishsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "eim-mps-sim:", err)
		}
		os.Exit(2)
	}
}

// run serves the MPS until ctx ends; it prints the URLs it serves on.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eim-mps-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		httpsAddr = fs.String("https", "127.0.0.1:3443", "HTTPS address (self-signed certificate; empty: none)")
		httpAddr  = fs.String("http", "127.0.0.1:3000", "plain HTTP address (empty: none)")
		certOut   = fs.String("cert-out", "", "write the HTTPS certificate (PEM) to this file, to use as a CA bundle")
		user      = fs.String("user", "standalone", "the MPS account's name")
		password  = fs.String("password", "G@ppm0ym", "the MPS account's password")
		devices   = fs.String("devices", "4c4c4544-005a-3510-8047-b4c04f564433", "comma-separated AMT device GUIDs (connected, off)")
		lms       = fs.Bool("lms", false, "devices run Intel LMS (sleep, hibernate, soft off and reset possible)")
		on        = fs.Bool("on", false, "devices start powered on")
		drop      = fs.Int("drop-actions", 0, "the next N accepted power actions answer SUCCESS and do nothing")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := mpssim.Config{Username: *user, Password: *password}
	for _, g := range strings.Split(*devices, ",") {
		if g = strings.TrimSpace(g); g != "" {
			cfg.Devices = append(cfg.Devices, mpssim.DeviceConfig{GUID: g, LMS: *lms, On: *on})
		}
	}
	if len(cfg.Devices) == 0 {
		return errors.New("-devices: no GUID")
	}
	sim, err := mpssim.New(cfg)
	if err != nil {
		return err
	}
	sim.DropActions(*drop)
	srv, err := redfishsim.Serve(sim, *httpsAddr, *httpAddr)
	if err != nil {
		return err
	}
	defer srv.Close()
	if *certOut != "" && srv.CertPEM != nil {
		if err := os.WriteFile(*certOut, srv.CertPEM, 0o644); err != nil {
			return err
		}
	}
	for _, u := range []string{srv.URL, srv.HTTPURL} {
		if u != "" {
			fmt.Fprintln(stdout, u+"/api/v1/")
		}
	}
	<-ctx.Done()
	return nil
}
