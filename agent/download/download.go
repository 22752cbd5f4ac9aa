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
// A download cut short (the connection dropped, the agent stopped) keeps
// what it received in a partial file, recorded in the manifest with the
// object's entity tag and size. The next pass asks only for the rest (an
// HTTP Range request) when the listing still names the same entity tag
// and size, and takes the answer only when it is that range of that
// object (206, its Content-Range and ETag); anything else starts the file
// over.
//
// The directory is opened as an os.Root: a symbolic link the workload
// plants is neither followed nor written through. Files the workload
// writes itself into the directory are left alone unless an object of the
// same path overwrites them.
package download

import (
	"context"
	"crypto/sha256"
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
	"strconv"
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
	// Workload, Target and Dir name the data path (Prune removes the
	// files of one no longer wanted). Manifests written before they were
	// recorded have none: Prune leaves them.
	Workload string           `json:"workload,omitempty"`
	Target   string           `json:"target,omitempty"`
	Dir      string           `json:"dir,omitempty"`
	Files    map[string]entry `json:"files"`
	// Failed: the last pass reported failures, so the next one reports
	// even when it has nothing to say (which clears them).
	Failed bool `json:"failed,omitempty"`
	// Partial is the downloads cut short, by path: the object (entity tag
	// and size) whose first bytes the partial file holds (MTime unused).
	Partial map[string]entry `json:"partial,omitempty"`
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

// partialName is the partial file of a download of path, kept between
// passes: a digest of the path, so one name per path however long it is.
func partialName(p string) string {
	sum := sha256.Sum256([]byte(p))
	return tempPrefix + "partial-" + hex.EncodeToString(sum[:12])
}

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
	if m.Dir != "" && m.Dir != p.Dir {
		// The data path moved to another directory: what was downloaded
		// into the old one goes, and the new one starts afresh.
		if err := s.clear(m); err != nil {
			return Result{}, err
		}
		*m = manifest{Files: map[string]entry{}} // in place: the memory store keeps m
	}
	m.Workload, m.Target, m.Dir = p.Workload, p.Target, p.Dir
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
	removeTemps(root, m)

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
			e, err := s.fetch(ctx, root, m, f, lim)
			if err != nil {
				// What was received is kept (m.Partial): recorded now,
				// as the pass may end here.
				if serr := s.save(p, m); serr != nil {
					return res, serr
				}
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

// fetch downloads f into its partial file and renames it into place. A
// partial file of the same object (m.Partial) is resumed: only the rest
// is asked for. When the transfer is cut, what was received stays in the
// partial file, recorded in m.Partial.
func (s *Syncer) fetch(ctx context.Context, root *os.Root, m *manifest, f File, lim *rate.Limiter) (entry, error) {
	tmp := partialName(f.Path)
	have := int64(0)
	if pe, ok := m.Partial[f.Path]; ok && f.ETag != "" && pe.ETag == f.ETag && pe.Size == f.Size {
		if fi, err := root.Lstat(tmp); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 && fi.Size() < f.Size {
			have = fi.Size()
		}
	}
	if have == 0 {
		delete(m.Partial, f.Path)
		_ = root.Remove(tmp)
	}
	e, err := s.get(ctx, root, m, f, tmp, have, lim)
	if errors.Is(err, errStartOver) {
		// The object changed since the partial file was begun, or the
		// server does not serve ranges: from the start.
		delete(m.Partial, f.Path)
		_ = root.Remove(tmp)
		e, err = s.get(ctx, root, m, f, tmp, 0, lim)
	}
	return e, err
}

// errStartOver: an answer to a Range request that is not the rest of the
// object the partial file holds.
var errStartOver = errors.New("the partial download does not match the object")

// get sends f's GET, for the bytes from have on when have > 0, and writes
// the answer into the partial file tmp (appended to its have bytes, or
// from the start).
func (s *Syncer) get(ctx context.Context, root *os.Root, m *manifest, f File, tmp string, have int64, lim *rate.Limiter) (entry, error) {
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
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
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
	etag := strings.Trim(resp.Header.Get("ETag"), `"`)
	switch {
	case have > 0 && resp.StatusCode == http.StatusPartialContent:
		start, total, ok := contentRange(resp.Header.Get("Content-Range"))
		if !ok || start != have || total != f.Size || etag != f.ETag {
			return entry{}, errStartOver
		}
	case have > 0 && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusRequestedRangeNotSatisfiable):
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			return entry{}, errStartOver
		}
		have = 0 // the whole object: written from the start
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return entry{}, fmt.Errorf("GET: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	// The object may have changed since it was listed: what is written
	// is recorded as the answer describes it, so the next listing of the
	// same content matches.
	size := f.Size
	if have == 0 && resp.ContentLength >= 0 {
		size = resp.ContentLength
	}
	if etag == "" {
		etag = f.ETag
	}
	if dir := path.Dir(f.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return entry{}, err
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if have > 0 {
		flags = os.O_WRONLY | os.O_APPEND
	}
	out, err := root.OpenFile(tmp, flags, 0o644)
	if err != nil {
		return entry{}, err
	}
	n, err := io.Copy(out, throttle.Reader(ctx, io.LimitReader(resp.Body, size-have+1), lim))
	n += have
	if serr := out.Sync(); err == nil {
		err = serr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if n > 0 && n < size && etag != "" {
			// Cut short: kept for the next pass to resume.
			if m.Partial == nil {
				m.Partial = map[string]entry{}
			}
			m.Partial[f.Path] = entry{ETag: etag, Size: size}
		} else {
			delete(m.Partial, f.Path)
			_ = root.Remove(tmp)
		}
		return entry{}, fmt.Errorf("GET: after %d of %d bytes: %w", n, size, err)
	}
	delete(m.Partial, f.Path)
	if n != size {
		_ = root.Remove(tmp)
		return entry{}, fmt.Errorf("GET: %d bytes, want %d", n, size)
	}
	if err := root.Rename(tmp, f.Path); err != nil {
		_ = root.Remove(tmp)
		return entry{}, err
	}
	fi, err := root.Lstat(f.Path)
	if err != nil {
		return entry{}, err
	}
	return entry{ETag: etag, Size: n, MTime: fi.ModTime().UnixNano()}, nil
}

// contentRange parses a Content-Range header "bytes START-END/TOTAL".
func contentRange(v string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(v, "bytes ")
	if !found {
		return 0, 0, false
	}
	span, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	first, _, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	total, err2 := strconv.ParseInt(tot, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || total < 0 {
		return 0, 0, false
	}
	return start, total, true
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
	for p := range m.Partial {
		if !listed[p] && (!truncated || p < last) {
			_ = root.Remove(partialName(p))
			delete(m.Partial, p)
		}
	}
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

// removeTemps removes the temporary files a pass cut short left behind,
// but for the partial files the manifest records (they are resumed).
func removeTemps(root *os.Root, m *manifest) {
	d, err := root.Open(".")
	if err != nil {
		return
	}
	defer d.Close()
	keep := map[string]bool{}
	for p := range m.Partial {
		keep[partialName(p)] = true
	}
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		if strings.HasPrefix(n, tempPrefix) && !keep[n] {
			_ = root.Remove(n)
		}
	}
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

// Prune removes what the syncer downloaded for the data paths not in
// keep (their workload was removed, or its revision has no such ingress
// path, or it moved to another directory) and their manifests: the files
// each manifest records and its partial downloads, and the directories
// below the data path's that this leaves empty. Nothing else is touched:
// not the files the workload wrote, not the data path's directory
// itself. It returns the number of files removed; a file that cannot be
// removed keeps its manifest entry, for the next Prune to try again.
func (s *Syncer) Prune(keep []Path) (int, error) {
	s.manifests.Dir, s.manifests.Name = s.StateDir, "download manifest"
	all, err := s.manifests.All(func() *manifest { return &manifest{Files: map[string]entry{}} },
		func(m *manifest) bool { return m.Files != nil })
	if err != nil {
		return 0, err
	}
	kept := map[[2]string]string{}
	for _, p := range keep {
		kept[[2]string{p.Workload, p.Target}] = p.Dir
	}
	removed := 0
	var errs []error
	for _, m := range all {
		if m.Workload == "" || m.Target == "" || m.Dir == "" {
			continue // from before manifests named their path
		}
		if dir, ok := kept[[2]string{m.Workload, m.Target}]; ok && dir == m.Dir {
			continue
		}
		n := len(m.Files)
		err := s.clear(m)
		removed += n - len(m.Files)
		if err != nil {
			errs = append(errs, err)
			if serr := s.manifests.Save(m.Workload, m.Target, m); serr != nil {
				errs = append(errs, serr)
			}
			continue
		}
		if err := s.manifests.Delete(m.Workload, m.Target); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// clear removes from m.Dir the files m records and its partial
// downloads, dropping each from m once gone (or found gone already).
func (s *Syncer) clear(m *manifest) error {
	root, err := os.OpenRoot(m.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(m.Files)
		clear(m.Partial)
		return nil
	}
	if err != nil {
		return fmt.Errorf("data path %s: %w", m.Dir, err)
	}
	defer root.Close()
	var errs []error
	for p := range m.Partial {
		if err := root.Remove(partialName(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(m.Partial, p)
	}
	paths := make([]string, 0, len(m.Files))
	for p := range m.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if CheckPath(p) != "" {
			delete(m.Files, p) // never written (Sync refuses such paths)
			continue
		}
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(m.Files, p)
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if root.Remove(dir) != nil {
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("data path %s: %w", m.Dir, err)
	}
	return nil
}
