package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/filter"
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

// importColumns are the columns a file may have, by their canonical
// names; the first seven are the original tool's.
var importColumns = []string{"Serial", "UUID", "OSProfile", "Site", "Secure", "RemoteUser", "Metadata", "LVMSize", "CloudInitMeta", "AMTEnable"}

// importErrorColumn is the original's output column; on input it is
// ignored, so that an error file can be fixed and imported again.
const importErrorColumn = "Error - do not fill"

// unsupportedColumns are columns of the later tool for features EIM does
// not have: accepted when empty, refused on a line that fills them.
var unsupportedColumns = []string{"K8sEnable", "K8sClusterTemplate", "K8sConfig"}

var (
	reImportSerial = regexp.MustCompile(`^[A-Za-z0-9]{5,20}$`)
	reImportUUID   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// The security features an instance can ask for.
const (
	secNone  eim.SecurityFeature = "SECURITY_FEATURE_NONE"
	secSBFDE eim.SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"
)

// maxImportLines bounds a file: far more than one site's fleet, small
// enough to check in memory.
const maxImportLines = 100000

// importFile is a parsed CSV file: its header as written and its lines.
type importFile struct {
	header []string
	col    map[string]int // canonical column name → index in header
	lines  []*importLine
}

// importLine is one host of the file.
type importLine struct {
	n   int      // line number in the file (1 = the header)
	raw []string // the fields as read, for the error file

	serial, uuid, osProfile, site, secure, remoteUser, metadata, lvm, customConfigs, amt string
	unsupported                                                                          []string // filled columns EIM does not support

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
	cands      []*eim.Host // hosts the check found by the line's UUID or serial number
	found      *eim.Host   // the line's host as the check found it, if any

	// Set by the import.
	hostID      string
	instanceID  string
	status      string // statusImported, statusCompleted, statusUnchanged
	importError string
	tried       bool
}

func (l *importLine) fail(format string, args ...any) {
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// parseImportFile reads a CSV file in the bulk import format. Errors of
// the file as a whole (no header, unknown columns, broken CSV) are
// returned; errors of a line are kept on the line.
func parseImportFile(r io.Reader) (*importFile, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // the original's files leave trailing fields out
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the file is empty: want a header line starting " + strings.Join(importColumns[:7], ","))
	}
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	f := &importFile{header: header, col: map[string]int{}}
	known := map[string]string{}
	for _, c := range append(append([]string{importErrorColumn, "Error"}, importColumns...), unsupportedColumns...) {
		known[strings.ToLower(c)] = c
	}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) // a spreadsheet's byte-order mark
		name, ok := known[strings.ToLower(h)]
		if !ok {
			return nil, fmt.Errorf("line 1: unknown column %q (the columns are %s)", h, strings.Join(importColumns, ", "))
		}
		if name == "Error" {
			name = importErrorColumn
		}
		if _, dup := f.col[name]; dup {
			return nil, fmt.Errorf("line 1: column %q appears twice", h)
		}
		f.col[name] = i
	}
	if _, ok := f.col["Serial"]; !ok {
		return nil, errors.New("line 1: no Serial column (the header starts " + strings.Join(importColumns[:7], ",") + ")")
	}
	if _, ok := f.col["UUID"]; !ok {
		return nil, errors.New("line 1: no UUID column (the header starts " + strings.Join(importColumns[:7], ",") + ")")
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		if blank(rec) {
			continue
		}
		if len(f.lines) == maxImportLines {
			return nil, fmt.Errorf("line %d: more than %d hosts in one file; split it", line, maxImportLines)
		}
		l := &importLine{n: line, raw: rec}
		get := func(name string) string {
			if i, ok := f.col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		l.serial, l.uuid, l.osProfile, l.site = get("Serial"), get("UUID"), get("OSProfile"), get("Site")
		l.secure, l.remoteUser, l.metadata = get("Secure"), get("RemoteUser"), get("Metadata")
		l.lvm, l.customConfigs, l.amt = get("LVMSize"), get("CloudInitMeta"), get("AMTEnable")
		for _, c := range unsupportedColumns {
			if get(c) != "" {
				l.unsupported = append(l.unsupported, c)
			}
		}
		if len(rec) > len(header) {
			l.fail("%d fields, the header has %d", len(rec), len(header))
		}
		f.lines = append(f.lines, l)
	}
	return f, nil
}

