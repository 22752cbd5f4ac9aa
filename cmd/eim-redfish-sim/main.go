// Command eim-redfish-sim runs the test Redfish BMC (internal/redfishsim)
// on its own, to try Redfish clients against it: systems in memory, or one
// QEMU VM driven through QMP, with the BMC's faults switched on by flags.
// "eim-redfish-sim fleet" runs many BMCs, one per simulated host, each on
// its own port (fleet.go). It is a test tool, not part of EIM.
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

	"github.com/eimhq/eim/internal/redfishsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "eim-redfish-sim:", err)
		}
		os.Exit(2)
	}
}

// run serves the BMC until ctx ends; it prints the URLs it serves on.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "fleet" {
		return runFleet(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("eim-redfish-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		httpsAddr = fs.String("https", "127.0.0.1:8443", "HTTPS address (self-signed certificate; empty: none)")
		httpAddr  = fs.String("http", "127.0.0.1:8000", "plain HTTP address (empty: none)")
		certOut   = fs.String("cert-out", "", "write the HTTPS certificate (PEM) to this file, to use as a CA bundle")
		user      = fs.String("user", "admin", "account name")
		password  = fs.String("password", "redfish", "account password")
		systems   = fs.Int("systems", 1, "number of systems (in memory)")
		on        = fs.Bool("on", false, "systems start powered on (in memory)")
		delay     = fs.Duration("delay", 0, "how long PoweringOn and PoweringOff last (in memory)")
		deaf      = fs.Bool("ignore-graceful", false, "the OS ignores the power button (in memory)")
		qmp       = fs.String("qmp", "", "one QEMU VM instead: its QMP socket path (-qmp unix:PATH,server=on,wait=off)")
		qemu      = fs.String("qemu", "", "the command starting that VM (split on spaces)")
		maxSess   = fs.Int("max-sessions", 0, "session limit (0: none)")
		limit400  = fs.Bool("session-limit-400", false, "answer the session limit with 400, as iDRAC (default 503, as bmcweb)")
		drop      = fs.Int("drop-power-ons", 0, "drop the next N power-on requests (answered 204)")
		conflict  = fs.Bool("conflict-in-state", false, "409 for a power action the system is already in, as iDRAC")
		onceCont  = fs.Bool("once-as-continuous", false, "a one-time boot override reads back as Continuous")
		onceIgn   = fs.Bool("once-ignored", false, "a one-time boot override is accepted but not used")
		noMode    = fs.Bool("no-boot-mode", false, "no BootSourceOverrideMode, as Supermicro")
		tasks     = fs.Int("async-tasks", 0, "resets and virtual media actions answer 202 with a task monitor that reads Running N times")
		taskExc   = fs.Bool("task-exception", false, "with -async-tasks, accepted actions are not done and their task ends in Exception")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := redfishsim.Config{
		Username: *user, Password: *password, MaxSessions: *maxSess,
		Faults: redfishsim.Faults{DropPowerOns: *drop, ConflictInState: *conflict, OnceAsContinuous: *onceCont,
			OnceIgnored: *onceIgn, NoBootMode: *noMode, AsyncTasks: *tasks, TaskException: *taskExc},
	}
	if *limit400 {
		cfg.SessionLimitStatus = 400
	}
	if *qmp != "" {
		m, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{QMP: *qmp, Command: strings.Fields(*qemu), Stdout: stderr, Stderr: stderr})
		if err != nil {
			return err
		}
		defer m.Close()
		cfg.Systems = []redfishsim.SystemConfig{{Machine: m}}
	} else {
		if *systems < 1 {
			return errors.New("-systems must be at least 1")
		}
		for range *systems {
			cfg.Systems = append(cfg.Systems, redfishsim.SystemConfig{Machine: redfishsim.NewMemory(
				redfishsim.MemoryConfig{On: *on, Delay: *delay, IgnoreGraceful: *deaf})})
		}
	}
	bmc, err := redfishsim.New(cfg)
	if err != nil {
		return err
	}
	srv, err := redfishsim.Serve(bmc, *httpsAddr, *httpAddr)
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
			fmt.Fprintln(stdout, u+"/redfish/v1/")
		}
	}
	<-ctx.Done()
	return nil
}
