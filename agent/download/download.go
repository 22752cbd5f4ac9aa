// Package download brings the files of a device workload's ingress data
// paths from object storage to the device, through grants: the server
// lists the data path's objects with its own credentials and gives leave
// to GET each (a presigned URL), so that the device never holds the
// storage's credentials.
//
// A Syncer makes one pass over a data path at a time (Sync): it asks the
// Lister for the objects, downloads those that changed since the last
// pass (another entity tag or size than the manifest records) or whose
// local copy was changed or removed, each into a temporary file renamed
// into place (a reader never sees half a file), at most at the data
// path's bandwidth, removes the files it downloaded whose object is gone,
// and reports what it did and what failed. The manifest (what each file
// was downloaded as) is kept in a state file per data path, so that a
// restart or a reboot downloads only what changed since.
//
// The directory is opened as an os.Root: a symbolic link the workload
// plants is neither followed nor written through. Files the workload
// writes itself into the directory are left alone unless an object of the
// same path overwrites them.
package download

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/eimhq/eim/agent/pathstate"
	"github.com/eimhq/eim/internal/throttle"
)

// Path is one ingress data path of a workload.
type Path struct {
	Workload string
	// Dir is the directory on the device (DataPath.source).
	Dir string
	// Target names the data path to the server (DataPath.target).
	Target string
	// BytesPerSecond bounds the receiving (0: no bound).
	BytesPerSecond int64
}

// File is an object of a data path with leave to GET it.
type File struct {
	Path    string // relative to the data path, slash-separated
	Size    int64
	ETag    string
	URL     string
	Headers [][2]string
}

// Failure is a path that could not be downloaded or removed, and why.
type Failure struct {
	Path   string
	Reason string
}

// Lister is the server's side of a pass.
type Lister interface {
	// List returns the data path's files, when their grants expire, and
	// whether the listing was cut short (files after the last path left
	// out).
	List(ctx context.Context, workload, target string) (files []File, expires time.Time, truncated bool, err error)
	// Report records a pass's outcome.
	Report(ctx context.Context, workload, target string, done []string, failed []Failure) error
}

// Result is the outcome of a pass.
type Result struct {
	Done   []string // paths downloaded or removed
	Failed []Failure
	// Truncated: the store holds more files than one listing; those after
	// the last listed path were neither downloaded nor removed.
	Truncated bool
}

// Syncer makes passes over ingress data paths, one at a time; a pass is
// not safe to run concurrently with another of the same data path.
type Syncer struct {
	Lister Lister
	// Client sends the grants' GETs (http.DefaultClient when nil).
	Client *http.Client
	// StateDir keeps each data path's manifest; "" keeps it in memory
	// (every file is downloaded again after a restart).
	StateDir string
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	manifests pathstate.Store[manifest]
}

// manifest is what a data path downloaded, by path.
type manifest struct {
	Files map[string]entry `json:"files"`
	// Failed: the last pass reported failures, so the next one reports
	// even when it has nothing to say (which clears them).
	Failed bool `json:"failed,omitempty"`
}

type entry struct {
	ETag string `json:"etag"`
	Size int64  `json:"size"`
	// MTime is the local file's modification time once in place (Unix
	// nanoseconds): another one says the workload changed it.
	MTime int64 `json:"mtime"`
}

// tempPrefix names the temporary files of downloads, at the top of the
// data path's directory; an object of such a name is refused.
const tempPrefix = ".eim-download-"

const maxReason = 500