func blank(rec []string) bool {
	for _, s := range rec {
		if strings.TrimSpace(s) != "" {
			return false
		}
	}
	return true
}

// importDefaults are the flags that fill a line's empty cells.
type importDefaults struct {
	osProfile, site, secure, remoteUser, metadata, customConfigs string
}

// checkSyntax checks every line on its own and against the others
// (duplicate serials and UUIDs, compared case-insensitively).
func (f *importFile) checkSyntax(d importDefaults) {
	serials, uuids := map[string]int{}, map[string]int{}
	for _, l := range f.lines {
		fill := func(v *string, def string) {
			if *v == "" {
				*v = def
			}
		}
		fill(&l.osProfile, d.osProfile)
		fill(&l.site, d.site)
		fill(&l.secure, d.secure)
		fill(&l.remoteUser, d.remoteUser)
		fill(&l.metadata, d.metadata)
		fill(&l.customConfigs, d.customConfigs)

		for _, c := range l.unsupported {
			l.fail("%s: not supported by EIM (leave it empty)", c)
		}
		switch {
		case l.serial == "" && l.uuid == "":
			l.fail("Serial or UUID is required")
		case l.serial != "" && !reImportSerial.MatchString(l.serial):
			l.fail("Serial %q: want 5 to 20 letters and digits", l.serial)
		case l.serial != "" && eim.PlaceholderSerial(l.serial):
			l.fail("Serial %q is a vendor placeholder that identifies no machine; give the UUID instead", l.serial)
		}
		if l.uuid != "" {
			switch {
			case !reImportUUID.MatchString(l.uuid):
				l.fail("UUID %q: want the RFC 4122 form 8-4-4-4-12 hex digits", l.uuid)
			case eim.PlaceholderUUID(l.uuid):
				l.fail("UUID %q is a firmware placeholder that identifies no machine", l.uuid)
			}
		}
		if l.serial != "" {
			k := strings.ToLower(l.serial)
			if prev, ok := serials[k]; ok {
				l.fail("Serial %q is also on line %d", l.serial, prev)
			} else {
				serials[k] = l.n
			}
		}
		if l.uuid != "" {
			k := strings.ToLower(l.uuid)
			if prev, ok := uuids[k]; ok {
				l.fail("UUID %q is also on line %d", l.uuid, prev)
			} else {
				uuids[k] = l.n
			}
		}
		if b, err := parseImportBool(l.secure); err != nil {
			l.fail("Secure: %v", err)
		} else {
			l.secureOn = b
		}
		if b, err := parseImportBool(l.amt); err != nil {
			l.fail("AMTEnable: %v", err)
		} else {
			l.amtOn = b
		}
		if l.lvm != "" {
			n, err := strconv.ParseUint(l.lvm, 10, 32)
			if err != nil {
				l.fail("LVMSize %q: want a size in GB (a whole number)", l.lvm)
			}
			l.lvmGB = uint32(n)
		}
		md, err := parseImportMetadata(l.metadata)
		if err != nil {
			l.fail("Metadata: %v", err)
		}
		l.md = md
		if l.secureOn && l.osProfile == "" {
			l.fail("Secure: true needs an OSProfile")
		}
		if (l.remoteUser != "" || l.customConfigs != "") && l.osProfile == "" {
			l.fail("RemoteUser and CloudInitMeta apply to the instance: they need an OSProfile")
		}
	}
}

func parseImportBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false", "no", "0":
		return false, nil
	case "true", "yes", "1":
		return true, nil
	}
	return false, fmt.Errorf("%q: want true or false", s)
}

