package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// "eim host import" against a server that is SIGKILLed at a random moment
// of the import (the kill harness of kill_e2e_test.go) and restarted on the
// same data directory and ports: with a long enough --wait the import rides
// the restarts out; with a short one it stops, and importing its error file
// and then the whole file again finishes it. Either way every line ends as
// exactly one complete host, with no step by hand.
func TestHostImportKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server process")
	}
	s := startKillServer(t)
	ctx := context.Background()
	p := eim.DefaultProject
	var region eim.Region
	var site eim.Site
	if err := s.admin.Create(ctx, p, eim.KindRegion, map[string]any{"name": "eu"}, &region); err != nil {
		t.Fatal(err)
	}
	if err := s.admin.Create(ctx, p, eim.KindSite, map[string]any{"name": "plant", "regionId": region.ResourceID}, &site); err != nil {
		t.Fatal(err)
	}
	osID := s.day0().createOS(t, p)
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	dir := t.TempDir()

	// killWhile kills the server once the import r has made between a
	// tenth and two thirds of its lines' hosts (a random number of them,
	// and a random few milliseconds more), keeps it down until down's
	// channel is closed, and starts it again. It reports whether it killed:
	// the import may end first.
	killWhile := func(t *testing.T, f *killImportFile, r *importRun, down func() <-chan struct{}) bool {
		t.Helper()
		at := len(f.lines)/10 + rnd.IntN(len(f.lines)*2/3-len(f.lines)/10)
		for {
			select {
			case <-r.done:
				t.Logf("the import ended (%v) before %d hosts were made; no kill", r.err, at)
				return false
			default:
			}
			if sum, err := s.admin.HostSummary(ctx, p, ""); err == nil && sum.Total-f.before >= at {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rnd.IntN(20)) * time.Millisecond)
		apiAddr, agentAddr := hostPort(t, s.api), hostPort(t, s.agentURL)
		s.kill()
		<-down()
		s.start(t, apiAddr, agentAddr)
		t.Logf("killed after %d+ hosts of %d lines", at, len(f.lines))
		return true
	}
	sleep := func(d time.Duration) func() <-chan struct{} {
		return func() <-chan struct{} {
			c := make(chan struct{})
			time.AfterFunc(d, func() { close(c) })
			return c
		}
	}

	t.Run("the import waits for the server", func(t *testing.T) {
		f := newKillImportFile(t, s.admin, dir, "wait", 250, "K1")
		r := runImport(s, f.path, "--wait", "1m")
		killed := killWhile(t, f, r, sleep(time.Duration(300+rnd.IntN(1200))*time.Millisecond))
		if killed && rnd.IntN(2) == 0 {
			killWhile(t, f, r, sleep(time.Duration(rnd.IntN(500))*time.Millisecond))
		}
		if err := r.wait(t); err != nil {
			t.Fatalf("import: %v; stderr:\n%s", err, r.errOut.String())
		}
		if killed && (!strings.Contains(r.errOut.String(), "the server is unavailable") || !strings.Contains(r.errOut.String(), "the server is back after")) {
			t.Errorf("stderr does not say it waited for the server:\n%s", r.errOut.String())
		}
		f.check(t, osID, site.ResourceID, r.out.String(), statusImported, statusCompleted)
	})

	t.Run("the import stops, and is imported again", func(t *testing.T) {
		f := newKillImportFile(t, s.admin, dir, "rerun", 250, "K2")
		r := runImport(s, f.path, "--wait", "300ms")
		// Down until the import has given up.
		if !killWhile(t, f, r, func() <-chan struct{} { return r.done }) {
			t.Skip("the import finished before the kill")
		}
		if r.err == nil || !strings.Contains(r.err.Error(), "did not come back") {
			t.Fatalf("import with the server gone: %v; stderr:\n%s", r.err, r.errOut.String())
		}
		half := 0
		for _, h := range must(listAll[eim.Host](ctx, s.admin, p, "")) {
			if strings.HasPrefix(h.Name, importMarkerPrefix) {
				half++
			}
		}
		errFile := filepath.Join(dir, "rerun.errors.csv")
		t.Logf("stopped (%v); %d hosts half made, %d lines in the error file", r.err, half, len(readCSV(t, errFile))-1)

		// The error file, then the whole file.
		r = runImport(s, errFile, "--wait", "1m")
		if err := r.wait(t); err != nil {
			t.Fatalf("import of the error file: %v; stderr:\n%s", err, r.errOut.String())
		}
		r = runImport(s, f.path, "--wait", "1m")
		if err := r.wait(t); err != nil {
			t.Fatalf("import again: %v; stderr:\n%s", err, r.errOut.String())
		}
		f.check(t, osID, site.ResourceID, r.out.String(), statusUnchanged)
	})
}

// importRun is "eim host import" running in the background.
type importRun struct {
	done        chan struct{} // closed when it ended, err set
	err         error
	out, errOut syncBuffer
}

