package main

import (
	"cmp"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// eim enrollment …: the enrollment lobby (docs/enrollment.md).

const enrollmentUsage = `Usage:
  eim enrollment list [--state PENDING|APPROVED|DENIED] [--serial S] [--uuid U] [--page-size N] [--offset N]
  eim enrollment get ID
  eim enrollment approve ID [--name N] [--site SITE_ID] [--label key=value …]
  eim enrollment deny ID [--reason TEXT]
  eim enrollment delete ID
  eim enrollment rules list
  eim enrollment rules create --name N --kind SERIAL|LABELS|TOKEN|ANY [--serial S …]
                              [--match key=value …] [--site SITE_ID] [--label key=value …]
  eim enrollment rules delete ID

Unknown devices that call home with the project's enrollment token wait in its
lobby as enrollment requests. approve creates the device's host (named, at the
site, with the labels as its metadata); the device onboards at its next call.
deny tells the device so, with the reason; it backs off. Rules approve matching
requests without a person: SERIAL (--serial, repeatable), LABELS (--match: every
label the device reports), TOKEN (a site's own token, printed once: devices
booted with it are approved at --site), ANY (every device with the project's token).
`

func (c *cli) enrollment(args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(c.stdout, enrollmentUsage)
		if len(args) == 0 {
			return usagef("enrollment: a verb is required (list, get, approve, deny, delete, rules)")
		}
		return nil
	}
	switch verb, rest := args[0], args[1:]; verb {
	case "list":
		return c.enrollmentList(rest)
	case "get", "delete":
		return c.enrollmentOne(verb, rest)
	case "approve":
		return c.enrollmentApprove(rest)
	case "deny":
		return c.enrollmentDeny(rest)
	case "rules":
		return c.enrollmentRules(rest)
	default:
		return usagef("enrollment: unknown verb %q (list, get, approve, deny, delete, rules)", verb)
	}
}

// labelsFlag collects repeated key=value flags.
type labelsFlag struct{ md *eim.Metadata }

func (l labelsFlag) String() string {
	if l.md == nil {
		return ""
	}
	var parts []string
	for _, it := range *l.md {
		parts = append(parts, it.Key+"="+it.Value)
	}
	return strings.Join(parts, ",")
}

func (l labelsFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value", v)
	}
	*l.md = append(*l.md, eim.MetadataItem{Key: k, Value: val})
	return nil
}

type listFlag struct{ s *[]string }

func (l listFlag) String() string {
	if l.s == nil {
		return ""
	}
	return strings.Join(*l.s, ",")
}
func (l listFlag) Set(v string) error { *l.s = append(*l.s, v); return nil }

// enrollmentArgs parses "eim enrollment VERB [ID]" with extra flags.
func (c *cli) enrollmentArgs(verb string, args []string, ids int, extra func(*flag.FlagSet)) ([]string, error) {
	use := "eim enrollment " + verb
	if ids > 0 {
		use += " ID"
	}
	fs := c.flagSet("eim enrollment "+verb, use, "")
	c.globalFlags(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return nil, err
	}
	if ids > 0 {
		if err := wantArgs("enrollment "+verb, pos, ids, "one ID"); err != nil {
			return nil, err
		}
	} else if len(pos) > 0 {
		return nil, usagef("enrollment %s: unexpected arguments %v", verb, pos)
	}
	return pos, nil
}

func (c *cli) enrollmentList(args []string) error {
	var o client.EnrollmentListOptions
	if _, err := c.enrollmentArgs("list", args, 0, func(fs *flag.FlagSet) {
		fs.StringVar(&o.State, "state", "", "PENDING, APPROVED or DENIED")
		fs.StringVar(&o.SerialNumber, "serial", "", "only the device with this serial number")
		fs.StringVar(&o.UUID, "uuid", "", "only the device with this UUID")
		fs.IntVar(&o.PageSize, "page-size", 20, "requests per page (1 to 100)")
		fs.IntVar(&o.Offset, "offset", 0, "requests to skip")
	}); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	page, err := cl.ListEnrollmentRequests(c.ctx, c.g.project, o)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		return c.printJSON(page)
	case "id":
		for _, r := range page.EnrollmentRequests {
			fmt.Fprintln(c.stdout, r.ID)
		}
		return nil
	}
	return c.printRequests(page.EnrollmentRequests)
}

func (c *cli) printRequests(rs []*client.EnrollmentRequest) error {
	var rows [][]string
	for _, r := range rs {
		labels := make([]string, 0, len(r.Labels))
		for _, it := range r.Labels {
			labels = append(labels, it.Key+"="+it.Value)
		}
		rows = append(rows, []string{r.ID, string(r.State), cmp.Or(r.SerialNumber, "-"), cmp.Or(r.UUID, "-"), cmp.Or(strings.Join(labels, ","), "-"),
			strconv.FormatBool(r.Installed), strconv.FormatInt(r.Attempts, 10), r.LastSeen.Format("2006-01-02 15:04:05"), cmp.Or(r.HostID, "-"), cmp.Or(r.Reason, "")})
	}
	return c.printTable([]string{"ID", "STATE", "SERIAL", "UUID", "LABELS", "INSTALLED", "ATTEMPTS", "LAST SEEN", "HOST", "REASON"}, rows)
}

