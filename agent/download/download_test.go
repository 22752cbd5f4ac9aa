package download_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/download"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/seal"
)

const (
	project = "p"
	host    = "host-0000abcd"
)

// store is the embedded store of a real objstore.Service, served over
// real HTTP (its agent routes), and a Lister that asks the service for
// grants as the workloads module does (the device's prefix, then the
// workload's shared one).
type store struct {
	t    *testing.T
	dir  string // the server's data directory
	svc  *objstore.Service
	srv  *httptest.Server
	gets int // GETs served

	lists   int
	reports [][]string // done paths then "!"+failed paths, per report
	// expireFirst makes the first listing's grants expired already.
	expireFirst bool
	// rewrite, if set, edits the listing (a misbehaving server).
	rewrite func([]download.File) []download.File
	// truncate is the number of files a listing holds (0 all).
	truncate int
}

func newStore(t *testing.T) *store {
	t.Helper()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key, err := seal.New(raw)
	if err != nil {
		t.Fatal(err)
	}
	s := &store{t: t, dir: t.TempDir()}
	mux := http.NewServeMux()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			s.gets++
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	s.svc, err = objstore.New(objstore.Options{Store: noStorage{}, Authenticator: noAuth{}, Key: key, DataDir: s.dir,
		AgentURL: s.srv.URL, GrantBurst: 1 << 20, GrantRate: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for pat, h := range s.svc.AgentRoutes() {
		mux.Handle(pat, h)
	}
	return s
}

// put writes an object of the embedded store (as an operator's PUT does).
func (s *store) put(key, content string) {
	s.t.Helper()
	p := filepath.Join(s.dir, "objects", project, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		s.t.Fatal(err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
	// A later write is a newer file, as the store's own writes are.
	now := time.Now().Add(time.Duration(s.lists) * time.Millisecond)
	if err := os.Chtimes(tmp, now, now); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		s.t.Fatal(err)
	}
}

func (s *store) del(key string) {
	s.t.Helper()
	if err := os.Remove(filepath.Join(s.dir, "objects", project, filepath.FromSlash(key))); err != nil {
		s.t.Fatal(err)
	}
}

func (s *store) List(ctx context.Context, workload, target string) ([]download.File, time.Time, bool, error) {
	s.lists++
	gs, truncated, expires, err := s.svc.GrantDownloads(ctx, project, []string{host + "/" + workload + "/" + target + "/", eim.SharedIngressPrefix(workload, target)})
	if err != nil {
		return nil, time.Time{}, false, err
	}
	var out []download.File
	for _, g := range gs {
		out = append(out, download.File{Path: g.Path, Size: g.Size, ETag: g.ETag, URL: g.URL})
	}
	if s.rewrite != nil {
		out = s.rewrite(out)
	}
	if s.truncate > 0 && len(out) > s.truncate {
		out, truncated = out[:s.truncate], true
	}
	if s.expireFirst && s.lists == 1 {
		expires = time.Now().Add(-time.Minute)
	}
	return out, expires, truncated, nil
}

func (s *store) Report(_ context.Context, _, _ string, done []string, failed []download.Failure) error {
	r := slices.Clone(done)
	for _, f := range failed {
		r = append(r, "!"+f.Path)
	}
	s.reports = append(s.reports, r)
	return nil
}

// tree is the files under dir, path → content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func same(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSync: a sequence of passes over one ingress data path, each after
// a change in the store or on the device, with the device's files, the
// files downloaded or removed, and the report after each.
func TestSync(t *testing.T) {
	s := newStore(t)
	dev := t.TempDir()
	dir := filepath.Join(dev, "data", "models")
	state := filepath.Join(dev, "state")
	p := download.Path{Workload: "cam", Dir: dir, Target: "models"}
	own := host + "/cam/models/"
	shared := eim.SharedIngressPrefix("cam", "models")
	syncer := &download.Syncer{Lister: s, StateDir: state}

	for _, step := range []struct {
		name    string
		change  func()
		want    map[string]string
		done    []string // downloaded or removed, in order
		gets    int      // GETs the pass made
		reports int      // reports made so far
	}{
		{"first pass: shared and own files, own winning", func() {
			s.put(shared+"a.cfg", "shared a")
			s.put(shared+"sub/b.bin", "shared b")
			s.put(shared+"c.txt", "shared c")
			s.put(own+"c.txt", "own c")
		}, map[string]string{"a.cfg": "shared a", "sub/b.bin": "shared b", "c.txt": "own c"}, []string{"a.cfg", "c.txt", "sub/b.bin"}, 3, 1},
		{"nothing changed: no GET, no report", func() {}, map[string]string{"a.cfg": "shared a", "sub/b.bin": "shared b", "c.txt": "own c"}, nil, 0, 1},
		{"a changed object is downloaded again", func() { s.put(shared+"a.cfg", "shared a, v2") },
			map[string]string{"a.cfg": "shared a, v2", "sub/b.bin": "shared b", "c.txt": "own c"}, []string{"a.cfg"}, 1, 2},
		{"the own file gone: the shared one shows through", func() { s.del(own + "c.txt") },
			map[string]string{"a.cfg": "shared a, v2", "sub/b.bin": "shared b", "c.txt": "shared c"}, []string{"c.txt"}, 1, 3},
		{"a deleted object's file is removed, and its empty directory", func() { s.del(shared + "sub/b.bin") },
			map[string]string{"a.cfg": "shared a, v2", "c.txt": "shared c"}, []string{"sub/b.bin"}, 0, 4},
		{"a file the workload changed is restored; its own files stay", func() {
			if err := os.WriteFile(filepath.Join(dir, "a.cfg"), []byte("edited"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "mine.log"), []byte("pod's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a.cfg": "shared a, v2", "c.txt": "shared c", "mine.log": "pod's"}, []string{"a.cfg"}, 1, 5},
		{"a file the workload removed comes back", func() {
			if err := os.Remove(filepath.Join(dir, "c.txt")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"a.cfg": "shared a, v2", "c.txt": "shared c", "mine.log": "pod's"}, []string{"c.txt"}, 1, 6},
		{"a restart (a new syncer, the same state) downloads nothing", func() {
			syncer = &download.Syncer{Lister: s, StateDir: state}
		}, map[string]string{"a.cfg": "shared a, v2", "c.txt": "shared c", "mine.log": "pod's"}, nil, 0, 6},
		{"empty objects are files too", func() { s.put(own+"empty", "") },
			map[string]string{"a.cfg": "shared a, v2", "c.txt": "shared c", "mine.log": "pod's", "empty": ""}, []string{"empty"}, 1, 7},
	} {
		step.change()
		gets := s.gets
		res, err := syncer.Sync(t.Context(), p)
		if err != nil {
			t.Fatalf("%s: Sync: %v", step.name, err)
		}
		if got := tree(t, dir); !same(got, step.want) {
			t.Errorf("%s: files: got %v, want %v", step.name, got, step.want)
		}
		if !slices.Equal(res.Done, step.done) || len(res.Failed) != 0 {
			t.Errorf("%s: done %v, failed %v; want %v and none", step.name, res.Done, res.Failed, step.done)
		}
		if got := s.gets - gets; got != step.gets {
			t.Errorf("%s: %d GETs, want %d", step.name, got, step.gets)
		}
		if len(s.reports) != step.reports {
			t.Errorf("%s: %d reports, want %d", step.name, len(s.reports), step.reports)
		}
	}
	// No temporary file is left, and the manifest is under the state
	// directory, by workload.
	if ents, _ := os.ReadDir(dir); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ".eim-") }) {
		t.Errorf("a temporary file is left in %s", dir)
	}
	// The data path still wanted: Prune leaves it.
	if n, err := syncer.Prune([]download.Path{p}); err != nil || n != 0 {
		t.Fatalf("Prune keeping the path: %d removed, %v; want none", n, err)
	}
	// Its workload removed: what was downloaded goes, the pod's own file
	// stays, and so does the manifest directory no longer.
	if n, err := syncer.Prune(nil); err != nil || n != 3 {
		t.Fatalf("Prune of the removed workload: %d removed, %v; want 3", n, err)
	}
	if got := tree(t, dir); !same(got, map[string]string{"mine.log": "pod's"}) {
		t.Errorf("after Prune: files %v, want the pod's own alone", got)
	}
	if _, err := os.Stat(filepath.Join(state, "cam")); !os.IsNotExist(err) {
		t.Errorf("after Prune, the manifests: %v, want none", err)
	}
}

// TestPrune: a revision without one of the workload's two ingress paths
// has that path's files removed (and only what the syncer downloaded:
// the pod's files and a file it put over a downloaded one's directory
// stay), the other path's kept; a data path moved to another directory
// has the old directory's files removed by its next pass; a cut download's
// partial file goes too; a syncer in memory prunes the same way.
func TestPrune(t *testing.T) {
	for _, mode := range []string{"disk", "memory"} {
		t.Run(mode, func(t *testing.T) {
			s := newStore(t)
			dev := t.TempDir()
			state := ""
			if mode == "disk" {
				state = filepath.Join(dev, "state")
			}
			models := download.Path{Workload: "cam", Dir: filepath.Join(dev, "data", "models"), Target: "models"}
			conf := download.Path{Workload: "cam", Dir: filepath.Join(dev, "data", "conf"), Target: "conf"}
			s.put(eim.SharedIngressPrefix("cam", "models")+"net.bin", "weights")
			s.put(eim.SharedIngressPrefix("cam", "models")+"sub/labels.txt", "cat")
			s.put(eim.SharedIngressPrefix("cam", "conf")+"cam.cfg", "fps=10")
			syncer := &download.Syncer{Lister: s, StateDir: state}
			for _, p := range []download.Path{models, conf} {
				if _, err := syncer.Sync(t.Context(), p); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(models.Dir, "sub", "pod.out"), []byte("pod's"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(models.Dir, "notes"), []byte("pod's"), 0o644); err != nil {
				t.Fatal(err)
			}
			// A partial file of a cut download, as a pass left it.
			partial := filepath.Join(models.Dir, ".eim-download-partial-x")
			if err := os.WriteFile(partial, []byte("half"), 0o644); err != nil {
				t.Fatal(err)
			}
			if n, err := syncer.Prune([]download.Path{conf}); err != nil || n != 2 {
				t.Fatalf("Prune without the models path: %d removed, %v; want 2", n, err)
			}
			if got := tree(t, models.Dir); !same(got, map[string]string{"sub/pod.out": "pod's", "notes": "pod's", ".eim-download-partial-x": "half"}) {
				t.Errorf("models after Prune: %v, want the pod's files alone (and the partial file no manifest names)", got)
			}
			if got := tree(t, conf.Dir); !same(got, map[string]string{"cam.cfg": "fps=10"}) {
				t.Errorf("conf after Prune: %v, want cam.cfg kept", got)
			}
			// The conf path moves to another directory: its next pass
			// removes the old directory's download.
			moved := conf
			moved.Dir = filepath.Join(dev, "data", "conf2")
			if _, err := syncer.Sync(t.Context(), moved); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, conf.Dir); len(got) != 0 {
				t.Errorf("the old conf directory after the move: %v, want empty", got)
			}
			if got := tree(t, moved.Dir); !same(got, map[string]string{"cam.cfg": "fps=10"}) {
				t.Errorf("the new conf directory: %v", got)
			}
			// Prune with the old place kept and the new one not: the
			// new one's files go.
			if n, err := syncer.Prune([]download.Path{conf}); err != nil || n != 1 {
				t.Fatalf("Prune of the moved path: %d removed, %v; want 1", n, err)
			}
			if got := tree(t, moved.Dir); len(got) != 0 {
				t.Errorf("the new conf directory after Prune: %v, want empty", got)
			}
		})
	}
}

// TestSyncRefused: what a pass refuses to do, each a failure reported
// while the other files are downloaded.
func TestSyncRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rewrite func([]download.File) []download.File
		plant   func(t *testing.T, dir, outside string)
		failed  string
	}{
		{"a path escaping the directory", func(fs []download.File) []download.File {
			return append(fs, download.File{Path: "../escape", Size: 1, ETag: "x", URL: fs[0].URL})
		}, nil, "../escape"},
		{"an absolute path", func(fs []download.File) []download.File {
			return append(fs, download.File{Path: "/etc/passwd", Size: 1, ETag: "x", URL: fs[0].URL})
		}, nil, "/etc/passwd"},
		{"a temporary file's name", func(fs []download.File) []download.File {
			return append(fs, download.File{Path: ".eim-download-x", Size: 1, ETag: "x", URL: fs[0].URL})
		}, nil, ".eim-download-x"},
		{"a grant the store refuses", func(fs []download.File) []download.File {
			return append(fs, download.File{Path: "short", Size: 1, ETag: "x", URL: strings.Replace(fs[0].URL, "sig=", "sig=0", 1)})
		}, nil, "short"},
		{"a symbolic link the workload planted", nil, func(t *testing.T, dir, outside string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
				t.Fatal(err)
			}
		}, "sub/b.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			s.rewrite = tc.rewrite
			s.put(eim.SharedIngressPrefix("cam", "in")+"a.txt", "a")
			s.put(eim.SharedIngressPrefix("cam", "in")+"sub/b.bin", "b")
			dev := t.TempDir()
			dir, outside := filepath.Join(dev, "in"), filepath.Join(dev, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.plant != nil {
				tc.plant(t, dir, outside)
			}
			syncer := &download.Syncer{Lister: s}
			res, err := syncer.Sync(t.Context(), download.Path{Workload: "cam", Dir: dir, Target: "in"})
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if len(res.Failed) != 1 || res.Failed[0].Path != tc.failed {
				t.Fatalf("failed: got %+v, want %s alone", res.Failed, tc.failed)
			}
			if got := tree(t, dir)["a.txt"]; got != "a" {
				t.Errorf("a.txt: got %q, want it downloaded", got)
			}
			if got := tree(t, outside); len(got) != 0 {
				t.Errorf("outside the directory: got %v, want nothing", got)
			}
			if len(s.reports) != 1 || !slices.Contains(s.reports[0], "!"+tc.failed) {
				t.Errorf("reports: got %v, want one naming %s", s.reports, tc.failed)
			}
			// The next pass, with nothing wrong, reports again (to clear
			// the errors), once.
			s.rewrite = nil
			if tc.plant != nil {
				_ = os.Remove(filepath.Join(dir, "sub"))
			}
			for range 2 {
				if _, err := syncer.Sync(t.Context(), download.Path{Workload: "cam", Dir: dir, Target: "in"}); err != nil {
					t.Fatal(err)
				}
			}
			if len(s.reports) != 2 || slices.ContainsFunc(s.reports[1], func(p string) bool { return strings.HasPrefix(p, "!") }) {
				t.Errorf("reports after the fix: got %v, want a second one without failures, and no third", s.reports)
			}
		})
	}
}