// Sync makes one pass over p. It returns an error when the pass could not
// be made at all (the server unreachable, the directory unusable); files
// that failed are in Result.Failed and were reported.
func (s *Syncer) Sync(ctx context.Context, p Path) (Result, error) {
	if p.Workload == "" || strings.ContainsAny(p.Workload, `/\`) || p.Workload == "." || p.Workload == ".." || p.Target == "" || !filepath.IsAbs(p.Dir) {
		return Result{}, fmt.Errorf("data path %q of %q: workload, target and an absolute directory are required", p.Target, p.Workload)
	}
	m, err := s.load(p)
	if err != nil {
		return Result{}, err
	}
	files, expires, truncated, err := s.Lister.List(ctx, p.Workload, p.Target)
	if err != nil {
		return Result{}, fmt.Errorf("list downloads: %w", err)
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("data path %s: %w", p.Dir, err)
	}
	root, err := os.OpenRoot(p.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("data path %s: %w", p.Dir, err)
	}
	defer root.Close()
	removeTemps(root)

	res := Result{Truncated: truncated}
	lim := throttle.NewLimiter(p.BytesPerSecond)
	pending := s.changed(root, m, files, &res)
	stale := 0 // listings in a row whose grants had all expired
	for len(pending) > 0 {
		var again []string
		for i, f := range pending {
			// A grant about to expire is asked for again rather than
			// used to fail half-way.
			if !expires.IsZero() && s.now().After(expires.Add(-5*time.Second)) {
				for _, g := range pending[i:] {
					again = append(again, g.Path)
				}
				break
			}
			e, err := s.fetch(ctx, root, f, lim)
			if err != nil {
				if ctx.Err() != nil {
					return res, context.Cause(ctx)
				}
				res.Failed = append(res.Failed, Failure{Path: f.Path, Reason: trim(err.Error())})
				continue
			}
			m.Files[f.Path] = e
			res.Done = append(res.Done, f.Path)
			if err := s.save(p, m); err != nil {
				return res, err
			}
		}
		if len(again) == 0 {
			break
		}
		if len(again) < len(pending) {
			stale = 0
		} else if stale++; stale >= 2 {
			return res, fmt.Errorf("list downloads: the grants expire before they can be used (at %s; is the clock right?)", expires.Format(time.RFC3339))
		}
		if files, expires, truncated, err = s.Lister.List(ctx, p.Workload, p.Target); err != nil {
			return res, fmt.Errorf("list downloads: %w", err)
		}
		res.Truncated = truncated
		want := map[string]bool{}
		for _, a := range again {
			want[a] = true
		}
		var next []File
		for _, f := range files {
			if want[f.Path] {
				next = append(next, f)
			}
		}
		var ignored Result // bad paths were reported with the first listing
		pending = s.changed(root, m, next, &ignored)
	}
	s.removeGone(root, m, files, res.Truncated, &res)
	if err := s.save(p, m); err != nil {
		return res, err
	}
	if len(res.Done) > 0 || len(res.Failed) > 0 || m.Failed {
		if err := s.Lister.Report(ctx, p.Workload, p.Target, res.Done, res.Failed); err != nil {
			return res, fmt.Errorf("report downloads: %w", err)
		}
		m.Failed = len(res.Failed) > 0
		if err := s.save(p, m); err != nil {
			return res, err
		}
	}
	return res, nil
}

// changed returns the files of the listing to download: not in the
// manifest, listed with another entity tag or size, or whose local copy
// is not what was downloaded. A path that is not a plain relative path is
// a failure.
func (s *Syncer) changed(root *os.Root, m *manifest, files []File, res *Result) []File {
	var out []File
	for _, f := range files {
		if why := CheckPath(f.Path); why != "" {
			res.Failed = append(res.Failed, Failure{Path: f.Path, Reason: "refused: " + why})
			continue
		}
		e, ok := m.Files[f.Path]
		if ok && e.ETag == f.ETag && e.Size == f.Size {
			fi, err := root.Lstat(f.Path)
			if err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size && fi.ModTime().UnixNano() == e.MTime {
				continue
			}
		}
		out = append(out, f)
	}
	return out
}

// CheckPath says why p may not be a downloaded file's path ("" when it
// may): it must be relative, slash-separated, of plain segments, and not
// a download's temporary name.
func CheckPath(p string) string {
	switch {
	case p == "" || len(p) > 1024:
		return "the path must have 1 to 1024 bytes"
	case !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return fmt.Sprintf("%q holds a control character, a backslash or bad UTF-8", p)
	case strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Sprintf("%q is not a clean relative path", p)
	case strings.HasPrefix(p, tempPrefix):
		return fmt.Sprintf("%q is a name the agent keeps for its temporary files", p)
	}
	return ""
}

// fetch downloads f into a temporary file and renames it into place.
func (s *Syncer) fetch(ctx context.Context, root *os.Root, f File, lim *rate.Limiter) (entry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.URL, nil)
	if err != nil {
		return entry{}, fmt.Errorf("grant URL: %w", err)
	}
	for _, h := range f.Headers {
		if strings.EqualFold(h[0], "Host") {
			req.Host = h[1]
			continue
		}
		req.Header.Add(h[0], h[1])
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return entry{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return entry{}, fmt.Errorf("GET: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	// The object may have changed since it was listed: what is written
	// is recorded as the answer describes it, so the next listing of the
	// same content matches.
	size, etag := f.Size, f.ETag
	if resp.ContentLength >= 0 {
		size = resp.ContentLength
	}
	if t := strings.Trim(resp.Header.Get("ETag"), `"`); t != "" {
		etag = t
	}
	if dir := path.Dir(f.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return entry{}, err
		}
	}
	tmp := tempPrefix + randomHex()
	out, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return entry{}, err
	}
	n, err := io.Copy(out, throttle.Reader(ctx, io.LimitReader(resp.Body, size+1), lim))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("GET: %d bytes, want %d", n, size)
	}
	if err == nil {
		err = root.Rename(tmp, f.Path)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return entry{}, err
	}
	fi, err := root.Lstat(f.Path)
	if err != nil {
		return entry{}, err
	}
	return entry{ETag: etag, Size: n, MTime: fi.ModTime().UnixNano()}, nil
}

