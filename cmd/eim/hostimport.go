package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/hostcsv"
)

// "eim host import": bulk pre-registration from the CSV file of the
// original's bulk import tool (orch-host-bulk-import, and orch-cli create
// host --import-from-csv), so that a fleet list made for it works here:
//
//	Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill
//
// plus the optional columns LVMSize, CloudInitMeta and AMTEnable of the
// later tool. The whole file is checked first (syntax, duplicates, the
// references it names, hosts already registered that differ from their
// line); if any line is wrong, nothing is created and the lines are
// reported. Each line then becomes a registered host (auto-onboarded),
// placed at its site with its metadata, and, when it names an OS profile,
// its instance — or, when its host exists, is finished or left as it is
// (hostimport_line.go), so that an interrupted import is finished by
// running it again. A line refused half way is rolled back (its host
// deleted) and written to the error file; a server that went away is
// waited for, up to --wait (serverwait.go).

// importErrorColumn is the original's output column (hostcsv.ErrorColumn).
const importErrorColumn = hostcsv.ErrorColumn

// The security features an instance can ask for.
const (
	secNone  = hostcsv.SecNone
	secSBFDE = hostcsv.SecSBFDE
)

// importFile is a parsed CSV file: its header as written and its lines.
// The file's format and the checks of its lines are package hostcsv's,
// which the web UI's register page shares; an importLine carries what the
// import adds to a checked line.
type importFile struct {
	src    *hostcsv.File
	header []string
	col    map[string]int // canonical column name → index in header
	lines  []*importLine
}

// importLine is one host of the file.
type importLine struct {
	src *hostcsv.Line

	n   int      // line number in the file (1 = the header)
	raw []string // the fields as read, for the error file

	serial, uuid, osProfile, site, secure, remoteUser, metadata, lvm, customConfigs, amt string

	errs []string

	// Set by the check.
	md         eim.Metadata
	secureOn   bool
	lvmGB      uint32
	amtOn      bool
	osID       string
	siteID     string
	accountID  string
	configIDs  []string
	secFeature eim.SecurityFeature
	bmc        *eim.BMCInput // the host's BMC (nil: none), its password read
	cands      []*eim.Host   // hosts the check found by the line's UUID or serial number
	found      *eim.Host     // the line's host as the check found it, if any

	// Set by the import.
	hostID      string
	instanceID  string
	status      string // statusImported, statusCompleted, statusUnchanged
	importError string
	tried       bool
}