// parseImportMetadata parses the original's "key1=value1&key2=value2" and
// checks it as the API would.
func parseImportMetadata(s string) (eim.Metadata, error) {
	if s == "" {
		return nil, nil
	}
	var md eim.Metadata
	for pair := range strings.SplitSeq(s, "&") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value pairs joined by &", pair)
		}
		md = append(md, eim.MetadataItem{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v)})
	}
	// The API's own checks of metadata (the same for every kind), so that a file is refused for what the
	// server would refuse, with the same words.
	if err := eim.Validate(&eim.Region{Name: "import", Metadata: md}); err != nil {
		return nil, errors.New(eim.ErrorMessage(err))
	}
	return md, nil
}

// refIndex finds resources of one kind by ID or by name.
type refIndex struct {
	kind   eim.Kind
	byID   map[string]bool
	byName map[string][]string // name (and, for OS resources, profile name) → IDs
	title  map[string]string   // ID → its name, for messages
	extra  map[string]eim.SecurityFeature
}

func (x *refIndex) resolve(what, v string) (string, error) {
	if x.byID[v] {
		return v, nil
	}
	if eim.ValidID(x.kind, v) {
		return "", fmt.Errorf("%s %q: no such %s in the project", what, v, x.kind)
	}
	ids := x.byName[v]
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%s %q: no %s has that ID or name", what, v, x.kind)
	case 1:
		return ids[0], nil
	}
	named := make([]string, len(ids))
	for i, id := range ids {
		named[i] = fmt.Sprintf("%s (%s)", id, x.title[id])
	}
	return "", fmt.Errorf("%s %q: ambiguous, it names %s; give the ID or the full name", what, v, strings.Join(named, ", "))
}

