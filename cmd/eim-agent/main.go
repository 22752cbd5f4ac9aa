// Command eim-agent is EIM's node agent.
//
//	eim-agent discover [--cmdline /proc/cmdline] [--sys-root /]
//	    micro-OS mode: read eim.url, eim.ca (the CA fingerprint) and
//	    eim.enroll from the kernel command line, call home, onboard, run
//	    the provisioning workflow and reboot into the installed OS.
//	eim-agent enroll --url https://EIM:8443 --ca sha256:… --enroll TOKEN [--label k=v] [-- node flags]
//	    a machine with its OS installed: wait in the project's enrollment
//	    lobby until approved, save the credentials, then node mode with no
//	    provisioning (docs/enrollment.md).
//	eim-agent node [--config /etc/eim/agent.json]
//	    node mode on the installed OS: report in, then again at the
//	    interval the server sets.
//	eim-agent connect --server https://EIM --cluster PROJECT/CLUSTER --token-file F --upstream https://127.0.0.1:6443
//	    an edge cluster's tunnel to the connect gateway (docs/connect.md).
//	eim-agent simulate …
//	    a fleet of simulated nodes in one process (load tests).
//	eim-agent version
//
// As a machine's first process (PID 1: /init of an initramfs that "eim
// microos build" or "eim testos build" made) it sets the machine up and
// runs discover or node mode by itself; see init.go.
//
// Logs go to standard error. The exit status is 0 on success, 2 for a
// mistake in the command line and 1 otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/eimhq/eim/agent"
)

func main() {
	if os.Getpid() == 1 {
		pid1() // the machine's init, in an initramfs eim built
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "eim-agent: "+err.Error())
		if errors.As(err, new(*usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// command runs one subcommand with its arguments.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

func commands() map[string]command {
	return map[string]command{
		"connect":  runConnect,
		"discover": runDiscover,
		"enroll":   runEnroll,
		"node":     runNode,
		"simulate": runSimulate,
	}
}

const usage = `usage: eim-agent <command> [flags]

commands:
  connect    hold an edge cluster's tunnel to the connect gateway
  discover   micro-OS mode: onboard and provision this machine
  enroll     a machine with its OS installed: enroll (lobby), then node mode
  node       node mode: report in from the installed OS
  simulate   run a fleet of simulated nodes
  version    print the agent version

Run "eim-agent <command> -h" for the flags of a command.
`

// Main runs eim-agent with args (without the program name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version":
		fmt.Fprintln(stdout, agent.Version)
		return nil
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usagef("unknown command %q", args[0])
	}
	err := cmd(ctx, args[1:], stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// newFlags returns a flag set whose errors are usage errors.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("eim-agent "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args; a flag mistake becomes a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
