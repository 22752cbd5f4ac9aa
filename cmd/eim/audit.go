package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

const auditUsage = `Usage:
  eim audit list [--resource ID] [--kind K] [--principal P] [--action A]
                 [--since 1h] [--filter F] [--page-size N] [-f]

Shows the project's audit log, newest first: who changed what (user:…,
node:…, module:…), with the fields old → new (secrets redacted). --since
takes a duration (90m, 24h, 7d) or an RFC 3339 time; -f prints the matching
records oldest first and then follows new ones until interrupted.
`

// followPoll is how often "eim audit list -f" asks for new records.
var followPoll = time.Second

// audit runs "eim audit list".
func (c *cli) audit(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, auditUsage)
		return nil
	}
	if args[0] != "list" {
		return usagef("audit: unknown verb %q (list)", args[0])
	}
	fs := c.flagSet("eim audit list", "eim audit list [flags]", "Show (and with -f follow) the project's audit log.")
	c.globalFlags(fs)
	var resource, kind, principal, action, since, extra string
	var follow bool
	var pageSize int
	fs.StringVar(&resource, "resource", "", "only the records of this resource ID")
	fs.StringVar(&kind, "kind", "", "only records of this kind (host, inst, site, webhook, project …)")
	fs.StringVar(&principal, "principal", "", "only records of this principal (user:alice, node:host-…, module:host)")
	fs.StringVar(&action, "action", "", "only records of this action (CREATED, UPDATED, DELETED)")
	fs.StringVar(&since, "since", "", "only records since: a duration ago (90m, 24h, 7d) or an RFC 3339 time")
	fs.StringVar(&extra, "filter", "", "an AIP-160 filter ANDed with the rest")
	fs.IntVar(&pageSize, "page-size", 20, "records shown (without -f)")
	fs.BoolVar(&follow, "f", false, "follow: print new records as they come, until interrupted")
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("audit list", pos, 0, "no arguments"); err != nil {
		return err
	}
	var conds []string
	for _, f := range []struct{ field, v string }{{"resourceId", resource}, {"kind", kind}, {"principal", principal}, {"action", action}} {
		if f.v != "" {
			conds = append(conds, fmt.Sprintf("%s=%s", f.field, strconv.Quote(f.v)))
		}
	}
	var from time.Time
	if since != "" {
		if from, err = parseSince(since, time.Now()); err != nil {
			return usagef("--since: %v", err)
		}
	}
	if extra != "" {
		conds = append(conds, "("+extra+")")
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	filter := func(after time.Time) string {
		all := slices.Clone(conds)
		if !after.IsZero() {
			all = append(all, fmt.Sprintf("time>=%q", after.UTC().Format(time.RFC3339Nano)))
		}
		return strings.Join(all, " AND ")
	}
	if !follow {
		page, err := cl.Audit(c.ctx, c.g.project, filter(from), pageSize, 0)
		if err != nil {
			return err
		}
		return c.printAudit(page.Records, true)
	}
	// Follow: first what matches since --since (a minute by default), then
	// by cursor: the records after the last seq seen. A project's seqs
	// become visible in order, so nothing after it can appear later below
	// it.
	last := from
	if last.IsZero() {
		last = time.Now().Add(-time.Minute)
	}
	cond := filter(last)
	var after int64
	header := true
	for {
		var fresh []eim.AuditRecord
		seen := map[int64]bool{} // a page may repeat records pushed down by new ones
		for off := 0; ; off += 100 {
			page, err := cl.Audit(c.ctx, c.g.project, cond, 100, off)
			if err != nil {
				if c.ctx.Err() != nil {
					return nil
				}
				return err
			}
			for _, r := range page.Records {
				if r.Seq > after && !seen[r.Seq] {
					seen[r.Seq] = true
					fresh = append(fresh, r)
				}
			}
			if !page.HasNext || off+100 > 10000 {
				break
			}
		}
		sort.Slice(fresh, func(i, j int) bool { return fresh[i].Seq < fresh[j].Seq })
		if len(fresh) > 0 {
			if err := c.printAudit(fresh, header); err != nil {
				return err
			}
			header = false
			after = fresh[len(fresh)-1].Seq
		}
		if after > 0 {
			cond = strings.Join(append(slices.Clone(conds), fmt.Sprintf("seq>%d", after)), " AND ")
		}
		select {
		case <-c.ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

func (c *cli) printAudit(recs []eim.AuditRecord, header bool) error {
	switch c.g.output {
	case "json":
		if recs == nil {
			recs = []eim.AuditRecord{}
		}
		for _, r := range recs {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, string(b))
		}
		return nil
	case "id":
		for _, r := range recs {
			fmt.Fprintln(c.stdout, r.ResourceID)
		}
		return nil
	}
	tw := newTab(c.stdout)
	if header {
		fmt.Fprintln(tw, "TIME\tPRINCIPAL\tACTION\tKIND\tRESOURCE\tCHANGES")
	}
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Time.Format(time.RFC3339), r.Principal, r.Action, r.Kind, r.ResourceID, changesText(r.Changes))
	}
	return tw.Flush()
}

// changesText renders changes as "field: old → new", sorted by field.
func changesText(ch map[string]eim.Change) string {
	if len(ch) == 0 {
		return "-"
	}
	names := make([]string, 0, len(ch))
	for k := range ch {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s: %s → %s", k, short(ch[k].Old), short(ch[k].New))
	}
	return strings.Join(parts, "; ")
}