// loadRefs lists every resource of T's kind in the project (when need),
// indexed by ID and by the names names gives; sec is the OS's security
// feature (OS resources only).
func loadRefs[T any, PT interface {
	*T
	eim.Resource
}](ctx context.Context, cl *client.Client, w *serverWait, project string, need bool, names func(PT) (ns []string, sec eim.SecurityFeature)) (*refIndex, error) {
	k := PT(new(T)).ResourceKind()
	x := &refIndex{kind: k, byID: map[string]bool{}, byName: map[string][]string{}, title: map[string]string{}, extra: map[string]eim.SecurityFeature{}}
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
			id := r.Base().ResourceID
			ns, sec := names(r)
			x.byID[id] = true
			x.extra[id] = sec
			x.title[id] = ns[0]
			for _, n := range slices.Compact(slices.Sorted(slices.Values(ns))) {
				if n != "" {
					x.byName[n] = append(x.byName[n], id)
				}
			}
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
	var need struct{ os, site, account, config bool }
	for _, l := range f.lines {
		need.os = need.os || l.osProfile != ""
		need.site = need.site || l.site != ""
		need.account = need.account || l.remoteUser != ""
		need.config = need.config || l.customConfigs != ""
	}
	oses, err := loadRefs(ctx, cl, w, project, need.os, func(o *eim.OS) ([]string, eim.SecurityFeature) {
		return []string{o.Name, o.ProfileName}, o.SecurityFeature
	})
	if err != nil {
		return err
	}
	sites, err := loadRefs(ctx, cl, w, project, need.site, func(s *eim.Site) ([]string, eim.SecurityFeature) {
		return []string{s.Name}, ""
	})
	if err != nil {
		return err
	}
	accounts, err := loadRefs(ctx, cl, w, project, need.account, func(a *eim.LocalAccount) ([]string, eim.SecurityFeature) {
		return []string{a.Username}, ""
	})
	if err != nil {
		return err
	}
	configs, err := loadRefs(ctx, cl, w, project, need.config, func(c *eim.CustomConfig) ([]string, eim.SecurityFeature) {
		return []string{c.Name}, ""
	})
	if err != nil {
		return err
	}
	for _, l := range f.lines {
		if l.osProfile != "" {
			if id, err := oses.resolve("OSProfile", l.osProfile); err != nil {
				l.fail("%v", err)
			} else {
				l.osID = id
				l.secFeature = secNone
				if l.secureOn {
					if oses.extra[id] != secSBFDE {
						l.fail("Secure: OS profile %s does not support secure boot and full disk encryption", id)
					}
					l.secFeature = secSBFDE
				}
			}
		}
		if l.site != "" {
			if id, err := sites.resolve("Site", l.site); err != nil {
				l.fail("%v", err)
			} else {
				l.siteID = id
			}
		}
		if l.remoteUser != "" {
			if id, err := accounts.resolve("RemoteUser", l.remoteUser); err != nil {
				l.fail("%v", err)
			} else {
				l.accountID = id
			}
		}
		if l.customConfigs != "" {
			for c := range strings.SplitSeq(l.customConfigs, "&") {
				if id, err := configs.resolve("CloudInitMeta", strings.TrimSpace(c)); err != nil {
					l.fail("%v", err)
				} else if !slices.Contains(l.configIDs, id) {
					l.configIDs = append(l.configIDs, id)
				}
			}
		}
	}
	// Hosts already registered: the lines' serials and UUIDs, as many per
	// query as a filter may hold.
	byUUID, bySerial := map[string]*importLine{}, map[string]*importLine{}
	var filters []string
	var cur strings.Builder
	add := func(cond string) {
		if cur.Len() > 0 && cur.Len()+len(" OR ")+len(cond) > filter.MaxLength {
			filters = append(filters, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteString(" OR ")
		}
		cur.WriteString(cond)
	}
	for _, l := range f.lines {
		if l.uuid != "" && reImportUUID.MatchString(l.uuid) {
			byUUID[strings.ToLower(l.uuid)] = l
			add(fmt.Sprintf("uuid=%q", strings.ToLower(l.uuid))) // compared without regard to case
		}
		if l.serial != "" && reImportSerial.MatchString(l.serial) {
			bySerial[strings.ToLower(l.serial)] = l
			add(fmt.Sprintf("serialNumber=%q", l.serial))
		}
	}
	if cur.Len() > 0 {
		filters = append(filters, cur.String())
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
				var ls []*importLine
				if l := byUUID[strings.ToLower(h.UUID)]; h.UUID != "" && l != nil {
					ls = append(ls, l)
				}
				if l := bySerial[strings.ToLower(h.SerialNumber)]; h.SerialNumber != "" && l != nil && !slices.Contains(ls, l) {
					ls = append(ls, l)
				}
				for _, l := range ls {
					l.cands = append(l.cands, h)
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
	header := slices.Clone(f.header)
	errCol, ok := f.col[importErrorColumn]
	if !ok {
		errCol = len(header)
		header = append(header, importErrorColumn)
	}
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write the error file: %w", err)
	}
	w := csv.NewWriter(out)
	_ = w.Write(header)
	for _, l := range bad {
		rec := make([]string, len(header))
		copy(rec, l.raw)
		rec[errCol] = msg(l)
		_ = w.Write(rec)
	}
	w.Flush()
	err = errors.Join(w.Error(), out.Close())
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

const importTemplate = "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,LVMSize,CloudInitMeta,AMTEnable," + importErrorColumn + "\n"

func (c *cli) hostImport(args []string) error {
	fs := c.flagSet("eim host import", "eim host import FILE.csv [flags] | --template FILE.csv",
		`Register hosts in bulk from a CSV file in the format of the original's bulk import tool:
  Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata[,LVMSize,CloudInitMeta,AMTEnable],Error - do not fill
Serial or UUID is required on each line; OSProfile, Site, RemoteUser and CloudInitMeta
(custom configs, joined by &) take IDs or names; Metadata is key=value pairs joined by &.
The whole file is checked first, and nothing is created unless every line is right.
Each line becomes a host registered with auto-onboard, at its site, and, with an
OSProfile, its instance. Lines that fail are written to FILE.errors.csv with the reason.
A host already registered as its line describes is left as it is, and one an earlier
import left half made is finished: an interrupted import is finished by importing the
file (or its error file) again. A host that differs from its line is refused. A server
that goes away during the import is waited for, up to --wait.`)
	c.globalFlags(fs)
	var (
		d           importDefaults
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