// removeGone removes the files of the manifest whose object is not in the
// listing. When the listing was cut short, only those before its last
// path: the others may be beyond the cut.
func (s *Syncer) removeGone(root *os.Root, m *manifest, files []File, truncated bool, res *Result) {
	listed := map[string]bool{}
	last := ""
	for _, f := range files {
		listed[f.Path] = true
		last = max(last, f.Path)
	}
	var gone []string
	for p := range m.Files {
		if !listed[p] && (!truncated || p < last) {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		err := root.Remove(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Failed = append(res.Failed, Failure{Path: p, Reason: trim("remove: " + err.Error())})
			continue
		}
		delete(m.Files, p)
		res.Done = append(res.Done, p)
		// Directories left empty go too (a non-empty one refuses).
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if root.Remove(dir) != nil {
				break
			}
		}
	}
}

// removeTemps removes the temporary files a pass cut short left behind.
func removeTemps(root *os.Root) {
	d, err := root.Open(".")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if strings.HasPrefix(n, tempPrefix) {
			_ = root.Remove(n)
		}
	}
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func trim(s string) string {
	if len(s) <= maxReason {
		return s
	}
	return strings.ToValidUTF8(s[:maxReason], "")
}

func (s *Syncer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Syncer) load(p Path) (*manifest, error) {
	s.manifests.Dir, s.manifests.Name = s.StateDir, "download manifest"
	// A damaged manifest has every file downloaded again (harmless), and
	// none known to remove.
	return s.manifests.Load(p.Workload, p.Target, func() *manifest { return &manifest{Files: map[string]entry{}} },
		func(m *manifest) bool { return m.Files != nil })
}

func (s *Syncer) save(p Path, m *manifest) error {
	s.manifests.Dir, s.manifests.Name = s.StateDir, "download manifest"
	return s.manifests.Save(p.Workload, p.Target, m)
}

// Forget drops the manifests of a workload's data paths (it was removed):
// a workload of that name starts afresh.
func (s *Syncer) Forget(workload string) error {
	s.manifests.Dir, s.manifests.Name = s.StateDir, "download manifest"
	return s.manifests.Forget(workload)
}