func short(v json.RawMessage) string {
	s := string(v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// parseSince reads --since: a duration ago (with d for days) or an RFC 3339
// time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := parseSpan(s)
	if err != nil {
		return time.Time{}, err
	}
	return now.Add(-d), nil
}

// parseSpan reads a duration, with d for days (90d, 1d12h).
func parseSpan(s string) (time.Duration, error) {
	orig := s
	var days int
	if i := strings.Index(s, "d"); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > 100000 {
			return 0, fmt.Errorf("%q: want a duration such as 90m, 24h or 7d", orig)
		}
		days, s = n, s[i+1:]
	}
	var d time.Duration
	if s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d < 0 {
			return 0, fmt.Errorf("%q: want a duration such as 90m, 24h or 7d", orig)
		}
	}
	return time.Duration(days)*24*time.Hour + d, nil
}

const webhookUsage = `Usage:
  eim webhook list
  eim webhook get ID
  eim webhook create --url URL --events host.onboarded,instance.running [--secret S]
  eim webhook update ID [--url URL] [--events E,E] [--secret S|new]
  eim webhook delete ID
  eim webhook deliveries ID [--page-size N]

Event types: ` + "host.onboarded host.connection_lost instance.running\n" +
	"             instance.provisioning_failed instance.update_failed project.deleted\n" + `
Deliveries are signed: EIM-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
(see docs/audit.md). Without --secret (create) or with --secret new (update)
the server makes one, shown once.
`

// webhook runs "eim webhook list|get|create|delete|deliveries".
func (c *cli) webhook(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, webhookUsage)
		return nil
	}
	verb := args[0]
	fs := c.flagSet("eim webhook "+verb, "eim webhook "+verb+" …", "")
	c.globalFlags(fs)
	var in client.WebhookInput
	var events string
	var pageSize int
	switch verb {
	case "create", "update":
		fs.StringVar(&in.URL, "url", "", "the receiver's URL (http or https)")
		fs.StringVar(&events, "events", "", "comma-separated event types")
		fs.StringVar(&in.Secret, "secret", "", "the signing secret, 16 to 256 characters (default on create, or \"new\" on update: generated, shown once)")
	case "deliveries":
		fs.IntVar(&pageSize, "page-size", 20, "deliveries shown")
	case "list", "get", "delete":
	default:
		return usagef("webhook: unknown verb %q (list, get, create, update, delete, deliveries)", verb)
	}
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	switch verb {
	case "list", "create":
		err = wantArgs(verb, pos, 0, "no arguments")
	default:
		err = wantArgs(verb, pos, 1, "a webhook ID")
	}
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	switch verb {
	case "create":
		if events != "" {
			in.EventTypes = strings.Split(events, ",")
		}
		w, err := cl.CreateWebhook(c.ctx, c.g.project, in)
		if err != nil {
			return err
		}
		if err := c.printWebhooks([]*client.Webhook{w}); err != nil {
			return err
		}
		if w.Secret != "" && c.g.output == "table" {
			fmt.Fprintf(c.stdout, "secret (shown once): %s\n", w.Secret)
		}
		return nil
	case "update":
		var ch client.WebhookChange
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "url":
				ch.URL = &in.URL
			case "events":
				types := strings.Split(events, ",")
				ch.EventTypes = &types
			case "secret":
				ch.Secret = &in.Secret
			}
		})
		w, err := cl.UpdateWebhook(c.ctx, c.g.project, pos[0], ch)
		if err != nil {
			return err
		}
		if err := c.printWebhooks([]*client.Webhook{w}); err != nil {
			return err
		}
		if w.Secret != "" && c.g.output == "table" {
			fmt.Fprintf(c.stdout, "secret (shown once): %s\n", w.Secret)
		}
		return nil
	case "get":
		w, err := cl.GetWebhook(c.ctx, c.g.project, pos[0])
		if err != nil {
			return err
		}
		return c.printWebhooks([]*client.Webhook{w})
	case "delete":
		if err := cl.DeleteWebhook(c.ctx, c.g.project, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deleted webhook %s\n", pos[0])
		return nil
	case "deliveries":
		page, err := cl.Deliveries(c.ctx, c.g.project, pos[0], pageSize, 0)
		if err != nil {
			return err
		}
		switch c.g.output {
		case "json":
			return c.printJSON(page.Deliveries)
		case "id":
			for _, d := range page.Deliveries {
				fmt.Fprintln(c.stdout, d.ID)
			}
			return nil
		}
		rows := make([][]string, len(page.Deliveries))
		for i, d := range page.Deliveries {
			rows[i] = []string{d.ID, d.EventType, d.ResourceID, string(d.State), strconv.Itoa(d.Attempts), strconv.Itoa(d.LastStatus), d.LastError}
		}
		return c.printTable([]string{"DELIVERY", "EVENT", "RESOURCE", "STATE", "ATTEMPTS", "STATUS", "ERROR"}, rows)
	}
	ws, err := cl.ListWebhooks(c.ctx, c.g.project)
	if err != nil {
		return err
	}
	return c.printWebhooks(ws)
}

func (c *cli) printWebhooks(ws []*client.Webhook) error {
	switch c.g.output {
	case "json":
		if len(ws) == 1 {
			return c.printJSON(ws[0])
		}
		return c.printJSON(ws)
	case "id":
		for _, w := range ws {
			fmt.Fprintln(c.stdout, w.ID)
		}
		return nil
	}
	rows := make([][]string, len(ws))
	for i, w := range ws {
		rows[i] = []string{w.ID, w.URL, strings.Join(w.EventTypes, ","), w.CreatedAt.Format(time.RFC3339)}
	}
	return c.printTable([]string{"ID", "URL", "EVENTS", "CREATED"}, rows)
}
