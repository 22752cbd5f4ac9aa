// Package hostcsv reads and checks the CSV file of the original EIM's bulk
// host import tool (orch-host-bulk-import, and orch-cli create host
// --import-from-csv), so that a fleet list made for it works here:
//
//	Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill
//
// plus the optional columns LVMSize, CloudInitMeta and AMTEnable of the
// later tool, and EIM's BMC columns (BMCProtocol, BMCAddress, BMCUsername,
// BMCPassword, BMCSystemID, BMCInsecure, BMCCACert: the host's BMC, made
// with it; see bmc.go). `eim host import` and the web UI's register page both use
// it: the file is parsed (Parse), every line checked on its own and
// against the others (File.CheckSyntax), and the references it names
// resolved (ResolveRefs) before anything is created, so that they refuse
// the same lines with the same words.
package hostcsv

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

// Columns are the columns a file may have, by their canonical names; the
// first seven are the original tool's.
var Columns = append([]string{"Serial", "UUID", "OSProfile", "Site", "Secure", "RemoteUser", "Metadata", "LVMSize", "CloudInitMeta", "AMTEnable"},
	BMCColumns...)

// ErrorColumn is the original's output column; on input it is ignored, so
// that an error file can be fixed and imported again.
const ErrorColumn = "Error - do not fill"

// Template is an empty file: the header only.
const Template = "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,LVMSize,CloudInitMeta,AMTEnable," +
	"BMCProtocol,BMCAddress,BMCUsername,BMCPassword,BMCSystemID,BMCInsecure,BMCCACert," + ErrorColumn + "\n"

// unsupportedColumns are columns of the later tool for features EIM does
// not have: accepted when empty, refused on a line that fills them.
var unsupportedColumns = []string{"K8sEnable", "K8sClusterTemplate", "K8sConfig"}

