package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

const projectUsage = `Usage:
  eim project list
  eim project create NAME
  eim project delete NAME [--force] [--no-wait]
  eim project get NAME
  eim project set NAME [--default-os ID|none] [--default-local-account ID|none]
                       [--default-custom-configs ID,ID|none]
                       [--enrollment-token new|none] [--auto-onboard-enrolled=true|false]
                       [--heartbeat-interval 30s] [--heartbeat-timeout 90s]
                       [--power-policy ALWAYS_ON|REPORT|none]

Creating, listing all and deleting projects needs the eim-admin role;
get needs a role on the project, set eim-admin or the project's read-write
role. --default-os turns on zero-touch provisioning: an onboarded host
without an instance gets one with that OS (and the default local account and
custom configs). --enrollment-token new makes a token that lets unknown
devices enrol in the project (shown once); none refuses them again.

Where the tenant module runs, delete starts the project's deletion (a
cascade that survives restarts) and follows it until the project is gone,
showing its phases; --no-wait returns once it has started (eim project get
shows its progress).
`

// project runs "eim project list|create|delete|get|set".
func (c *cli) project(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, projectUsage)
		return nil
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "get":
		return c.projectGet(rest)
	case "set":
		return c.projectSet(rest)
	}
	fs := c.flagSet("eim project "+verb, "eim project "+verb+" …", "")
	c.globalFlags(fs)
	var force, noWait bool
	if verb == "delete" {
		fs.BoolVar(&force, "force", false, "also delete every resource in the project")
		fs.BoolVar(&noWait, "no-wait", false, "return once the deletion has started, without following it")
	}
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		err = wantArgs(verb, pos, 0, "no arguments")
	case "create", "delete":
		err = wantArgs(verb, pos, 1, "a project name")
	default:
		return usagef("project: unknown verb %q (list, create, delete, get, set)", verb)
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
		p, err := cl.CreateProject(c.ctx, pos[0])
		if err != nil {
			return err
		}
		switch c.g.output {
		case "json":
			return c.printJSON(p)
		case "id":
			fmt.Fprintln(c.stdout, p.ID)
			return nil
		}
		return c.printTable([]string{"NAME", "ID", "CREATED"}, [][]string{{p.Name, p.ID, p.CreatedAt.Format(time.RFC3339)}})
	case "delete":
		p, err := cl.DeleteProject(c.ctx, pos[0], force)
		if err != nil {
			return err
		}
		if p != nil && noWait {
			fmt.Fprintf(c.stdout, "deleting project %s (eim project get %s shows the progress)\n", pos[0], pos[0])
			return nil
		}
		if p != nil {
			if err := c.followDeletion(cl, p); err != nil {
				return err
			}
		}
		fmt.Fprintf(c.stdout, "deleted project %s\n", pos[0])
		return nil
	}
	ps, err := cl.ListProjects(c.ctx)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		return c.printJSON(ps)
	case "id":
		for _, p := range ps {
			fmt.Fprintln(c.stdout, p.ID)
		}
		return nil
	}
	rows := make([][]string, len(ps))
	for i, p := range ps {
		rows[i] = []string{p.Name, p.ID, p.CreatedAt.Format(time.RFC3339)}
	}
	return c.printTable([]string{"NAME", "ID", "CREATED"}, rows)
}

// deletionPoll is how often a project's deletion is looked at.
const deletionPoll = 250 * time.Millisecond

// followDeletion shows a project's deletion as it goes, a line per phase
// (and per error met), until the project is gone.
func (c *cli) followDeletion(cl *client.Client, p *client.Project) error {
	last := ""
	for {
		if st := p.Status; st != nil && st.Deletion != nil {
			d := st.Deletion
			line := fmt.Sprintf("deleting project %s: %s (%d/%d)", p.Name, d.Phase, d.Step, d.Steps)
			if d.Error != "" {
				line += ": retrying after: " + d.Error
			}
			if line != last {
				fmt.Fprintln(c.stdout, line)
				last = line
			}
		}
		t := time.NewTimer(deletionPoll)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return c.ctx.Err()
		case <-t.C:
		}
		next, err := cl.GetProject(c.ctx, p.Name)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil
		}
		if err != nil {
			return err
		}
		p = next
	}
}

