package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// resource runs "eim <noun> <verb> …".
func (c *cli) resource(n *noun, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, n.usage())
		return nil
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "list":
		return c.resList(n, rest)
	case "get":
		return c.resGet(n, rest)
	case "create":
		if n.noCreate {
			return usagef("%s: the API has no create for %s; the maintenance module records them", n.name, n.name)
		}
		return c.resCreate(n, rest)
	case "update", "patch":
		if n.noUpdate {
			return usagef("%s: the API has no %s for %s; delete and create it again", n.name, verb, n.name)
		}
		return c.resUpdate(n, verb, rest)
	case "delete":
		return c.resDelete(n, rest)
	}
	if n.kind == eim.KindHost {
		switch verb {
		case "register":
			return c.hostRegister(rest)
		case "import":
			return c.hostImport(rest)
		case "onboard":
			return c.hostOnboard(rest)
		case "invalidate":
			return c.hostInvalidate(rest)
		case "summary":
			return c.hostSummary(rest)
		case "bmc":
			return c.hostBMC(rest)
		case "power":
			return c.hostPower(rest)
		case "jobs":
			return c.hostJobs(rest)
		case "provision":
			return c.hostProvision(rest)
		case "attestation-key":
			return c.hostAttestationKey(rest)
		}
	}
	if n.kind == eim.KindInstance {
		switch verb {
		case "log":
			return c.instanceLog(rest)
		case "reprovision":
			return c.instanceReprovision(rest)
		case "recovery-key":
			return c.instanceRecoveryKey(rest)
		case "updates-summary":
			return c.instanceUpdatesSummary(rest)
		}
	}
	return usagef("%s: unknown verb %q (run \"eim %s help\")", n.name, verb, n.name)
}

func (n *noun) usage() string {
	var b strings.Builder
	switch n.kind {
	case eim.KindTelemetryGroup:
		fmt.Fprintf(&b, "Usage:\n  eim %s list [--order-by O] [--page-size N] [--offset N]\n", n.name)
	case eim.KindTelemetryProfile:
		fmt.Fprintf(&b, "Usage:\n  eim %s list [--instance ID | --site ID | --region ID [--show-inherited]] [--order-by O] [--page-size N] [--offset N]\n", n.name)
	default:
		fmt.Fprintf(&b, "Usage:\n  eim %s list [--filter F] [--order-by O] [--page-size N] [--offset N]\n", n.name)
	}
	fmt.Fprintf(&b, "  eim %s get ID\n", n.name)
	if !n.noCreate {
		fmt.Fprintf(&b, "  eim %s create [flags] [--file F.json | -f -]\n", n.name)
	}
	if !n.noUpdate {
		fmt.Fprintf(&b, "  eim %s update ID --file F.json\n  eim %s patch ID --set field=value …\n", n.name, n.name)
	}
	fmt.Fprintf(&b, "  eim %s delete ID …\n", n.name)
	if n.kind == eim.KindHost {
		b.WriteString("  eim host register --serial S | --uuid U [--name N] [--auto-onboard] [--enable-vpro]\n")
		b.WriteString("  eim host onboard ID\n  eim host invalidate ID [--note N]\n  eim host summary [--filter F]\n")
		b.WriteString("  eim host bmc set|get|delete ID …   the host's BMC (\"eim host bmc help\")\n")
		b.WriteString("  eim host power ID on|off|reset|cycle [--boot pxe --once]   power through the host's BMC (a job)\n")
		b.WriteString("  eim host jobs ID [--page-size N] [--offset N]   the host's power jobs, newest first\n")
		b.WriteString("  eim host provision ID   Day 0 through the host's BMC: network boot, on (or reset), until it calls home\n")
		b.WriteString("  eim host attestation-key get|reset ID   the TPM keys pinned to the host; reset after a TPM replacement (admins; audited)\n")
	}
	if n.kind == eim.KindInstance {
		b.WriteString("  eim instance log ID [-f]   provisioning log (-f: follow until it ends)\n")
		b.WriteString("  eim instance reprovision ID [-f]   retry a failed provisioning (-f: follow it)\n")
		b.WriteString("  eim instance recovery-key ID   the recovery key of its encrypted disk (admins; audited)\n")
		b.WriteString("  eim instance updates-summary [--filter F]   instances by OS update state, per OS profile\n")
	}
	if len(n.flags) > 0 {
		b.WriteString("\nCreate flags:\n")
	}
	for _, f := range n.flags {
		fmt.Fprintf(&b, "  --%-18s %s (%s)\n", f.flag, f.usage, f.field)
	}
	b.WriteString("\nGlobal flags: --server, --token-file, --project, -o table|json|id (see \"eim help\")\n")
	return b.String()
}

