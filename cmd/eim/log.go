package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// instanceLog runs "eim instance log ID [-f]": the provisioning log of an
// instance, and with -f its progress until the workflow ends (like tail -f).
func (c *cli) instanceLog(args []string) error {
	fs := c.flagSet("eim instance log", "eim instance log ID [-f]",
		"Print an instance's provisioning log: every action's state changes and what the node printed.\nWith -f, follow it until provisioning ends; the exit status is then non-zero if it failed.")
	c.globalFlags(fs)
	var follow bool
	fs.BoolVar(&follow, "f", false, "follow the log until provisioning ends")
	fs.BoolVar(&follow, "follow", false, "same as -f")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("log", pos, 1, "one instance ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	return c.followLog(cl, pos[0], &logPrinter{c: c, json: c.g.output == "json"}, follow)
}

// followLog prints instance id's log after p.after; with follow, until the
// workflow ends (non-nil error if it failed).
func (c *cli) followLog(cl *client.Client, id string, p *logPrinter, follow bool) error {
	waiting := false
	for {
		var wait time.Duration
		if follow {
			wait = logPollWait
		}
		l, err := cl.ProvisioningLog(c.ctx, c.g.project, id, p.after, wait)
		if err != nil {
			if follow && eim.ErrorCode(err) == eim.EUNAVAILABLE && c.ctx.Err() == nil {
				// The server restarts or is busy: keep following.
				if err := sleepCtx(c, logRetry); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if err := p.print(l); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		if l.WorkflowID == "" && !waiting {
			fmt.Fprintf(c.stderr, "waiting for the node of %s to ask for its workflow…\n", id)
			waiting = true
		}
		if l.Finished() {
			if l.State == eim.WorkflowFailed {
				return fmt.Errorf("provisioning of %s failed: %s", id, l.Message)
			}
			return nil
		}
	}
}

// instanceReprovision runs "eim instance reprovision ID [-f]": retry an
// instance's failed provisioning, and with -f follow the new attempt.
func (c *cli) instanceReprovision(args []string) error {
	fs := c.flagSet("eim instance reprovision", "eim instance reprovision ID [-f]",
		"Retry an instance's failed provisioning: a new attempt of its workflow, rendered again from the instance's\n"+
			"current OS profile, local account and custom configs. The node, which keeps asking while its workflow\n"+
			"is failed, runs it from the first action within a minute. With -f, follow the new attempt's log until it ends.")
	c.globalFlags(fs)
	var follow bool
	fs.BoolVar(&follow, "f", false, "follow the log of the new attempt until provisioning ends")
	fs.BoolVar(&follow, "follow", false, "same as -f")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("reprovision", pos, 1, "one instance ID"); err != nil {
		return err
	}
	id := pos[0]
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	l, err := cl.Reprovision(c.ctx, c.g.project, id)
	if err != nil {
		return err
	}
	p := &logPrinter{c: c, json: c.g.output == "json"}
	if len(l.Entries) > 0 {
		p.after = l.Entries[0].Seq - 1 // earlier attempts' entries are not a gap
	}
	if err := p.print(l); err != nil {
		return err
	}
	p.after = max(p.after, l.Next)
	if !follow {
		if !p.json {
			fmt.Fprintf(c.stderr, "attempt %d of %s started; follow it with: eim instance log %s -f\n", l.Attempt, id, id)
		}
		return nil
	}
	return c.followLog(cl, id, p, true)
}

// Follow mode: how long each poll may wait on the server, and the pause
// before asking again after the server was unavailable.
const (
	logPollWait = 25 * time.Second
	logRetry    = 2 * time.Second
)

func sleepCtx(c *cli, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return c.ctx.Err()
	case <-t.C:
		return nil
	}
}

// logPrinter prints log pages as they come, remembering where it is.
type logPrinter struct {
	c      *cli
	json   bool
	after  int  // last seq printed
	midRaw bool // the last output printed did not end its line
}

// print writes l's entries:
//
//	2026-11-22T10:00:03Z  [2/7 stream-image] RUNNING
//	…output as the node printed it…
//	2026-11-22T10:04:41Z  [2/7 stream-image] FAILED sha256 mismatch
func (p *logPrinter) print(l *client.ProvisioningLog) error {
	w := p.c.stdout
	for _, e := range l.Entries {
		if e.Seq <= p.after {
			continue // a page overlapping what was printed
		}
		if p.json {
			b, err := json.Marshal(e)
			if err != nil {
				return fmt.Errorf("encode entry: %w", err)
			}
			fmt.Fprintf(w, "%s\n", b)
			p.after = e.Seq
			continue
		}
		if e.Seq > p.after+1 {
			p.endLine()
			fmt.Fprintln(w, "… (older output dropped: the log keeps every state change but caps output)")
		}
		p.after = e.Seq
		if e.Output != "" && e.State == "" && e.Message == "" {
			fmt.Fprint(w, e.Output)
			p.midRaw = !strings.HasSuffix(e.Output, "\n")
			continue
		}
		p.endLine()
		line := e.Time.UTC().Format(time.RFC3339) + "  " + p.label(l, e)
		if s := strings.TrimPrefix(string(e.State), "ACTION_STATE_"); s != "" {
			line += " " + s
		}
		if e.Message != "" {
			line += " " + e.Message
		}
		fmt.Fprintln(w, line)
		if e.Output != "" {
			fmt.Fprint(w, e.Output)
			p.midRaw = !strings.HasSuffix(e.Output, "\n")
		}
	}
	return nil
}

func (p *logPrinter) label(l *client.ProvisioningLog, e eim.WorkflowLogEntry) string {
	if e.Action < 0 {
		return fmt.Sprintf("[workflow, attempt %d]", max(e.Attempt, l.Attempt))
	}
	return fmt.Sprintf("[%d/%d %s]", e.Action+1, l.TotalActions, e.Name)
}

// endLine ends a line of raw output left open, before a line of ours.
func (p *logPrinter) endLine() {
	if p.midRaw {
		fmt.Fprintln(p.c.stdout)
		p.midRaw = false
	}
}

// instanceRecoveryKey runs "eim instance recovery-key ID": the recovery key
// of the instance's encrypted disk (administrators only; the read is
// audited).
func (c *cli) instanceRecoveryKey(args []string) error {
	fs := c.flagSet("eim instance recovery-key", "eim instance recovery-key ID",
		"Print the recovery key of an instance's encrypted disk (SECURE_BOOT_AND_FULL_DISK_ENCRYPTION), which opens\n"+
			"it when its TPM will not unseal the key (a changed Secure Boot configuration, a replaced board):\n"+
			"  cryptsetup open DEVICE NAME    (type the key)\n"+
			"Administrators (eim-admin) only; every read is recorded in the project's audit log.")
	c.globalFlags(fs)
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("recovery-key", pos, 1, "one instance ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	k, err := cl.RecoveryKey(c.ctx, c.g.project, pos[0])
	if err != nil {
		return err
	}
	if c.g.output == "json" {
		return c.printJSON(k)
	}
	fmt.Fprintln(c.stdout, k.RecoveryKey)
	fmt.Fprintf(c.stderr, "volume %s of host %s, escrowed %s; this read is in the audit log\n", k.VolumeUUID, k.HostID, k.EscrowedAt.Time.UTC().Format(time.RFC3339))
	return nil
}