// runImport runs "eim host import path" against s in the background.
func runImport(s *killServer, path string, flags ...string) *importRun {
	r := &importRun{done: make(chan struct{})}
	args := append([]string{"--server", s.api, "--token-file", filepath.Join(s.dataDir, adminTokenFile), "host", "import", path, "--workers", "8", "-o", "json"}, flags...)
	go func() {
		defer close(r.done)
		r.err = Main(context.Background(), args, &r.out, &r.errOut)
	}()
	return r
}

// wait waits for the run to end and returns its error.
func (r *importRun) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(2 * time.Minute):
		t.Fatalf("the import did not end within 2 minutes; stderr:\n%s", r.errOut.String())
		return nil
	}
}

// killImportFile is a file of hosts of every shape an import makes: with
// serial number and UUID, one of the two, with and without a site and
// metadata, with and without an OS.
type killImportFile struct {
	cl     *client.Client
	path   string
	before int // hosts in the project before the import
	lines  []killImportLine
}

type killImportLine struct {
	serial, uuid string
	md           string // the metadata, "" when the line has no site either
	os           bool
}

func newKillImportFile(t *testing.T, cl *client.Client, dir, name string, n int, prefix string) *killImportFile {
	t.Helper()
	sum, err := cl.HostSummary(context.Background(), eim.DefaultProject, "")
	if err != nil {
		t.Fatal(err)
	}
	f := &killImportFile{cl: cl, path: filepath.Join(dir, name+".csv"), before: sum.Total}
	var b strings.Builder
	b.WriteString("Serial,UUID,OSProfile,Site,Metadata\n")
	for i := range n {
		l := killImportLine{serial: fmt.Sprintf("%s%05d", prefix, i), uuid: fmt.Sprintf("4c4c4544-%04x-4000-8000-%012d", prefix[len(prefix)-1], i), md: fmt.Sprintf("line=%d", i), os: true}
		switch i % 10 {
		case 3:
			l.serial = ""
		case 5:
			l.os = false
		case 7:
			l.uuid, l.md, l.os = "", "", false
		}
		f.lines = append(f.lines, l)
		fmt.Fprintf(&b, "%s,%s,", l.serial, strings.ToUpper(l.uuid))
		if l.os {
			b.WriteString("tiny-os")
		}
		if l.md != "" {
			fmt.Fprintf(&b, ",plant,%s\n", l.md)
		} else {
			b.WriteString(",,\n")
		}
	}
	if err := os.WriteFile(f.path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// check checks that every line of f is exactly one live, complete host of
// the project, as the line describes it, and that no other host was made;
// out is the last import's JSON output, each line of which has one of the
// statuses.
func (f *killImportFile) check(t *testing.T, osID, siteID, out string, statuses ...string) {
	t.Helper()
	var results []importResult
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("the import's output: %v: %s", err, out)
	}
	if len(results) != len(f.lines) {
		t.Errorf("the import printed %d lines, want %d", len(results), len(f.lines))
	}
	for _, r := range results {
		if r.Error != "" || !slices.Contains(statuses, r.Status) {
			t.Errorf("line %d: %+v, want one of %v", r.Line, r, statuses)
		}
	}
	all, err := listAll[eim.Host](context.Background(), f.cl, eim.DefaultProject, "")
	if err != nil {
		t.Fatal(err)
	}
	byUUID, bySerial := map[string][]*eim.Host{}, map[string][]*eim.Host{}
	live := 0
	for _, h := range all {
		if h.DesiredState == eim.HostStateDeleted {
			continue
		}
		live++
		if h.UUID != "" {
			// Kept as written (the file has them in capitals), compared
			// without regard to case.
			u := strings.ToLower(h.UUID)
			byUUID[u] = append(byUUID[u], h)
		}
		if h.SerialNumber != "" {
			bySerial[h.SerialNumber] = append(bySerial[h.SerialNumber], h)
		}
	}
	if want := f.before + len(f.lines); live != want {
		t.Errorf("live hosts: %d, want %d (%d before, and one per line)", live, want, f.before)
	}
	for i, l := range f.lines {
		hs := byUUID[l.uuid]
		if l.uuid == "" {
			hs = bySerial[l.serial]
		}
		if len(hs) != 1 {
			t.Errorf("line %d (%s %s): %d hosts, want 1", i+2, l.serial, l.uuid, len(hs))
			continue
		}
		h := hs[0]
		wantSite, wantMD, wantName := "", "", cmp.Or(l.serial, l.uuid)
		if l.md != "" {
			wantSite, wantMD = siteID, l.md
		}
		switch {
		case h.SerialNumber != l.serial, h.Name != wantName, h.SiteID != wantSite, formatMetadata(h.Metadata) != wantMD:
			t.Errorf("line %d: host %s serial %q name %q site %q metadata %q; want %q %q %q %q", i+2, h.ResourceID, h.SerialNumber, h.Name, h.SiteID, formatMetadata(h.Metadata), l.serial, wantName, wantSite, wantMD)
		case l.os && (h.Instance == nil || h.Instance.OSID != osID):
			t.Errorf("line %d: host %s instance %+v, want one of OS %s", i+2, h.ResourceID, h.Instance, osID)
		case !l.os && h.Instance != nil:
			t.Errorf("line %d: host %s has instance %s, want none", i+2, h.ResourceID, h.Instance.ResourceID)
		}
	}
}