func (c *cli) resList(n *noun, args []string) error {
	fs := c.flagSet("eim "+n.name+" list", "eim "+n.name+" list [flags]", "")
	c.globalFlags(fs)
	var o client.ListOptions
	fs.StringVar(&o.Filter, "filter", "", "AIP-160 filter, e.g. 'name=\"edge-*\"'")
	fs.StringVar(&o.OrderBy, "order-by", "", "AIP-132 order, e.g. 'name desc'")
	fs.IntVar(&o.PageSize, "page-size", 0, "items per page, 1..100 (server default 20)")
	fs.IntVar(&o.Offset, "offset", 0, "items to skip")
	if n.kind == eim.KindTelemetryProfile {
		o.Params = url.Values{}
		for _, p := range []struct{ flag, param, usage string }{
			{"instance", "instanceId", "only profiles targeting this instance"},
			{"site", "siteId", "only profiles targeting this site"},
			{"region", "regionId", "only profiles targeting this region"},
		} {
			fs.Func(p.flag, p.usage+" (with --show-inherited, also those reaching it from above)", func(v string) error {
				o.Params.Set(p.param, v)
				return nil
			})
		}
		fs.BoolFunc("show-inherited", "add the profiles inherited down the location tree", func(v string) error {
			o.Params.Set("showInherited", v)
			return nil
		})
	}
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("list", pos, 0, "no arguments"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	page, err := cl.ListAt(c.ctx, c.g.project, n.collection(), o)
	if err != nil {
		return err
	}
	switch c.g.output {
	case "json":
		env := map[string]any{n.collection().Plural: page.Items, "totalElements": page.Total, "hasNext": page.HasNext}
		return c.printJSON(env)
	case "id":
		return c.printIDs(page.Items)
	}
	if err := c.printRows(n, page.Items); err != nil {
		return err
	}
	if page.HasNext {
		fmt.Fprintf(c.stderr, "(%d of %d shown; next page: --offset %d)\n", len(page.Items), page.Total, o.Offset+len(page.Items))
	}
	return nil
}

func (c *cli) printIDs(items []json.RawMessage) error {
	for _, raw := range items {
		var o obj
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		fmt.Fprintln(c.stdout, o.str("resourceId"))
	}
	return nil
}

func (c *cli) printRows(n *noun, items []json.RawMessage) error {
	headers := make([]string, len(n.cols))
	for i, col := range n.cols {
		headers[i] = col.header
	}
	rows := make([][]string, 0, len(items))
	for _, raw := range items {
		var o obj
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		row := make([]string, len(n.cols))
		for i, col := range n.cols {
			row[i] = col.cell(o)
		}
		rows = append(rows, row)
	}
	return c.printTable(headers, rows)
}

// printOne prints a single resource: JSON, its ID, or its fields one per
// line in schema order.
func (c *cli) printOne(n *noun, raw json.RawMessage) error {
	switch c.g.output {
	case "json":
		return c.printJSON(raw)
	case "id":
		return c.printIDs([]json.RawMessage{raw})
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	var rows [][]string
	seen := map[string]bool{}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		v := o.str(name)
		if _, isObj := o[name].(map[string]any); isObj || v == "" || v == "0" || strings.HasSuffix(v, "_UNSPECIFIED") {
			return // zero values are noise here; -o json shows everything
		}
		rows = append(rows, []string{name + ":", v})
	}
	add("resourceId")
	for _, f := range eim.SchemaOf(n.kind).Fields {
		if f.Name != "" && !f.Alias {
			add(f.Name)
		}
	}
	for _, extra := range append([]string{"inheritedMetadata"}, n.extra...) {
		add(extra)
	}
	if ts, ok := o["timestamps"].(map[string]any); ok {
		for _, k := range []string{"createdAt", "updatedAt"} {
			if v, ok := ts[k].(string); ok {
				rows = append(rows, []string{k + ":", v})
			}
		}
	}
	tw := newTab(c.stdout)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

func (c *cli) resGet(n *noun, args []string) error {
	fs := c.flagSet("eim "+n.name+" get", "eim "+n.name+" get ID", "")
	c.globalFlags(fs)
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("get", pos, 1, "one ID"); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := cl.GetAt(c.ctx, c.g.project, n.collection(), pos[0], &raw); err != nil {
		return err
	}
	return c.printOne(n, raw)
}

func (c *cli) resCreate(n *noun, args []string) error {
	fs := c.flagSet("eim "+n.name+" create", "eim "+n.name+" create [flags]", "")
	c.globalFlags(fs)
	ff := newFieldFlags(n.kind)
	for _, spec := range n.flags {
		fs.Var(&fieldFlag{ff: ff, spec: spec}, spec.flag, spec.usage+" ("+spec.field+")")
	}
	fs.Var(setFlags{ff}, "set", "any writable field: field=value (repeatable)")
	var file string
	fs.StringVar(&file, "file", "", "JSON body to start from (- for stdin); flags override its fields")
	fs.StringVar(&file, "f", "", "short for --file")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("create", pos, 0, "no arguments (fields are flags)"); err != nil {
		return err
	}
	b := body{}
	if file != "" {
		if b, err = readBodyFile(file, c.readStdin); err != nil {
			return err
		}
	}
	if err := ff.into(b); err != nil {
		return err
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := cl.CreateAt(c.ctx, c.g.project, n.collection(), b, &raw); err != nil {
		return err
	}
	if n.kind == eim.KindRegion {
		c.warnSameName(cl, n, raw)
	}
	if c.g.output == "table" {
		return c.printRows(n, []json.RawMessage{raw})
	}
	return c.printOne(n, raw)
}

// warnSameName writes to stderr which other regions have the name of the
// one just created: the API allows it (as the original's does), but a
// second "berlin" is more often a slip than a wish. A failure to look is
// not the command's failure: the region is made.
func (c *cli) warnSameName(cl *client.Client, n *noun, raw json.RawMessage) {
	var made struct{ ResourceID, Name string }
	if json.Unmarshal(raw, &made) != nil || made.Name == "" {
		return
	}
	// Names hold no quote (eim.ValidName): the filter needs no escaping.
	page, err := cl.ListAt(c.ctx, c.g.project, n.collection(), client.ListOptions{Filter: fmt.Sprintf("name=%q", made.Name), PageSize: 100})
	if err != nil {
		return
	}
	var others []string
	for _, it := range page.Items {
		var o struct{ ResourceID, Name string }
		if json.Unmarshal(it, &o) == nil && o.Name == made.Name && o.ResourceID != made.ResourceID {
			others = append(others, o.ResourceID)
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(c.stderr, "warning: another region is also named %q (%s); names need not be unique, IDs tell them apart\n", made.Name, strings.Join(others, ", "))
	}
}

func (c *cli) resUpdate(n *noun, verb string, args []string) error {
	fs := c.flagSet("eim "+n.name+" "+verb, "eim "+n.name+" "+verb+" ID [flags]", "")
	c.globalFlags(fs)
	ff := newFieldFlags(n.kind)
	fs.Var(setFlags{ff}, "set", "field=value to change (repeatable)")
	var file string
	fs.StringVar(&file, "file", "", "JSON body (- for stdin)")
	fs.StringVar(&file, "f", "", "short for --file")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(verb, pos, 1, "one ID"); err != nil {
		return err
	}
	b := body{}
	if file != "" {
		if b, err = readBodyFile(file, c.readStdin); err != nil {
			return err
		}
	} else if verb == "update" {
		return usagef("update: --file is required (update replaces every writable field; use patch --set to change some)")
	}
	if err := ff.into(b); err != nil {
		return err
	}
	if len(b) == 0 {
		return usagef("%s: nothing to change (use --set field=value or --file)", verb)
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if verb == "update" {
		err = cl.UpdateAt(c.ctx, c.g.project, n.collection(), pos[0], b, &raw)
	} else {
		err = cl.PatchAt(c.ctx, c.g.project, n.collection(), pos[0], b, &raw)
	}
	if err != nil {
		return err
	}
	return c.printOne(n, raw)
}

func (c *cli) resDelete(n *noun, args []string) error {
	fs := c.flagSet("eim "+n.name+" delete", "eim "+n.name+" delete ID …", "")
	c.globalFlags(fs)
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("delete: want at least one ID")
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	for _, id := range slices.Compact(pos) {
		if err := cl.DeleteAt(c.ctx, c.g.project, n.collection(), id); err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
		fmt.Fprintf(c.stdout, "deleted %s\n", id)
	}
	return nil
}

func (c *cli) readStdin() ([]byte, error) { return io.ReadAll(c.stdin) }