func (l *importLine) fail(format string, args ...any) {
	if l.src != nil {
		l.src.Fail(format, args...)
	}
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// sync takes what package hostcsv read and checked of the line.
func (l *importLine) sync() {
	s := l.src
	l.n, l.raw = s.N, s.Raw
	l.serial, l.uuid, l.osProfile, l.site, l.secure = s.Serial, s.UUID, s.OSProfile, s.Site, s.Secure
	l.remoteUser, l.metadata, l.lvm, l.customConfigs, l.amt = s.RemoteUser, s.Metadata, s.LVM, s.CustomConfigs, s.AMT
	l.errs = slices.Clone(s.Errs)
	l.md, l.secureOn, l.lvmGB, l.amtOn = s.MD, s.SecureOn, s.LVMGB, s.AMTOn
	l.osID, l.siteID, l.accountID, l.configIDs, l.secFeature = s.OSID, s.SiteID, s.AccountID, s.ConfigIDs, s.SecFeature
	l.bmc = s.BMC
}

func (f *importFile) sync() {
	for _, l := range f.lines {
		l.sync()
	}
}

// parseImportFile reads a CSV file in the bulk import format (hostcsv.Parse).
func parseImportFile(r io.Reader) (*importFile, error) {
	src, err := hostcsv.Parse(r)
	if err != nil {
		return nil, err
	}
	f := &importFile{src: src, header: src.Header, col: src.Col}
	for _, l := range src.Lines {
		f.lines = append(f.lines, &importLine{src: l})
	}
	f.sync()
	return f, nil
}

// importDefaults are the flags that fill a line's empty cells.
type importDefaults struct {
	osProfile, site, secure, remoteUser, metadata, customConfigs string
	// secrets reads the BMC columns' env:NAME and file:PATH (readSecret).
	secrets hostcsv.SecretReader
}

// readSecret reads what a BMCPassword or BMCCACert cell refers to, at
// import time: env:NAME an environment variable (set and not empty),
// file:PATH a file (at most 64 KiB).
func readSecret(ref string) (string, error) {
	kind, name, _ := strings.Cut(ref, ":")
	switch kind {
	case "env":
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		return v, nil
	case "file":
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		if fi.Size() > 64<<10 {
			return "", fmt.Errorf("%s: more than 64 KiB", name)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	return "", fmt.Errorf("%q: want env:NAME or file:PATH", kind)
}

// checkSyntax checks every line on its own and against the others
// (hostcsv's File.CheckSyntax).
func (f *importFile) checkSyntax(d importDefaults) {
	f.src.CheckSyntax(hostcsv.Defaults{OSProfile: d.osProfile, Site: d.site, Secure: d.secure, RemoteUser: d.remoteUser,
		Metadata: d.metadata, CustomConfigs: d.customConfigs, Secrets: d.secrets})
	f.sync()
}

// loadRefs lists every resource of T's kind in the project (when need),
// indexed by ID and by the names names gives; sec is the OS's security
// feature (OS resources only).
func loadRefs[T any, PT interface {
	*T
	eim.Resource
}](ctx context.Context, cl *client.Client, w *serverWait, project string, need bool, names func(PT) (ns []string, sec eim.SecurityFeature)) (*hostcsv.RefIndex, error) {
	k := PT(new(T)).ResourceKind()
	x := hostcsv.NewRefIndex(k)
	for offset := 0; need; offset += 100 {
		var items []PT
		var page *client.Page
		err := w.do(ctx, func() (err error) {
			items, page, err = client.ListOf[T, PT](ctx, cl, project, client.ListOptions{PageSize: 100, Offset: offset})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list %s resources: %w", k, err)
		}
		for _, r := range items {
			ns, sec := names(r)
			x.Add(r.Base().ResourceID, ns, sec)
		}
		if !page.HasNext || len(items) == 0 {
			break
		}
	}
	return x, nil
}

// checkRefs resolves the references of every line and finds the hosts
// already registered with the lines' UUIDs and serial numbers: a host as
// its line describes it, or half made by an earlier import, is kept (the
// import finishes it); a host that differs from its line is refused.
func (f *importFile) checkRefs(ctx context.Context, cl *client.Client, w *serverWait, project string, workers int) error {
	need := f.src.Needs()
	oses, err := loadRefs(ctx, cl, w, project, need.OS, func(o *eim.OS) ([]string, eim.SecurityFeature) {
		return []string{o.Name, o.ProfileName}, o.SecurityFeature
	})
	if err != nil {
		return err
	}
	sites, err := loadRefs(ctx, cl, w, project, need.Site, func(s *eim.Site) ([]string, eim.SecurityFeature) {
		return []string{s.Name}, ""
	})
	if err != nil {
		return err
	}
	accounts, err := loadRefs(ctx, cl, w, project, need.Account, func(a *eim.LocalAccount) ([]string, eim.SecurityFeature) {
		return []string{a.Username}, ""
	})
	if err != nil {
		return err
	}
	configs, err := loadRefs(ctx, cl, w, project, need.Config, func(c *eim.CustomConfig) ([]string, eim.SecurityFeature) {
		return []string{c.Name}, ""
	})
	if err != nil {
		return err
	}
	f.src.ResolveRefs(hostcsv.Refs{OS: oses, Site: sites, Account: accounts, Config: configs})
	f.sync()
	// Hosts already registered: the lines' serials and UUIDs, as many per
	// query as a filter may hold.
	filters, idents := f.src.IdentityFilters()
	lineOf := make(map[*hostcsv.Line]*importLine, len(f.lines))
	for _, l := range f.lines {
		lineOf[l.src] = l
	}
	var mu sync.Mutex
	err = forEach(ctx, filters, workers, func(flt string) error {
		for offset := 0; ; offset += 100 {
			var hosts []*eim.Host
			var page *client.Page
			err := w.do(ctx, func() (err error) {
				hosts, page, err = client.ListOf[eim.Host](ctx, cl, project, client.ListOptions{Filter: flt, PageSize: 100, Offset: offset})
				return err
			})
			if err != nil {
				return fmt.Errorf("look for hosts already registered: %w", err)
			}
			mu.Lock()
			for _, h := range hosts {
				for _, l := range idents.Lines(h) {
					lineOf[l].cands = append(lineOf[l].cands, h)
				}
			}
			mu.Unlock()
			if !page.HasNext || len(hosts) == 0 {
				return nil
			}
		}
	})
	if err != nil {
		return err
	}
	for _, l := range f.lines {
		h, err := l.pickHost(l.cands)
		switch {
		case err != nil:
			l.fail("%v", err)
		case h == nil || len(l.errs) > 0:
		case h.DesiredState == eim.HostStateDeleted:
			l.found = h // the import waits for it to go
		default:
			if _, err := l.compare(h); err != nil {
				l.fail("%v", err)
			}
			l.found = h
		}
	}
	return nil
}

// forEach runs fn for every item on workers goroutines; the first error
// stops the rest.
func forEach[T any](ctx context.Context, lines []T, workers int, fn func(T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(lines) {
					return
				}
				if err := fn(lines[i]); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// writeImportErrors writes the lines with errors, as read plus the error
// column, to path: fix them there and import that file.
func writeImportErrors(path string, f *importFile, bad []*importLine, msg func(*importLine) string) error {
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the error file: %w", err)
	}
	byLine := map[*hostcsv.Line]*importLine{}
	src := make([]*hostcsv.Line, len(bad))
	for i, l := range bad {
		src[i] = l.src
		byLine[l.src] = l
	}
	err = hostcsv.WriteErrors(out, f.src, src, func(l *hostcsv.Line) string { return msg(byLine[l]) })
	err = errors.Join(err, out.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the error file: %w", err)
	}
	return nil
}

// errorFileFor names the error file of an input file: hosts.csv →
// hosts.errors.csv, next to it.
func errorFileFor(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".errors" + cmp.Or(ext, ".csv")
}

const importTemplate = hostcsv.Template

func (c *cli) hostImport(args []string) error {
	fs := c.flagSet("eim host import", "eim host import FILE.csv [flags] | --template FILE.csv",
		`Register hosts in bulk from a CSV file in the format of the original's bulk import tool:
  Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata[,LVMSize,CloudInitMeta,AMTEnable],Error - do not fill
and EIM's BMC columns BMCProtocol,BMCAddress,BMCUsername,BMCPassword,BMCSystemID,BMCInsecure,BMCCACert.
Serial or UUID is required on each line; OSProfile, Site, RemoteUser and CloudInitMeta
(custom configs, joined by &) take IDs or names; Metadata is key=value pairs joined by &.
A line with BMC columns gets its BMC with its host (the oob module); BMCPassword is
env:NAME or file:PATH, read now (a password written in the file is refused), and
BMCCACert file:PATH of a PEM bundle.
The whole file is checked first, and nothing is created unless every line is right.
Each line becomes a host registered with auto-onboard, at its site, and, with an
OSProfile, its instance. Lines that fail are written to FILE.errors.csv with the reason.
A host already registered as its line describes is left as it is, and one an earlier
import left half made is finished: an interrupted import is finished by importing the
file (or its error file) again. A host that differs from its line is refused. A server
that goes away during the import is waited for, up to --wait.`)
	c.globalFlags(fs)
	var (
		d           = importDefaults{secrets: readSecret}
		template    string
		check       bool
		autoOnboard bool
		workers     int
		errFile     string
		wait        time.Duration
	)
	fs.StringVar(&template, "template", "", "write an empty file with the header to this path and stop")
	fs.BoolVar(&check, "check", false, "check the file and its references only; create nothing")
	fs.StringVar(&d.osProfile, "os-profile", "", "OS profile (ID or name) of lines that name none")
	fs.StringVar(&d.site, "site", "", "site (ID or name) of lines that name none")
	fs.StringVar(&d.secure, "secure", "", "Secure (true|false) of lines that say nothing")
	fs.StringVar(&d.remoteUser, "remote-user", "", "local account (ID or username) of lines that name none")
	fs.StringVar(&d.customConfigs, "custom-config", "", "custom configs (IDs or names, joined by &) of lines that name none")
	fs.StringVar(&d.metadata, "metadata", "", "metadata (key=value&…) of lines that have none")
	fs.BoolVar(&autoOnboard, "auto-onboard", true, "onboard each host as soon as it calls home")
	fs.IntVar(&workers, "workers", 8, "requests in flight")
	fs.StringVar(&errFile, "errors", "", "where to write the lines that fail (default FILE.errors.csv)")
	fs.DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for a server that went away (restarted, unreachable, unavailable) before stopping; 0 stops at once")
	pos, err := c.parseAll(fs, args)
	if err != nil {
		return err
	}
	if template != "" {
		if len(pos) != 0 {
			return usagef("import: --template takes no FILE")
		}
		if _, err := os.Stat(template); err == nil {
			return fmt.Errorf("--template: %s exists; not overwriting it", template)
		}
		if err := os.WriteFile(template, []byte(importTemplate), 0o644); err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		fmt.Fprintf(c.stdout, "wrote %s: add a line per host (Serial and/or UUID; the other columns optional)\n", template)
		return nil
	}
	if err := wantArgs("import", pos, 1, "one CSV file"); err != nil {
		return err
	}
	if workers < 1 || workers > 64 {
		return usagef("--workers %d: want 1 to 64", workers)
	}
	if wait < 0 {
		return usagef("--wait %s: want a duration of 0 or more", wait)
	}
	path := pos[0]
	if errFile == "" {
		errFile = errorFileFor(path)
	}
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	f, err := parseImportFile(in)
	in.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(f.lines) == 0 {
		return fmt.Errorf("%s: no hosts in the file", path)
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	w := &serverWait{bound: wait, out: c.stderr, now: time.Now}
	f.checkSyntax(d)
	if err := f.checkRefs(c.ctx, cl, w, c.g.project, workers); err != nil {
		return err
	}
	var bad []*importLine
	for _, l := range f.lines {
		if len(l.errs) > 0 {
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 {
		for _, l := range bad {
			fmt.Fprintf(c.stderr, "%s:%d: %s\n", path, l.n, strings.Join(l.errs, "; "))
		}
		if err := writeImportErrors(errFile, f, bad, func(l *importLine) string { return strings.Join(l.errs, "; ") }); err != nil {
			return err
		}
		return fmt.Errorf("%d of %d lines are wrong (listed above, and in %s); nothing was created", len(bad), len(f.lines), errFile)
	}
	if check {
		fmt.Fprintf(c.stdout, "%s: %d hosts, every line right%s\n", path, len(f.lines), existing(f.lines))
		return nil
	}

	im := &importer{cl: cl, project: c.g.project, autoOnboard: autoOnboard, wait: w}
	var done atomic.Int64
	interrupted := forEach(c.ctx, f.lines, workers, func(l *importLine) error {
		err := im.importOne(c.ctx, l)
		l.tried = true
		if n := done.Add(1); n%500 == 0 {
			fmt.Fprintf(c.stderr, "imported %d/%d\n", n, len(f.lines))
		}
		return cmp.Or(err, c.ctx.Err())
	})
	for _, l := range f.lines {
		if !l.tried {
			l.importError = "not imported: the import was interrupted"
			if errors.Is(interrupted, errServerGone) {
				l.importError = "not imported: the server did not come back"
			}
		}
		if l.importError != "" {
			bad = append(bad, l)
		}
	}
	if err := c.printImport(f.lines); err != nil {
		return err
	}
	count := map[string]int{}
	for _, l := range f.lines {
		if l.importError == "" && l.tried {
			count[l.status]++
		}
	}
	if count[statusCompleted]+count[statusUnchanged] > 0 {
		fmt.Fprintf(c.stderr, "%d hosts imported, %d finished (left half made by an earlier import), %d unchanged (already imported)\n",
			count[statusImported], count[statusCompleted], count[statusUnchanged])
	}
	if len(bad) > 0 {
		for _, l := range bad {
			fmt.Fprintf(c.stderr, "%s:%d: %s\n", path, l.n, l.importError)
		}
		if err := writeImportErrors(errFile, f, bad, func(l *importLine) string { return l.importError }); err != nil {
			return err
		}
		if errors.Is(interrupted, errServerGone) {
			return fmt.Errorf("stopped: %v; %d of %d hosts not imported (listed above, and in %s): import the file, or that one, again to finish them", interrupted, len(bad), len(f.lines), errFile)
		}
		if interrupted != nil {
			return fmt.Errorf("interrupted (%v): %d of %d hosts not imported (listed above, and in %s): import the file, or that one, again to finish them", interrupted, len(bad), len(f.lines), errFile)
		}
		return fmt.Errorf("%d of %d hosts failed (listed above, and in %s, which can be imported again once fixed)", len(bad), len(f.lines), errFile)
	}
	return nil
}

// importResult is what one line became, as `-o json` prints it.
type importResult struct {
	Line       int    `json:"line"`
	Serial     string `json:"serialNumber,omitempty"`
	UUID       string `json:"uuid,omitempty"`
	HostID     string `json:"hostId,omitempty"`
	InstanceID string `json:"instanceId,omitempty"`
	Status     string `json:"status,omitempty"`
	Error      string `json:"error,omitempty"`
}

// printImport prints what each line became.
func (c *cli) printImport(lines []*importLine) error {
	var rs []importResult
	for _, l := range lines {
		r := importResult{l.n, l.serial, l.uuid, l.hostID, l.instanceID, l.status, l.importError}
		if r.Error != "" {
			r.Status = ""
		}
		rs = append(rs, r)
	}
	switch c.g.output {
	case "json":
		return c.printJSON(rs)
	case "id":
		for _, r := range rs {
			if r.HostID != "" {
				fmt.Fprintln(c.stdout, r.HostID)
			}
		}
		return nil
	}
	rows := make([][]string, len(rs))
	for i, r := range rs {
		rows[i] = []string{strconv.Itoa(r.Line), r.Serial, r.UUID, r.HostID, r.InstanceID, r.Status, r.Error}
	}
	return c.printTable([]string{"LINE", "SERIAL", "UUID", "HOST", "INSTANCE", "STATUS", "ERROR"}, rows)
}

// existing says how many lines' hosts the check found already made, in
// full or in part.
func existing(lines []*importLine) string {
	var complete, partial int
	for _, l := range lines {
		if l.found == nil || l.found.DesiredState == eim.HostStateDeleted {
			continue
		}
		if g, err := l.compare(l.found); err == nil && g.none() {
			complete++
		} else {
			partial++
		}
	}
	if complete+partial == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d already imported, %d half made by an earlier import, to finish)", complete, partial)
}
