package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

func TestParseImportFile(t *testing.T) {
	t.Run("the original's header, short lines, blank lines", func(t *testing.T) {
		f, err := parseImportFile(strings.NewReader("\ufeffSerial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill\n" +
			"2500JF3,4c4c4544-2046-5310-8052-cac04f515233\n" +
			",,,,\n" +
			"ICW814D,,\"Edge Microvisor Toolkit 3.0.20250717\",site-0000abcd,TRUE,admin,a=b,old error\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(f.lines) != 2 {
			t.Fatalf("lines: got %d, want 2 (the blank one skipped)", len(f.lines))
		}
		a, b := f.lines[0], f.lines[1]
		if a.n != 2 || a.serial != "2500JF3" || a.uuid != "4c4c4544-2046-5310-8052-cac04f515233" || a.osProfile != "" {
			t.Errorf("line 2: %+v", a)
		}
		if b.n != 4 || b.osProfile != "Edge Microvisor Toolkit 3.0.20250717" || b.site != "site-0000abcd" || b.secure != "TRUE" || b.remoteUser != "admin" || b.metadata != "a=b" {
			t.Errorf("line 4: %+v", b)
		}
	})
	t.Run("columns by name, any case, any order; the later tool's columns", func(t *testing.T) {
		f, err := parseImportFile(strings.NewReader("uuid,serial,LVMSIZE,cloudinitmeta,Error\n4c4c4544-2046-5310-8052-cac04f515233,SN12345,500,base&extra,x\n"))
		if err != nil {
			t.Fatal(err)
		}
		l := f.lines[0]
		if l.serial != "SN12345" || l.lvm != "500" || l.customConfigs != "base&extra" {
			t.Errorf("line: %+v", l)
		}
	})
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "the file is empty"},
		{"unknown column", "Serial,UUID,Colour\n", `unknown column "Colour"`},
		{"no UUID column", "Serial,OSProfile\n", "no UUID column"},
		{"column twice", "Serial,UUID,serial\n", `column "serial" appears twice`},
		{"broken quoting", "Serial,UUID\n\"SN1234,x\n", "line 2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseImportFile(strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestImportCheckSyntax(t *testing.T) {
	f, err := parseImportFile(strings.NewReader(strings.Join([]string{
		"Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,LVMSize,CloudInitMeta,AMTEnable,K8sEnable",
		"SN00001,,,,,,,,,,",                                // 2: fine; takes the defaults
		",,,,,,,,,,true",                                   // 3: no identity; K8s
		"SN-1,not-a-uuid,,,maybe,,,12x,,perhaps,",          // 4: four bad cells
		"sn00001,,,,,,,,,,",                                // 5: serial of line 2, other case
		",4C4C4544-2046-5310-8052-CAC04F515233,,,,,k,,,,",  // 6: metadata without =
		",4c4c4544-2046-5310-8052-cac04f515233,,,,,,,,,",   // 7: UUID of line 6
		"To Be Filled,,,,,,,,,,",                           // 8: not 5-20 alphanumerics
		"DEFAULT0,03000200-0400-0500-0006-000700080009,,,", // 9: placeholders
		"SN00009,,,,true,,,,,,",                            // 10: secure with no OS; defaults give none
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	f.checkSyntax(importDefaults{site: "plant", metadata: "zone=eu"})
	want := map[int][]string{
		3:  {"K8sEnable: not supported", "Serial or UUID is required"},
		4:  {`Serial "SN-1"`, `UUID "not-a-uuid"`, `Secure: "maybe"`, `AMTEnable: "perhaps"`, `LVMSize "12x"`},
		5:  {`Serial "sn00001" is also on line 2`},
		6:  {`Metadata: "k": want key=value`},
		7:  {"is also on line 6"},
		8:  {`Serial "To Be Filled"`},
		10: {"Secure: true needs an OSProfile"},
	}
	for _, l := range f.lines {
		got := strings.Join(l.errs, "; ")
		ws, bad := want[l.n]
		if !bad {
			if l.n == 9 {
				continue // checked below
			}
			if got != "" {
				t.Errorf("line %d: unexpected errors %q", l.n, got)
			}
			continue
		}
		for _, w := range ws {
			if !strings.Contains(got, w) {
				t.Errorf("line %d: errors %q do not mention %q", l.n, got, w)
			}
		}
	}
	if l := f.lines[0]; l.site != "plant" || len(l.md) != 1 || l.md[0].Key != "zone" || l.md[0].Value != "eu" {
		t.Errorf("line 2 with the defaults: site %q metadata %+v, want plant and zone=eu", l.site, l.md)
	}
	// Line 9: a vendor placeholder is refused whichever of the two it is.
	for _, l := range f.lines {
		if l.n == 9 && len(l.errs) == 0 && !eim.PlaceholderSerial(l.serial) && !eim.PlaceholderUUID(l.uuid) {
			t.Errorf("line 9: neither identity counts as a placeholder; the test needs new values")
		}
	}
}

func FuzzParseImportFile(f *testing.F) {
	f.Add("Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,Error - do not fill\nSN12345,4c4c4544-2046-5310-8052-cac04f515233,os-00000001,plant,true,admin,a=b&c=d\n")
	f.Add("uuid,serial\n,\n\"x\"\"y\",z\n")
	f.Add("Serial,UUID\n\"unterminated\n")
	f.Fuzz(func(t *testing.T, in string) {
		file, err := parseImportFile(strings.NewReader(in))
		if err != nil {
			return
		}
		if _, ok := file.col["Serial"]; !ok {
			t.Fatal("a file without a Serial column was accepted")
		}
		file.checkSyntax(importDefaults{})
		prev := 1
		for _, l := range file.lines {
			if l.n <= prev {
				t.Fatalf("line numbers out of order: %d after %d", l.n, prev)
			}
			prev = l.n
			if len(l.errs) == 0 && l.serial == "" && l.uuid == "" {
				t.Fatalf("line %d has no identity and no error", l.n)
			}
		}
	})
}

// The command against a real server: a file checked and imported (hosts at
// their sites with their metadata, instances with their OS, account and
// configs), imported again (every line refused, nothing created), a file
// with one wrong line (nothing created, the error file), and a line that
// fails after its registration (rolled back).
func TestHostImport(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	dir := t.TempDir()

	var region eim.Region
	admin.json(&region, "region", "create", "--name", "eu")
	var site eim.Site
	admin.json(&site, "site", "create", "--name", "plant", "--region", region.ResourceID)
	var acct eim.LocalAccount
	admin.json(&acct, "localaccount", "create", "--username", "ops", "--ssh-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOm6lNvbH3lBL1lMPm5mL9mK1qVQf8bW0P6Yb4mS3jZ4 ops@example")
	var cc eim.CustomConfig
	admin.json(&cc, "customconfig", "create", "--name", "ntp", "--config", "#cloud-config\nntp:\n  enabled: true\n")
	osID := shippedOS(t, admin, "ubuntu-24.04-lts-generic")

	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hostCount := func() int {
		var page struct {
			Total int `json:"totalElements"`
		}
		admin.json(&page, "host", "list")
		return page.Total
	}

	good := write("hosts.csv", "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,LVMSize,CloudInitMeta,Error - do not fill\n"+
		"2500JF3,4c4c4544-2046-5310-8052-cac04f515233,ubuntu-24.04-lts-generic,plant,true,ops,line=1&cell=a,,ntp\n"+
		"ICW814D,4c4c4544-4046-5310-8052-cac04f515233\n"+
		",4c4c4544-0946-5310-8052-cac04f515233,"+osID+","+site.ResourceID+",false,,,40\n")
	if got := admin.must("host", "import", good, "--check"); !strings.Contains(got, "3 hosts, every line right") {
		t.Fatalf("--check: %q", got)
	}
	if n := hostCount(); n != 0 {
		t.Fatalf("--check created %d hosts", n)
	}
	var results []importResult
	admin.json(&results, "host", "import", good)
	if len(results) != 3 {
		t.Fatalf("results: %+v", results)
	}
	for _, r := range results {
		if r.Error != "" || r.Status != statusImported || !eim.ValidID(eim.KindHost, r.HostID) {
			t.Fatalf("line %d: %+v", r.Line, r)
		}
	}
	var h eim.Host
	admin.json(&h, "host", "get", results[0].HostID)
	if h.Name != "2500JF3" || h.SerialNumber != "2500JF3" || h.SiteID != site.ResourceID || h.DesiredState != eim.HostStateOnboarded || len(h.Metadata) != 2 || h.Metadata[1].Key != "cell" {
		t.Errorf("host of line 2: serial %q site %q state %q metadata %+v", h.SerialNumber, h.SiteID, h.DesiredState, h.Metadata)
	}
	var in eim.Instance
	admin.json(&in, "instance", "get", results[0].InstanceID)
	if in.HostID != h.ResourceID || in.OSID != osID || in.SecurityFeature != secSBFDE || in.LocalAccountID != acct.ResourceID || !slices.Equal(in.CustomConfigIDs, []string{cc.ResourceID}) {
		t.Errorf("instance of line 2: %+v", in)
	}
	if results[1].InstanceID != "" {
		t.Errorf("line 3 names no OS, yet got instance %s", results[1].InstanceID)
	}
	admin.json(&h, "host", "get", results[2].HostID)
	if h.Name != h.UUID || h.UUID != "4c4c4544-0946-5310-8052-cac04f515233" || h.UserLvmSize != 40 || h.SiteID != site.ResourceID {
		t.Errorf("host of line 4 (UUID only): name %q uuid %q lvm %d site %q", h.Name, h.UUID, h.UserLvmSize, h.SiteID)
	}

	// Again: every line is already as it says, and nothing is created.
	if got := admin.must("host", "import", good, "--check"); !strings.Contains(got, "3 already imported, 0 half made") {
		t.Fatalf("--check of an imported file: %q", got)
	}
	var again []importResult
	admin.json(&again, "host", "import", good)
	for i, r := range again {
		if r.Status != statusUnchanged || r.HostID != results[i].HostID || r.InstanceID != results[i].InstanceID {
			t.Errorf("line %d imported again: %+v, want unchanged %+v", r.Line, r, results[i])
		}
	}
	if n := hostCount(); n != 3 {
		t.Fatalf("hosts after importing the file again: %d, want 3", n)
	}

	// One wrong line of two: nothing is created; the error file holds it.
	mixed := write("mixed.csv", "Serial,UUID,OSProfile,Site\nNEW0001,,,plant\nNEW0002,,,nowhere\n")
	_, err := admin.run("host", "import", mixed)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 lines are wrong") || !strings.Contains(err.Error(), "nothing was created") {
		t.Fatalf("import with a wrong line: %v", err)
	}
	if n := hostCount(); n != 3 {
		t.Fatalf("hosts after a file with a wrong line: %d, want 3", n)
	}
	recs := readCSV(t, filepath.Join(dir, "mixed.errors.csv"))
	if len(recs) != 2 || recs[0][4] != importErrorColumn || recs[1][0] != "NEW0002" || !strings.Contains(recs[1][4], `Site "nowhere"`) {
		t.Fatalf("error file: %q", recs)
	}

	// A step after the registration fails (an OS gone between the check and
	// the write): the host is deleted again and the line reported.
	cl := client.New(url, strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile))))), nil)
	l := &importLine{n: 2, serial: "ROLLBK1", osID: "os-0badf00d", secFeature: secNone}
	im := &importer{cl: cl, project: eim.DefaultProject, autoOnboard: true, wait: &serverWait{out: io.Discard, now: time.Now}}
	if err := im.importOne(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if l.hostID != "" || !strings.Contains(l.importError, "create the instance") || !strings.Contains(l.importError, "deleted again") {
		t.Fatalf("rolled back line: host %q error %q", l.hostID, l.importError)
	}
	var left struct {
		Hosts []eim.Host `json:"hosts"`
	}
	admin.json(&left, "host", "list", "--filter", `serialNumber="ROLLBK1"`)
	for _, h := range left.Hosts {
		if h.DesiredState != eim.HostStateDeleted {
			t.Errorf("rolled back host %s: desired %s, want DELETED", h.ResourceID, h.DesiredState)
		}
	}

	// The template.
	tpl := filepath.Join(dir, "new.csv")
	admin.must("host", "import", "--template", tpl)
	b, err := os.ReadFile(tpl)
	if err != nil || !strings.HasPrefix(string(b), "Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata,") {
		t.Fatalf("template: %q, %v", b, err)
	}
	if _, err := admin.run("host", "import", "--template", tpl); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("template over an existing file: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An import interrupted part way (Ctrl-C) leaves every line either fully
// imported or in the error file, never both, never neither, and no host
// half made.
func TestHostImportInterrupted(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	tokenFile := filepath.Join(dataDir, adminTokenFile)
	admin := cliRunner{t: t, url: url, tokenFile: tokenFile}
	var region eim.Region
	admin.json(&region, "region", "create", "--name", "eu")
	admin.must("site", "create", "--name", "plant", "--region", region.ResourceID)
	shippedOS(t, admin, "ubuntu-24.04-lts-generic")

	// A proxy in front of the server that interrupts the CLI at the tenth
	// registration.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	target, _ := neturl.Parse(url)
	var registers atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/compute/hosts/register") && registers.Add(1) == 10 {
			cancel()
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	defer proxy.Close()

	var b strings.Builder
	b.WriteString("Serial,UUID,OSProfile,Site\n")
	for i := range 40 {
		fmt.Fprintf(&b, "INT%05d,,ubuntu-24.04-lts-generic,plant\n", i)
	}
	path := filepath.Join(t.TempDir(), "hosts.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := Main(ctx, []string{"--server", proxy.URL, "--token-file", tokenFile, "host", "import", path, "--workers", "4", "-o", "json"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("interrupted import: %v; stderr:\n%s", err, errOut.String())
	}
	var results []importResult
	if err := json.Unmarshal(out.Bytes(), &results); err != nil {
		t.Fatalf("results: %v: %s", err, out.String())
	}
	recs := readCSV(t, filepath.Join(filepath.Dir(path), "hosts.errors.csv"))
	inErrors := map[string]bool{}
	for _, r := range recs[1:] {
		inErrors[r[0]] = true
	}
	imported := 0
	for _, r := range results {
		done := r.HostID != "" && r.InstanceID != "" && r.Error == ""
		if done == inErrors[r.Serial] {
			t.Errorf("%s: imported %v, in the error file %v (%+v)", r.Serial, done, inErrors[r.Serial], r)
		}
		if done {
			imported++
		}
	}
	if imported == 0 || imported == 40 {
		t.Errorf("imported %d of 40; the interruption did not land part way", imported)
	}
	// On the server: a live host for each imported line, with its
	// instance; anything else was deleted again.
	var hosts struct {
		Hosts []eim.Host `json:"hosts"`
	}
	admin.json(&hosts, "host", "list", "--page-size", "100")
	live := 0
	for _, h := range hosts.Hosts {
		if h.DesiredState == eim.HostStateDeleted {
			continue
		}
		live++
		if inErrors[h.SerialNumber] {
			t.Errorf("host %s (%s) is live, yet its line is in the error file", h.ResourceID, h.SerialNumber)
		}
		if h.Instance == nil {
			t.Errorf("host %s (%s) is live without its instance", h.ResourceID, h.SerialNumber)
		}
	}
	if live != imported {
		t.Errorf("live hosts %d, imported lines %d", live, imported)
	}
}

// shippedOS waits for the OS catalog, which a new server loads after it
// starts serving, to hold the shipped profile, and returns its ID.
func shippedOS(t *testing.T, admin cliRunner, profile string) string {
	t.Helper()
	var id string
	poll(t, "the shipped OS profile "+profile, func() error {
		id = strings.TrimSpace(admin.must("os", "list", "--filter", fmt.Sprintf("profileName=%q", profile), "-o", "id"))
		if !eim.ValidID(eim.KindOS, id) {
			return fmt.Errorf("os list: %q", id)
		}
		return nil
	})
	return id
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return recs
}

// Hosts already registered with a line's identity: one an earlier import
// left half made (at each of its steps) is finished, one as the line
// describes is left as it is, whoever made it; one that differs from its
// line, or that lacks something and was not made by an import, is refused
// with what differs, and then nothing is created.
func TestHostImportExisting(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	tokenFile := filepath.Join(dataDir, adminTokenFile)
	admin := cliRunner{t: t, url: url, tokenFile: tokenFile}
	cl := client.New(url, strings.TrimSpace(string(must(os.ReadFile(tokenFile)))), nil)
	ctx := context.Background()
	p := eim.DefaultProject

	var region eim.Region
	admin.json(&region, "region", "create", "--name", "eu")
	var plant, other eim.Site
	admin.json(&plant, "site", "create", "--name", "plant", "--region", region.ResourceID)
	admin.json(&other, "site", "create", "--name", "other", "--region", region.ResourceID)
	osID := shippedOS(t, admin, "ubuntu-24.04-lts-generic")
	var otherOS eim.OS
	if err := cl.Create(ctx, p, eim.KindOS, map[string]string{
		"name": "other-os", "profileName": "other-os", "imageUrl": "http://127.0.0.1:1/os.img", "sha256": strings.Repeat("ab", 32),
	}, &otherOS); err != nil {
		t.Fatal(err)
	}
	md := eim.Metadata{{Key: "zone", Value: "a"}}
	uuid := func(i int) string { return fmt.Sprintf("4c4c4544-0000-4000-8000-%012d", i) }

	// byHand registers a host for (serial, uuid) by hand, as far as the steps
	// say: "p" placed at site with md, "i" with an instance of osid.
	byHand := func(serial, uuid, name, steps, site, osid string) *eim.Host {
		t.Helper()
		h, err := cl.RegisterHost(ctx, p, client.HostRegistration{Name: name, SerialNumber: serial, UUID: uuid, AutoOnboard: true})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(steps, "p") {
			if err := cl.Patch(ctx, p, eim.KindHost, h.ResourceID, map[string]any{"siteId": site, "metadata": md}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if strings.Contains(steps, "i") {
			if err := cl.Create(ctx, p, eim.KindInstance, map[string]any{"name": "x", "kind": eim.InstanceKindMetal, "hostID": h.ResourceID, "osID": osid, "securityFeature": secNone}, nil); err != nil {
				t.Fatal(err)
			}
		}
		return h
	}
	marker := func(serial, uuid string) string { return (&importLine{serial: serial, uuid: uuid}).importMarker() }
	hostCount := func() int {
		t.Helper()
		n := 0
		for _, h := range must(listAll[eim.Host](ctx, cl, p, "")) {
			if h.DesiredState != eim.HostStateDeleted {
				n++
			}
		}
		return n
	}
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	line := func(serial, uuid string) string {
		return serial + "," + uuid + ",ubuntu-24.04-lts-generic,plant,,,zone=a"
	}

	t.Run("differs", func(t *testing.T) {
		byHand("BAD0001", uuid(101), "", "", "", "")                                                           // by hand, not placed
		byHand("BAD0002", uuid(102), "", "pi", other.ResourceID, osID)                                         // another site
		byHand("BAD0003", uuid(103), marker("BAD0003", uuid(103)), "pi", plant.ResourceID, otherOS.ResourceID) // another OS
		byHand("BAD0004X", uuid(104), "", "", "", "")                                                          // the UUID with another serial
		before := hostCount()
		path := write("differs.csv", line("BAD0001", uuid(101)), line("BAD0002", uuid(102)), line("BAD0003", uuid(103)), line("BAD0004", uuid(104)), line("NEW0005", uuid(105)))
		_, err := admin.run("host", "import", path)
		if err == nil || !strings.Contains(err.Error(), "4 of 5 lines are wrong") {
			t.Fatalf("import: %v", err)
		}
		recs := readCSV(t, filepath.Join(dir, "differs.errors.csv"))
		want := []string{
			"without its site and metadata and its instance, and not by eim host import",
			"site " + other.ResourceID + ", not " + plant.ResourceID,
			"of OS " + otherOS.ResourceID + ", not " + osID,
			"serial number BAD0004X, not BAD0004",
		}
		if len(recs) != 5 {
			t.Fatalf("error file: %q", recs)
		}
		for i, w := range want {
			if got := recs[i+1][7]; !strings.Contains(got, w) {
				t.Errorf("line %d: error %q, want it to say %q", i+2, got, w)
			}
		}
		if n := hostCount(); n != before {
			t.Errorf("hosts: %d, want %d (nothing created)", n, before)
		}
	})

	t.Run("half made or already there", func(t *testing.T) {
		edge5 := byHand("RES0005", uuid(5), "edge-5", "pi", plant.ResourceID, osID)
		half := []*eim.Host{
			byHand("RES0002", uuid(2), marker("RES0002", uuid(2)), "", "", ""),
			byHand("RES0003", uuid(3), marker("RES0003", uuid(3)), "p", plant.ResourceID, ""),
			byHand("RES0004", uuid(4), marker("RES0004", uuid(4)), "pi", plant.ResourceID, osID),
		}
		before := hostCount()
		path := write("resume.csv", line("RES0001", uuid(1)), line("RES0002", uuid(2)), line("RES0003", uuid(3)), line("RES0004", uuid(4)), line("RES0005", uuid(5)), line("", uuid(6)))
		if got := admin.must("host", "import", path, "--check"); !strings.Contains(got, "(1 already imported, 3 half made by an earlier import, to finish)") {
			t.Errorf("--check: %q", got)
		}
		var results []importResult
		admin.json(&results, "host", "import", path)
		wantStatus := []string{statusImported, statusCompleted, statusCompleted, statusCompleted, statusUnchanged, statusImported}
		wantHost := []string{"", half[0].ResourceID, half[1].ResourceID, half[2].ResourceID, edge5.ResourceID, ""}
		wantName := []string{"RES0001", "RES0002", "RES0003", "RES0004", "edge-5", uuid(6)}
		if len(results) != len(wantStatus) {
			t.Fatalf("results: %+v", results)
		}
		for i, r := range results {
			if r.Status != wantStatus[i] || r.Error != "" || wantHost[i] != "" && r.HostID != wantHost[i] {
				t.Errorf("line %d: %+v, want %s of host %q", r.Line, r, wantStatus[i], wantHost[i])
				continue
			}
			var h eim.Host
			if err := cl.Get(ctx, p, eim.KindHost, r.HostID, &h); err != nil {
				t.Fatal(err)
			}
			if h.Name != wantName[i] || h.SiteID != plant.ResourceID || !sameMetadata(h.Metadata, md) || h.Instance == nil || h.Instance.OSID != osID || h.Instance.ResourceID != r.InstanceID {
				t.Errorf("line %d: host %s name %q site %q metadata %v instance %+v", r.Line, h.ResourceID, h.Name, h.SiteID, h.Metadata, h.Instance)
			}
		}
		if n := hostCount(); n != before+2 {
			t.Errorf("hosts: %d, want %d (the two new lines')", n, before+2)
		}
	})
}

// listAll lists every resource of T's kind in project matching filter.
func listAll[T any, PT interface {
	*T
	eim.Resource
}](ctx context.Context, cl *client.Client, project, filter string) ([]PT, error) {
	var all []PT
	for offset := 0; ; {
		items, page, err := client.ListOf[T, PT](ctx, cl, project, client.ListOptions{Filter: filter, PageSize: 100, Offset: offset})
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		offset += len(items)
		if !page.HasNext || len(items) == 0 {
			return all, nil
		}
	}
}

// Answers lost on the way back: a proxy runs every third write of the
// import on the server but answers 503, and refuses every fifth without
// running it. The import looks each line's host up again instead of
// sending a registration or an instance twice: exactly one complete host
// per line.
func TestHostImportLostAnswers(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	tokenFile := filepath.Join(dataDir, adminTokenFile)
	admin := cliRunner{t: t, url: url, tokenFile: tokenFile}
	cl := client.New(url, strings.TrimSpace(string(must(os.ReadFile(tokenFile)))), nil)
	var region eim.Region
	admin.json(&region, "region", "create", "--name", "eu")
	var site eim.Site
	admin.json(&site, "site", "create", "--name", "plant", "--region", region.ResourceID)
	var o eim.OS
	if err := cl.Create(context.Background(), eim.DefaultProject, eim.KindOS, map[string]string{
		"name": "tiny-os", "profileName": "tiny-os", "imageUrl": "http://127.0.0.1:1/os.img", "sha256": strings.Repeat("ab", 32),
	}, &o); err != nil {
		t.Fatal(err)
	}

	target, _ := neturl.Parse(url)
	rp := httputil.NewSingleHostReverseProxy(target)
	var writes, lost, refused atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			rp.ServeHTTP(w, r)
			return
		}
		n := writes.Add(1)
		switch {
		case n%5 == 0:
			refused.Add(1)
		case n%3 == 0:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			lost.Add(1)
		default:
			rp.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"code":"Unavailable","message":"the answer was lost"}`))
	}))
	defer proxy.Close()

	f := newKillImportFile(t, cl, t.TempDir(), "lost", 40, "L1")
	var out, errOut bytes.Buffer
	if err := Main(context.Background(), []string{"--server", proxy.URL, "--token-file", tokenFile, "host", "import", f.path, "--wait", "1m", "-o", "json"}, &out, &errOut); err != nil {
		t.Fatalf("import: %v; stderr:\n%s", err, errOut.String())
	}
	t.Logf("%d writes: %d run with their answer lost, %d refused", writes.Load(), lost.Load(), refused.Load())
	if !strings.Contains(errOut.String(), "the server is unavailable (the answer was lost)") {
		t.Errorf("stderr does not say it waited:\n%s", errOut.String())
	}
	f.check(t, o.ResourceID, site.ResourceID, out.String(), statusImported)
}

func TestImportLineCompare(t *testing.T) {
	const u = "4c4c4544-2046-5310-8052-cac04f515233"
	line := func() *importLine {
		return &importLine{serial: "SN12345", uuid: strings.ToUpper(u), siteID: "site-00000001", osID: "os-00000001", secFeature: secNone,
			md: eim.Metadata{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}}
	}
	complete := func() *eim.Host {
		return &eim.Host{Meta: eim.Meta{ResourceID: "host-00000001"}, Name: "edge-1", SerialNumber: "SN12345", UUID: u, SiteID: "site-00000001",
			Metadata: eim.Metadata{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}},
			Instance: &eim.Instance{Meta: eim.Meta{ResourceID: "inst-00000001"}, OSID: "os-00000001", SecurityFeature: secNone}}
	}
	for _, tt := range []struct {
		name    string
		line    func(*importLine)
		host    func(*eim.Host)
		want    hostGap
		wantErr string
	}{
		{name: "as the line says, whoever made it"},
		{name: "a UUID-only line; the host also has a serial", line: func(l *importLine) { l.serial = "" }},
		{name: "made by an import, registered only", host: func(h *eim.Host) {
			h.Name, h.SiteID, h.Metadata, h.Instance = line().importMarker(), "", nil, nil
		}, want: hostGap{place: true, instance: true, rename: true}},
		{name: "made by an import, placed", host: func(h *eim.Host) { h.Name, h.Instance = line().importMarker(), nil },
			want: hostGap{instance: true, rename: true}},
		{name: "made by an import, not yet named", host: func(h *eim.Host) { h.Name = line().importMarker() }, want: hostGap{rename: true}},
		{name: "by hand, without its instance", host: func(h *eim.Host) { h.Instance = nil }, wantErr: `without its instance, and not by eim host import (its name is "edge-1")`},
		{name: "another site", host: func(h *eim.Host) { h.SiteID = "site-00000002" }, wantErr: "site site-00000002, not site-00000001"},
		{name: "other metadata", host: func(h *eim.Host) { h.Metadata = eim.Metadata{{Key: "a", Value: "9"}} }, wantErr: "metadata a=9, not a=1&b=2"},
		{name: "another OS", host: func(h *eim.Host) { h.Instance.OSID = "os-00000002" }, wantErr: "of OS os-00000002, not os-00000001"},
		{name: "an instance the line does not ask for", line: func(l *importLine) { l.osID = "" }, wantErr: "the line names no OSProfile"},
		{name: "another serial for the UUID", host: func(h *eim.Host) { h.SerialNumber = "SN99999" }, wantErr: "serial number SN99999, not SN12345"},
		{name: "no UUID", host: func(h *eim.Host) { h.UUID = "" }, wantErr: "UUID none, not " + strings.ToUpper(u)},
		{name: "another LVM size", line: func(l *importLine) { l.lvmGB = 40 }, wantErr: "LVMSize 0, not 40"},
		{name: "secure boot asked, not there", line: func(l *importLine) { l.secFeature = secSBFDE }, wantErr: "with SECURITY_FEATURE_NONE, not " + string(secSBFDE)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, h := line(), complete()
			if tt.line != nil {
				tt.line(l)
			}
			if tt.host != nil {
				tt.host(h)
			}
			g, err := l.compare(h)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("got %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error saying %q", err, tt.wantErr)
			case tt.wantErr == "" && g != tt.want:
				t.Fatalf("got gap %+v, want %+v", g, tt.want)
			}
		})
	}
	if m := line().importMarker(); len(m) != 20 || !strings.HasPrefix(m, importMarkerPrefix) || m != (&importLine{serial: "sn12345", uuid: u}).importMarker() {
		t.Errorf("marker %q: want 20 characters, the prefix, and the same for the identity in any case", m)
	}
}

// TestHostImportBMC: lines with BMC columns get their BMC with their host
// (the password read from the environment or a file, never the file of
// hosts); a line whose BMC cell is wrong is refused naming the line and
// the column, with nothing created; a BMC the server refuses after the
// host was registered takes the host away again.
func TestHostImportBMC(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("EIM_TEST_BMC_PW", "ipmi-secret-1")
	pwFile := write("pw.txt", "redfish-secret-2\n")
	const hdr = "Serial,UUID,BMCProtocol,BMCAddress,BMCUsername,BMCPassword,BMCSystemID,BMCInsecure\n"
	good := write("bmcs.csv", hdr+
		"BMC0001,,IPMI,127.0.0.1:9623,admin,env:EIM_TEST_BMC_PW,,\n"+
		"BMC0002,,REDFISH,https://127.0.0.1:8443,root,file:"+pwFile+",1,true\n"+
		"BMC0003,,,,,,,\n")
	var results []importResult
	admin.json(&results, "host", "import", good)
	if len(results) != 3 {
		t.Fatalf("results: %+v", results)
	}
	for _, r := range results {
		if r.Error != "" || r.Status != statusImported {
			t.Fatalf("line %d: %+v", r.Line, r)
		}
	}
	var b eim.BMCView
	admin.json(&b, "host", "bmc", "get", results[0].HostID)
	if b.Protocol != "IPMI" || b.Address != "127.0.0.1:9623" || b.Username != "admin" || !b.PasswordSet {
		t.Errorf("line 2's BMC: %+v", b)
	}
	admin.json(&b, "host", "bmc", "get", results[1].HostID)
	if b.Protocol != "REDFISH" || b.SystemID != "1" || !b.Insecure || !b.PasswordSet {
		t.Errorf("line 3's BMC: %+v", b)
	}
	var h eim.Host
	admin.json(&h, "host", "get", results[1].HostID)
	if h.BmcKind != eim.BaremetalControllerKindRedfish || h.BmcIP != "127.0.0.1" || h.Name != "BMC0002" {
		t.Errorf("line 3's host: bmcKind %s bmcIp %q name %q", h.BmcKind, h.BmcIP, h.Name)
	}
	if _, err := admin.run("host", "bmc", "get", results[2].HostID); err == nil {
		t.Errorf("line 4 has no BMC columns, yet its host has a BMC")
	}
	// Again: unchanged.
	var again []importResult
	admin.json(&again, "host", "import", good)
	for i, r := range again {
		if r.Status != statusUnchanged || r.HostID != results[i].HostID {
			t.Errorf("line %d imported again: %+v, want unchanged", r.Line, r)
		}
	}

	// A password written in the file, an unset variable: refused, naming
	// line and column, never repeating the password; nothing created.
	bad := write("bad.csv", hdr+
		"BMC0010,,IPMI,127.0.0.1:9623,admin,hunter2,,\n"+
		"BMC0011,,IPMI,127.0.0.1:9624,admin,env:EIM_TEST_UNSET_PW,,\n"+
		"BMC0012,,IPMI,127.0.0.1:9625,admin,env:EIM_TEST_BMC_PW,,\n")
	_, err := admin.run("host", "import", bad)
	if err == nil || !strings.Contains(err.Error(), "2 of 3 lines are wrong") {
		t.Fatalf("import of bad BMC lines: %v", err)
	}
	recs := readCSV(t, filepath.Join(dir, "bad.errors.csv"))
	if len(recs) != 3 || !strings.Contains(recs[1][8], "BMCPassword: a password is not written in the file") ||
		!strings.Contains(recs[2][8], "BMCPassword: environment variable EIM_TEST_UNSET_PW is not set") {
		t.Fatalf("error file: %q", recs)
	}
	if strings.Contains(recs[1][8], "hunter2") {
		t.Errorf("the error repeats the password: %q", recs[1][8])
	}
	var list struct {
		Hosts []eim.Host `json:"hosts"`
	}
	admin.json(&list, "host", "list", "--filter", `serialNumber="BMC0012"`)
	if len(list.Hosts) != 0 {
		t.Fatalf("a file with wrong lines created %d hosts", len(list.Hosts))
	}

	// The server refuses the BMC (here: a password too long for IPMI,
	// which the file's check would have caught): the host goes again.
	cl := client.New(url, strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile))))), nil)
	long := strings.Repeat("x", 21)
	l := &importLine{n: 2, serial: "BMCROLL1", bmc: &eim.BMCInput{Protocol: "IPMI", Address: "127.0.0.1:9623", Username: "admin", Password: &long}}
	im := &importer{cl: cl, project: eim.DefaultProject, autoOnboard: true, wait: &serverWait{out: io.Discard, now: time.Now}}
	if err := im.importOne(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if l.hostID != "" || !strings.Contains(l.importError, "put the BMC") || !strings.Contains(l.importError, "password") || !strings.Contains(l.importError, "deleted again") {
		t.Fatalf("rolled back line: host %q error %q", l.hostID, l.importError)
	}
	admin.json(&list, "host", "list", "--filter", `serialNumber="BMCROLL1"`)
	for _, h := range list.Hosts {
		if h.DesiredState != eim.HostStateDeleted {
			t.Errorf("rolled back host %s: desired %s, want DELETED", h.ResourceID, h.DesiredState)
		}
	}
}

// TestPowerPolicyCLI: the power policy is set on a project, a site and a
// BMC from the CLI, and a bad value is refused naming the field.
func TestPowerPolicyCLI(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	var p struct {
		Settings struct {
			PowerPolicy string `json:"powerPolicy"`
		} `json:"settings"`
	}
	admin.json(&p, "project", "set", eim.DefaultProject, "--power-policy", "always_on")
	if p.Settings.PowerPolicy != "ALWAYS_ON" {
		t.Errorf("project: powerPolicy %q, want ALWAYS_ON", p.Settings.PowerPolicy)
	}
	admin.json(&p, "project", "set", eim.DefaultProject, "--power-policy", "none")
	if p.Settings.PowerPolicy != "" {
		t.Errorf("project after none: powerPolicy %q, want unset", p.Settings.PowerPolicy)
	}
	if _, err := admin.run("project", "set", eim.DefaultProject, "--power-policy", "SOMETIMES"); err == nil || !strings.Contains(err.Error(), "powerPolicy") {
		t.Errorf("project set --power-policy SOMETIMES: %v, want refused naming powerPolicy", err)
	}
	var site eim.Site
	admin.json(&site, "site", "create", "--name", "plant", "--power-policy", "ALWAYS_ON")
	if site.PowerPolicy != eim.PowerPolicyAlwaysOn {
		t.Errorf("site: powerPolicy %q, want ALWAYS_ON", site.PowerPolicy)
	}
	var plain eim.Site
	admin.json(&plain, "site", "create", "--name", "plain")
	if raw := admin.must("site", "get", plain.ResourceID, "-o", "json"); strings.Contains(raw, "powerPolicy") {
		t.Errorf("a site without a power policy shows the extension field: %s", raw)
	}
	if _, err := admin.run("site", "create", "--name", "bad", "--power-policy", "ON"); err == nil || !strings.Contains(err.Error(), "powerPolicy") {
		t.Errorf("site create --power-policy ON: %v, want refused naming powerPolicy", err)
	}
	var h eim.Host
	admin.json(&h, "host", "register", "--serial", "PP00001")
	var b eim.BMCView
	admin.json(&b, "host", "bmc", "set", h.ResourceID, "--protocol", "IPMI", "--address", "127.0.0.1:9623", "--username", "admin", "--password", "pw", "--power-policy", "REPORT")
	if b.PowerPolicy != "REPORT" {
		t.Errorf("BMC: powerPolicy %q, want REPORT", b.PowerPolicy)
	}
}