// TestSyncExpiredGrants: grants that expired before their turn are asked
// for again.
func TestSyncExpiredGrants(t *testing.T) {
	s := newStore(t)
	s.expireFirst = true
	s.put(host+"/cam/in/a.txt", "a")
	dir := filepath.Join(t.TempDir(), "in")
	res, err := (&download.Syncer{Lister: s}).Sync(t.Context(), download.Path{Workload: "cam", Dir: dir, Target: "in"})
	if err != nil || !slices.Equal(res.Done, []string{"a.txt"}) {
		t.Fatalf("Sync: %+v, %v; want a.txt", res, err)
	}
	if s.lists != 2 {
		t.Errorf("listings: got %d, want 2 (the first's grants expired)", s.lists)
	}
}

// TestSyncTruncated: a listing cut short removes no file beyond its last
// path.
func TestSyncTruncated(t *testing.T) {
	s := newStore(t)
	for _, k := range []string{"a", "b", "c"} {
		s.put(host+"/cam/in/"+k, k)
	}
	dir := filepath.Join(t.TempDir(), "in")
	syncer := &download.Syncer{Lister: s}
	p := download.Path{Workload: "cam", Dir: dir, Target: "in"}
	if _, err := syncer.Sync(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	s.truncate = 1
	s.del(host + "/cam/in/a")
	res, err := syncer.Sync(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !same(tree(t, dir), map[string]string{"b": "b", "c": "c"}) {
		t.Fatalf("after a truncated listing: %+v, files %v; want a removed, b and c kept", res, tree(t, dir))
	}
}

type noStorage struct{}

func (noStorage) PutObjectStorage(context.Context, *eim.ObjectStorage) error { return nil }
func (noStorage) GetObjectStorage(context.Context, string) (*eim.ObjectStorage, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}
func (noStorage) DeleteObjectStorage(context.Context, string) error { return nil }
func (noStorage) FindProject(context.Context, string) (*eim.Project, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}
func (noStorage) FindProjectByID(context.Context, string) (*eim.Project, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (*eim.Principal, error) {
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "no")
}

// TestSyncBandwidth: a data path's bound holds a download back: 96 KiB
// at 32 KiB/s take at least 2 s after the 32 KiB burst.
func TestSyncBandwidth(t *testing.T) {
	s := newStore(t)
	content := strings.Repeat("x", 96<<10)
	s.put(host+"/cam/in/a.bin", content)
	dir := filepath.Join(t.TempDir(), "in")
	start := time.Now()
	res, err := (&download.Syncer{Lister: s}).Sync(t.Context(), download.Path{Workload: "cam", Dir: dir, Target: "in", BytesPerSecond: 32 << 10})
	if err != nil || len(res.Done) != 1 {
		t.Fatalf("Sync: %+v, %v", res, err)
	}
	if took := time.Since(start); took < 2*time.Second-100*time.Millisecond {
		t.Errorf("96 KiB at 32 KiB/s took %v, want at least 2 s", took)
	}
	if got := tree(t, dir)["a.bin"]; got != content {
		t.Errorf("a.bin: got %d bytes, want %d", len(got), len(content))
	}
}