func (c *cli) printRequest(r *client.EnrollmentRequest) error {
	switch c.g.output {
	case "json":
		return c.printJSON(r)
	case "id":
		fmt.Fprintln(c.stdout, r.ID)
		return nil
	}
	return c.printRequests([]*client.EnrollmentRequest{r})
}

func (c *cli) enrollmentOne(verb string, args []string) error {
	pos, err := c.enrollmentArgs(verb, args, 1, nil)
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	if verb == "delete" {
		if err := cl.DeleteEnrollmentRequest(c.ctx, c.g.project, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", pos[0])
		return nil
	}
	r, err := cl.GetEnrollmentRequest(c.ctx, c.g.project, pos[0])
	if err != nil {
		return err
	}
	return c.printRequest(r)
}

func (c *cli) enrollmentApprove(args []string) error {
	var a client.Approval
	pos, err := c.enrollmentArgs("approve", args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&a.Name, "name", "", "the host's name (default: the serial number or UUID)")
		fs.StringVar(&a.SiteID, "site", "", "the host's site")
		fs.Var(labelsFlag{&a.Metadata}, "label", "key=value: a label of the host (its metadata; repeatable)")
	})
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	r, err := cl.ApproveEnrollment(c.ctx, c.g.project, pos[0], a)
	if err != nil {
		return err
	}
	return c.printRequest(r)
}

func (c *cli) enrollmentDeny(args []string) error {
	var reason string
	pos, err := c.enrollmentArgs("deny", args, 1, func(fs *flag.FlagSet) {
		fs.StringVar(&reason, "reason", "", "what the device is told")
	})
	if err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	r, err := cl.DenyEnrollment(c.ctx, c.g.project, pos[0], reason)
	if err != nil {
		return err
	}
	return c.printRequest(r)
}

func (c *cli) enrollmentRules(args []string) error {
	if len(args) == 0 {
		return usagef("enrollment rules: a verb is required (list, create, delete)")
	}
	verb, rest := args[0], args[1:]
	cl := func() (*client.Client, error) { return c.clientFor() }
	switch verb {
	case "list":
		if _, err := c.enrollmentArgs("rules list", rest, 0, nil); err != nil {
			return err
		}
		api, err := cl()
		if err != nil {
			return err
		}
		rules, err := api.ListEnrollmentRules(c.ctx, c.g.project)
		if err != nil {
			return err
		}
		return c.printRules(rules)
	case "create":
		var in client.RuleInput
		if _, err := c.enrollmentArgs("rules create", rest, 0, func(fs *flag.FlagSet) {
			fs.StringVar(&in.Name, "name", "", "the rule's name")
			fs.StringVar(&in.Kind, "kind", "", "SERIAL, LABELS, TOKEN or ANY")
			fs.Var(listFlag{&in.SerialNumbers}, "serial", "SERIAL: a serial number to approve (repeatable)")
			fs.Var(labelsFlag{&in.MatchLabels}, "match", "LABELS: key=value the device must report (repeatable)")
			fs.StringVar(&in.SiteID, "site", "", "the site of the hosts it approves (required for TOKEN)")
			fs.Var(labelsFlag{&in.Metadata}, "label", "key=value: a label of the hosts it approves (repeatable)")
		}); err != nil {
			return err
		}
		api, err := cl()
		if err != nil {
			return err
		}
		r, err := api.CreateEnrollmentRule(c.ctx, c.g.project, in)
		if err != nil {
			return err
		}
		if r.Token != "" && c.g.output == "table" {
			fmt.Fprintf(c.stderr, "the site's enrollment token (shown once): %s\n", r.Token)
		}
		return c.printRules([]*client.EnrollmentRule{r})
	case "delete":
		pos, err := c.enrollmentArgs("rules delete", rest, 1, nil)
		if err != nil {
			return err
		}
		api, err := cl()
		if err != nil {
			return err
		}
		if err := api.DeleteEnrollmentRule(c.ctx, c.g.project, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", pos[0])
		return nil
	}
	return usagef("enrollment rules: unknown verb %q (list, create, delete)", verb)
}

func (c *cli) printRules(rules []*client.EnrollmentRule) error {
	switch c.g.output {
	case "json":
		if len(rules) == 1 {
			return c.printJSON(rules[0])
		}
		return c.printJSON(rules)
	case "id":
		for _, r := range rules {
			fmt.Fprintln(c.stdout, r.ID)
		}
		return nil
	}
	var rows [][]string
	for _, r := range rules {
		match := ""
		switch r.Kind {
		case eim.RuleSerial:
			match = strings.Join(r.SerialNumbers, ",")
		case eim.RuleLabels:
			match = labelsFlag{&r.MatchLabels}.String()
		case eim.RuleToken:
			match = "the site's token"
		case eim.RuleAny:
			match = "every device with the project's token"
		}
		rows = append(rows, []string{r.ID, r.Name, string(r.Kind), match, cmp.Or(r.SiteID, "-"), cmp.Or(labelsFlag{&r.Metadata}.String(), "-")})
	}
	return c.printTable([]string{"ID", "NAME", "KIND", "MATCHES", "SITE", "LABELS"}, rows)
}