var (
	reSerial = regexp.MustCompile(`^[A-Za-z0-9]{5,20}$`)
	reUUID   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// WellFormedSerial and WellFormedUUID say whether a line's identity may be
// looked up (a malformed one is an error of the line already).
func WellFormedSerial(s string) bool { return reSerial.MatchString(s) }

// WellFormedUUID: see WellFormedSerial.
func WellFormedUUID(s string) bool { return reUUID.MatchString(s) }

// The security features an instance can ask for.
const (
	SecNone  eim.SecurityFeature = "SECURITY_FEATURE_NONE"
	SecSBFDE eim.SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"
)

// MaxLines bounds a file: far more than one site's fleet, small enough to
// check in memory.
const MaxLines = 100000

// File is a parsed CSV file: its header as written and its lines.
type File struct {
	Header []string
	Col    map[string]int // canonical column name → index in Header
	Lines  []*Line
}

// Line is one host of the file.
type Line struct {
	N   int      // line number in the file (1 = the header)
	Raw []string // the fields as read, for the error file

	Serial, UUID, OSProfile, Site, Secure, RemoteUser, Metadata, LVM, CustomConfigs, AMT string
	Unsupported                                                                          []string // filled columns EIM does not support
	// The BMC columns as written (BMCPassword and BMCCACert: references,
	// env:NAME or file:PATH, never the secret itself).
	BMCProtocol, BMCAddress, BMCUsername, BMCPassword, BMCSystemID, BMCInsecure, BMCCACert string

	Errs []string

	// Set by CheckSyntax.
	MD       eim.Metadata
	SecureOn bool
	LVMGB    uint32
	AMTOn    bool
	// BMC is the host's BMC (nil: the line has none), its password and CA
	// bundle read through Defaults.Secrets.
	BMC *eim.BMCInput
	// Set by ResolveRefs.
	OSID, SiteID, AccountID string
	ConfigIDs               []string
	SecFeature              eim.SecurityFeature
}

// Fail records an error of the line.
func (l *Line) Fail(format string, args ...any) {
	l.Errs = append(l.Errs, fmt.Sprintf(format, args...))
}

// Parse reads a CSV file in the bulk import format. Errors of the file as
// a whole (no header, unknown columns, broken CSV) are returned; errors of
// a line are kept on the line.
func Parse(r io.Reader) (*File, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // the original's files leave trailing fields out
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("the file is empty: want a header line starting " + strings.Join(Columns[:7], ","))
	}
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	f := &File{Header: header, Col: map[string]int{}}
	known := map[string]string{}
	for _, c := range append(append([]string{ErrorColumn, "Error"}, Columns...), unsupportedColumns...) {
		known[strings.ToLower(c)] = c
	}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) // a spreadsheet's byte-order mark
		name, ok := known[strings.ToLower(h)]
		if !ok {
			return nil, fmt.Errorf("line 1: unknown column %q (the columns are %s)", h, strings.Join(Columns, ", "))
		}
		if name == "Error" {
			name = ErrorColumn
		}
		if _, dup := f.Col[name]; dup {
			return nil, fmt.Errorf("line 1: column %q appears twice", h)
		}
		f.Col[name] = i
	}
	if _, ok := f.Col["Serial"]; !ok {
		return nil, errors.New("line 1: no Serial column (the header starts " + strings.Join(Columns[:7], ",") + ")")
	}
	if _, ok := f.Col["UUID"]; !ok {
		return nil, errors.New("line 1: no UUID column (the header starts " + strings.Join(Columns[:7], ",") + ")")
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
		if len(f.Lines) == MaxLines {
			return nil, fmt.Errorf("line %d: more than %d hosts in one file; split it", line, MaxLines)
		}
		l := &Line{N: line, Raw: rec}
		get := func(name string) string {
			if i, ok := f.Col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		l.Serial, l.UUID, l.OSProfile, l.Site = get("Serial"), get("UUID"), get("OSProfile"), get("Site")
		l.Secure, l.RemoteUser, l.Metadata = get("Secure"), get("RemoteUser"), get("Metadata")
		l.LVM, l.CustomConfigs, l.AMT = get("LVMSize"), get("CloudInitMeta"), get("AMTEnable")
		l.BMCProtocol, l.BMCAddress, l.BMCUsername, l.BMCPassword = get("BMCProtocol"), get("BMCAddress"), get("BMCUsername"), get("BMCPassword")
		l.BMCSystemID, l.BMCInsecure, l.BMCCACert = get("BMCSystemID"), get("BMCInsecure"), get("BMCCACert")
		for _, c := range unsupportedColumns {
			if get(c) != "" {
				l.Unsupported = append(l.Unsupported, c)
			}
		}
		if len(rec) > len(header) {
			l.Fail("%d fields, the header has %d", len(rec), len(header))
		}
		f.Lines = append(f.Lines, l)
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

// Defaults fill a line's empty cells.
type Defaults struct {
	OSProfile, Site, Secure, RemoteUser, Metadata, CustomConfigs string
	// Secrets reads what a BMCPassword or BMCCACert cell refers to
	// (env:NAME, file:PATH): the CLI reads its environment and files at
	// import time. nil (the web UI) refuses lines that need it.
	Secrets SecretReader
}

// CheckSyntax checks every line on its own and against the others
// (duplicate serials and UUIDs, compared case-insensitively).
func (f *File) CheckSyntax(d Defaults) {
	serials, uuids := map[string]int{}, map[string]int{}
	for _, l := range f.Lines {
		fill := func(v *string, def string) {
			if *v == "" {
				*v = def
			}
		}
		fill(&l.OSProfile, d.OSProfile)
		fill(&l.Site, d.Site)
		fill(&l.Secure, d.Secure)
		fill(&l.RemoteUser, d.RemoteUser)
		fill(&l.Metadata, d.Metadata)
		fill(&l.CustomConfigs, d.CustomConfigs)

		for _, c := range l.Unsupported {
			l.Fail("%s: not supported by EIM (leave it empty)", c)
		}
		switch {
		case l.Serial == "" && l.UUID == "":
			l.Fail("Serial or UUID is required")
		case l.Serial != "" && !reSerial.MatchString(l.Serial):
			l.Fail("Serial %q: want 5 to 20 letters and digits", l.Serial)
		case l.Serial != "" && eim.PlaceholderSerial(l.Serial):
			l.Fail("Serial %q is a vendor placeholder that identifies no machine; give the UUID instead", l.Serial)
		}
		if l.UUID != "" {
			switch {
			case !reUUID.MatchString(l.UUID):
				l.Fail("UUID %q: want the RFC 4122 form 8-4-4-4-12 hex digits", l.UUID)
			case eim.PlaceholderUUID(l.UUID):
				l.Fail("UUID %q is a firmware placeholder that identifies no machine", l.UUID)
			}
		}
		if l.Serial != "" {
			k := strings.ToLower(l.Serial)
			if prev, ok := serials[k]; ok {
				l.Fail("Serial %q is also on line %d", l.Serial, prev)
			} else {
				serials[k] = l.N
			}
		}
		if l.UUID != "" {
			k := strings.ToLower(l.UUID)
			if prev, ok := uuids[k]; ok {
				l.Fail("UUID %q is also on line %d", l.UUID, prev)
			} else {
				uuids[k] = l.N
			}
		}
		if b, err := parseBool(l.Secure); err != nil {
			l.Fail("Secure: %v", err)
		} else {
			l.SecureOn = b
		}
		if b, err := parseBool(l.AMT); err != nil {
			l.Fail("AMTEnable: %v", err)
		} else {
			l.AMTOn = b
		}
		if l.LVM != "" {
			n, err := strconv.ParseUint(l.LVM, 10, 32)
			if err != nil {
				l.Fail("LVMSize %q: want a size in GB (a whole number)", l.LVM)
			}
			l.LVMGB = uint32(n)
		}
		md, err := ParseMetadata(l.Metadata)
		if err != nil {
			l.Fail("Metadata: %v", err)
		}
		l.MD = md
		if l.SecureOn && l.OSProfile == "" {
			l.Fail("Secure: true needs an OSProfile")
		}
		if (l.RemoteUser != "" || l.CustomConfigs != "") && l.OSProfile == "" {
			l.Fail("RemoteUser and CloudInitMeta apply to the instance: they need an OSProfile")
		}
		l.checkBMC(d.Secrets)
	}
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false", "no", "0":
		return false, nil
	case "true", "yes", "1":
		return true, nil
	}
	return false, fmt.Errorf("%q: want true or false", s)
}

// ParseMetadata parses the original's "key1=value1&key2=value2" and
// checks it as the API would.
func ParseMetadata(s string) (eim.Metadata, error) {
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

// Needs says which kinds of references the lines name, so that only those
// are listed.
type Needs struct{ OS, Site, Account, Config bool }

// Needs returns the references f's lines name.
func (f *File) Needs() Needs {
	var n Needs
	for _, l := range f.Lines {
		n.OS = n.OS || l.OSProfile != ""
		n.Site = n.Site || l.Site != ""
		n.Account = n.Account || l.RemoteUser != ""
		n.Config = n.Config || l.CustomConfigs != ""
	}
	return n
}

// RefIndex finds resources of one kind by ID or by name.
type RefIndex struct {
	kind   eim.Kind
	byID   map[string]bool
	byName map[string][]string // name (and, for OS resources, profile name) → IDs
	title  map[string]string   // ID → its name, for messages
	sec    map[string]eim.SecurityFeature
}

// NewRefIndex returns an empty index of kind k.
func NewRefIndex(k eim.Kind) *RefIndex {
	return &RefIndex{kind: k, byID: map[string]bool{}, byName: map[string][]string{}, title: map[string]string{}, sec: map[string]eim.SecurityFeature{}}
}

// Add indexes the resource id under names (the first is its title); sec
// is an OS resource's security feature ("" for other kinds).
func (x *RefIndex) Add(id string, names []string, sec eim.SecurityFeature) {
	x.byID[id] = true
	x.sec[id] = sec
	if len(names) > 0 {
		x.title[id] = names[0]
	}
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		if n != "" {
			x.byName[n] = append(x.byName[n], id)
		}
	}
}

// Resolve finds the resource a cell v names (the cell's column is what).
func (x *RefIndex) Resolve(what, v string) (string, error) {
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

// Refs are the indexes a file's references are resolved against; an index
// the file does not need may be nil.
type Refs struct {
	OS, Site, Account, Config *RefIndex
}

// ResolveRefs resolves the references of every line, recording the
// errors on the lines.
func (f *File) ResolveRefs(x Refs) {
	for _, l := range f.Lines {
		if l.OSProfile != "" && x.OS != nil {
			if id, err := x.OS.Resolve("OSProfile", l.OSProfile); err != nil {
				l.Fail("%v", err)
			} else {
				l.OSID = id
				l.SecFeature = SecNone
				if l.SecureOn {
					if x.OS.sec[id] != SecSBFDE {
						l.Fail("Secure: OS profile %s does not support secure boot and full disk encryption", id)
					}
					l.SecFeature = SecSBFDE
				}
			}
		}
		if l.Site != "" && x.Site != nil {
			if id, err := x.Site.Resolve("Site", l.Site); err != nil {
				l.Fail("%v", err)
			} else {
				l.SiteID = id
			}
		}
		if l.RemoteUser != "" && x.Account != nil {
			if id, err := x.Account.Resolve("RemoteUser", l.RemoteUser); err != nil {
				l.Fail("%v", err)
			} else {
				l.AccountID = id
			}
		}
		if l.CustomConfigs != "" && x.Config != nil {
			for c := range strings.SplitSeq(l.CustomConfigs, "&") {
				if id, err := x.Config.Resolve("CloudInitMeta", strings.TrimSpace(c)); err != nil {
					l.Fail("%v", err)
				} else if !slices.Contains(l.ConfigIDs, id) {
					l.ConfigIDs = append(l.ConfigIDs, id)
				}
			}
		}
	}
}

// WriteErrors writes lines as read plus the error column (msg of each) to
// w: the file to fix and import again.
func WriteErrors(w io.Writer, f *File, lines []*Line, msg func(*Line) string) error {
	header := slices.Clone(f.Header)
	errCol, ok := f.Col[ErrorColumn]
	if !ok {
		errCol = len(header)
		header = append(header, ErrorColumn)
	}
	cw := csv.NewWriter(w)
	_ = cw.Write(header)
	for _, l := range lines {
		rec := make([]string, len(header))
		copy(rec, l.Raw)
		rec[errCol] = msg(l)
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// Identities finds the lines that name a host, by its UUID or serial
// number (compared without regard to case).
type Identities struct {
	byUUID, bySerial map[string]*Line
}

// IdentityFilters returns AIP-160 filters over hosts (each within
// filter.MaxLength, as many conditions as fit) that find the hosts
// registered already with the lines' well-formed UUIDs and serial
// numbers, and the index that tells which lines a host found names. A
// filter's = is a substring match: Lines keeps only equal identities.
func (f *File) IdentityFilters() ([]string, *Identities) {
	x := &Identities{byUUID: map[string]*Line{}, bySerial: map[string]*Line{}}
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
	for _, l := range f.Lines {
		if l.UUID != "" && WellFormedUUID(l.UUID) {
			x.byUUID[strings.ToLower(l.UUID)] = l
			add(fmt.Sprintf("uuid=%q", strings.ToLower(l.UUID))) // stored lower-case
		}
		if l.Serial != "" && WellFormedSerial(l.Serial) {
			x.bySerial[strings.ToLower(l.Serial)] = l
			add(fmt.Sprintf("serialNumber=%q", l.Serial))
		}
	}
	if cur.Len() > 0 {
		filters = append(filters, cur.String())
	}
	return filters, x
}

// Lines returns the lines (at most two) whose UUID or serial number is
// the host's.
func (x *Identities) Lines(h *eim.Host) []*Line {
	var out []*Line
	if l := x.byUUID[strings.ToLower(h.UUID)]; h.UUID != "" && l != nil {
		out = append(out, l)
	}
	if l := x.bySerial[strings.ToLower(h.SerialNumber)]; h.SerialNumber != "" && l != nil && !slices.Contains(out, l) {
		out = append(out, l)
	}
	return out
}