// projectGet runs "eim project get NAME".
func (c *cli) projectGet(args []string) error {
	fs := c.flagSet("eim project get", "eim project get NAME", "Show a project and its settings.")
	c.globalFlags(fs)
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("get", pos, 1, "a project name"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	p, err := cl.GetProject(c.ctx, pos[0])
	if err != nil {
		return err
	}
	return c.printProject(p)
}

// projectSet runs "eim project set NAME [flags]".
func (c *cli) projectSet(args []string) error {
	fs := c.flagSet("eim project set", "eim project set NAME [flags]",
		"Change a project's onboarding settings; flags not given keep their value.")
	c.globalFlags(fs)
	var osID, acct, configs, token string
	var auto, perHost bool
	fs.StringVar(&osID, "default-os", "", "OS profile ID of the instances zero-touch provisioning creates (turns it on); none turns it off")
	fs.StringVar(&acct, "default-local-account", "", "local account ID of those instances; none for no account")
	fs.StringVar(&configs, "default-custom-configs", "", "comma-separated custom config IDs of those instances; none for none")
	fs.StringVar(&token, "enrollment-token", "", "new: make a token unknown devices enrol with (printed once); none: refuse unknown devices")
	fs.BoolVar(&auto, "auto-onboard-enrolled", false, "onboard enrolled devices at once (else they wait, registered, for eim host onboard)")
	var interval, timeout time.Duration
	fs.DurationVar(&interval, "heartbeat-interval", 0, "how often the project's nodes send heartbeats (5s..1h; 0 = the server's default)")
	fs.DurationVar(&timeout, "heartbeat-timeout", 0, "silence after which a host is \"No Connection\" (at least two intervals; 0 = 3 intervals)")
	fs.BoolVar(&perHost, "exporter-per-host", true, "false: the exporter shows no per-host series (edge_host_*) of the project's hosts, only its aggregates")
	var policy string
	fs.StringVar(&policy, "power-policy", "", "power policy of the project's hosts whose BMC and site set none: ALWAYS_ON (power a host found off on again) or REPORT; none unsets it")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("set", pos, 1, "a project name"); err != nil {
		return err
	}
	var ch client.SettingsChange
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	id := func(v string) *string {
		if v == "none" {
			v = ""
		}
		return &v
	}
	if set["default-os"] {
		ch.DefaultOSID = id(osID)
	}
	if set["default-local-account"] {
		ch.DefaultLocalAccountID = id(acct)
	}
	if set["default-custom-configs"] {
		ids := []string{}
		if configs != "none" && configs != "" {
			for _, s := range strings.Split(configs, ",") {
				ids = append(ids, strings.TrimSpace(s))
			}
		}
		ch.DefaultCustomConfigIDs = &ids
	}
	if set["auto-onboard-enrolled"] {
		ch.AutoOnboardEnrolled = &auto
	}
	secs := func(flag string, d time.Duration) (*uint32, error) {
		if d < 0 || d%time.Second != 0 || d > 24*time.Hour {
			return nil, usagef("set: --%s %s: want whole seconds, at most 24h", flag, d)
		}
		v := uint32(d / time.Second)
		return &v, nil
	}
	if set["heartbeat-interval"] {
		if ch.HeartbeatIntervalSeconds, err = secs("heartbeat-interval", interval); err != nil {
			return err
		}
	}
	if set["heartbeat-timeout"] {
		if ch.HeartbeatTimeoutSeconds, err = secs("heartbeat-timeout", timeout); err != nil {
			return err
		}
	}
	if set["exporter-per-host"] {
		off := !perHost
		ch.ExporterPerHostOff = &off
	}
	if set["power-policy"] {
		v := strings.ToUpper(policy)
		if v == "NONE" {
			v = ""
		}
		ch.PowerPolicy = &v
	}
	if set["enrollment-token"] {
		if token != "new" && token != "none" {
			return usagef("set: --enrollment-token %q: want new or none", token)
		}
		ch.EnrollmentToken = token
	}
	if ch == (client.SettingsChange{}) {
		return usagef("set: nothing to change: give --default-os, --default-local-account, --default-custom-configs, --enrollment-token, --auto-onboard-enrolled, --heartbeat-interval, --heartbeat-timeout, --exporter-per-host or --power-policy")
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	p, err := cl.UpdateProjectSettings(c.ctx, pos[0], ch)
	if err != nil {
		return err
	}
	if err := c.printProject(p); err != nil {
		return err
	}
	if p.EnrollmentToken != "" {
		// With -o json the token is in the JSON; the notice goes to stderr
		// so that stdout stays one document.
		w := c.stdout
		if c.g.output != "table" {
			w = c.stderr
		}
		if c.g.output != "json" {
			fmt.Fprintf(w, "\nenrollment token: %s\n", p.EnrollmentToken)
		}
		fmt.Fprintf(w, "This token will not be shown again: keep it now. Boot unknown devices with eim.enroll=<token> on the kernel command line (or /boot/boot.ipxe?enroll=<token>).\n")
	}
	return nil
}

// secondsText is "30s" for 30, "" for 0.
func secondsText(s uint32) string {
	if s == 0 {
		return ""
	}
	return (time.Duration(s) * time.Second).String()
}

// printProject prints a project with its settings.
func (c *cli) printProject(p *client.Project) error {
	switch c.g.output {
	case "json":
		return c.printJSON(p)
	case "id":
		fmt.Fprintln(c.stdout, p.ID)
		return nil
	}
	or := func(v, none string) string {
		if v == "" {
			return none
		}
		return v
	}
	enrollment := "off (unknown devices are refused)"
	if p.Settings.Enrollment {
		enrollment = "on (devices with the project's enrollment token enrol)"
	}
	tw := newTab(c.stdout)
	for _, r := range [][2]string{
		{"name:", p.Name},
		{"id:", p.ID},
		{"created:", p.CreatedAt.Format(time.RFC3339)},
		{"defaultOsId:", or(p.Settings.DefaultOSID, "none (zero-touch provisioning off)")},
		{"defaultLocalAccountId:", or(p.Settings.DefaultLocalAccountID, "none")},
		{"defaultCustomConfigIds:", or(strings.Join(p.Settings.DefaultCustomConfigIDs, ","), "none")},
		{"enrollment:", enrollment},
		{"autoOnboardEnrolled:", fmt.Sprint(p.Settings.AutoOnboardEnrolled)},
		{"heartbeatInterval:", or(secondsText(p.Settings.HeartbeatIntervalSeconds), "server default")},
		{"heartbeatTimeout:", or(secondsText(p.Settings.HeartbeatTimeoutSeconds), "server default")},
		{"exporterPerHost:", map[bool]string{false: "on (unless the server's --exporter-per-host=false)", true: "off (aggregates only)"}[p.Settings.ExporterPerHostOff]},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if st := p.Status; st != nil {
		fmt.Fprintf(tw, "ready:\t%v\n", st.Ready)
		for _, cd := range st.Conditions {
			state := "ready"
			if !cd.Ready {
				state = "not ready"
			}
			fmt.Fprintf(tw, "  %s:\t%s since %s: %s\n", cd.Module, state, cd.Since.Format(time.RFC3339), cd.Message)
		}
		if d := st.Deletion; d != nil {
			left := "not counted yet"
			if d.Remaining != nil {
				left = fmt.Sprintf("%d left", *d.Remaining)
			}
			fmt.Fprintf(tw, "deleting:\tphase %s (%d/%d), %s, since %s\n", d.Phase, d.Step, d.Steps, left, d.StartedAt.Format(time.RFC3339))
			if d.Error != "" {
				fmt.Fprintf(tw, "  last error:\t%s (retrying)\n", d.Error)
			}
		}
	}
	return tw.Flush()
}
