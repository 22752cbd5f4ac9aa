// Package upload sends the files a device workload writes to an egress
// data path to object storage, through grants: the server gives leave to
// send each changed file (a presigned PUT or DELETE), so that the device
// never holds the storage's credentials.
//
// A Syncer makes one pass over a data path at a time (Sync): it walks the
// directory, finds the files changed since the last successful pass (size
// and modification time first, then the SHA-256 of those that differ, so
// that a file touched but not changed is not sent), the files deleted,
// asks the Granter for grants, sends each (PUT with the grant's headers,
// or DELETE) at most at the data path's bandwidth, asks again for grants
// that expired before their turn, and reports what was sent and what
// failed. What was sent is kept in a state file per data path, so that a
// restart or a reboot sends only what changed since.
//
// Only regular files are sent. The directory is opened as an os.Root: a
// symbolic link the workload plants (to /etc/shadow, say) is neither
// followed nor sent. A file that changes while it is sent is not recorded
// as sent: the next pass sends it again.
package upload

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
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/eimhq/eim/agent/pathstate"
	"github.com/eimhq/eim/internal/throttle"
)

// Path is one egress data path of a workload.
type Path struct {
	Workload string
	// Source is the directory on the device.
	Source string
	// Target names the data path to the server (DataPath.target).
	Target string
	// BytesPerSecond bounds the sending (0: no bound).
	BytesPerSecond int64
}

// Change is a file to upload (Present) or to delete.
type Change struct {
	Path    string // relative to the data path, slash-separated
	Present bool
	Size    int64
	SHA256  string // hex
}

// Grant is leave to send one request for Path.
type Grant struct {
	Path    string
	Method  string // PUT or DELETE
	URL     string
	Headers [][2]string
	Refused string // set, instead of URL, when the file may not be sent
}

// Failure is a path that could not be sent, and why.
type Failure struct {
	Path   string
	Reason string
}

// Granter is the server's side of a pass.
type Granter interface {
	// Grant returns a grant per change (matched by path) and when they
	// expire.
	Grant(ctx context.Context, workload, target string, changes []Change) ([]Grant, time.Time, error)
	// Report records a pass's outcome.
	Report(ctx context.Context, workload, target string, done []string, failed []Failure) error
}

// Result is the outcome of a pass.
type Result struct {
	Sent   []string // paths uploaded or deleted
	Failed []Failure
}

// Syncer makes passes over data paths. One Syncer's passes run one at a
// time (the device's bandwidth is one); a pass is not safe to run
// concurrently with another of the same data path.
type Syncer struct {
	Granter Granter
	// Client sends the grants' requests (http.DefaultClient when nil).
	Client *http.Client
	// StateDir keeps what each data path sent; "" keeps nothing (every
	// file is sent again after a restart).
	StateDir string
	// MaxGrants bounds the changes of one Grant call (default 100).
	MaxGrants int
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	states pathstate.Store[state]
}

// state is what a data path sent, by path.
type state struct {
	Files map[string]fileState `json:"files"`
}

type fileState struct {
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime"` // Unix nanoseconds
	SHA256  string `json:"sha256"`
	// Refused is the server's reason not to take this content; it is not
	// asked for again until the file changes.
	Refused string `json:"refused,omitempty"`
}

// maxReason bounds a reason reported back.
const maxReason = 500

// Sync makes one pass over p. It returns an error when the pass could not
// be made at all (the directory unreadable, the server unreachable);
// files that failed are in Result.Failed and were reported.
func (s *Syncer) Sync(ctx context.Context, p Path) (Result, error) {
	if p.Workload == "" || strings.ContainsAny(p.Workload, `/\`) || p.Workload == "." || p.Workload == ".." || p.Target == "" || !filepath.IsAbs(p.Source) {
		return Result{}, fmt.Errorf("data path %q of %q: workload, target and an absolute source are required", p.Target, p.Workload)
	}
	st, err := s.load(p)
	if err != nil {
		return Result{}, err
	}
	root, err := os.OpenRoot(p.Source)
	if errors.Is(err, fs.ErrNotExist) {
		// Not created yet (the pod has not started): nothing to send, and
		// nothing to delete either: a directory that vanished says
		// nothing of its files.
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("data path %s: %w", p.Source, err)
	}
	defer root.Close()

	changes, seen, touched, err := s.scan(root, st)
	if err != nil {
		return Result{}, fmt.Errorf("data path %s: %w", p.Source, err)
	}
	var res Result
	if touched {
		if err := s.save(p, st); err != nil {
			return res, err
		}
	}
	if len(changes) == 0 {
		return res, nil
	}
	lim := throttle.NewLimiter(p.BytesPerSecond)
	per := s.MaxGrants
	if per <= 0 {
		per = 100
	}
	for len(changes) > 0 {
		batch := changes[:min(len(changes), per)]
		changes = changes[len(batch):]
		if err := s.sendBatch(ctx, root, p, st, seen, batch, lim, &res); err != nil {
			return res, err
		}
	}
	if err := s.Granter.Report(ctx, p.Workload, p.Target, res.Sent, res.Failed); err != nil {
		return res, fmt.Errorf("report uploads: %w", err)
	}
	return res, nil
}

// scan returns the changes since st, the state of each present file, and
// whether st was updated for files touched but not changed.
func (s *Syncer) scan(root *os.Root, st *state) ([]Change, map[string]fileState, bool, error) {
	touched := false
	seen := map[string]fileState{}
	var changes []Change
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == "." {
				return err
			}
			return nil // a file gone while walking: the next pass sees
		}
		if !d.Type().IsRegular() {
			return nil // directories are walked; links and devices are not sent
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fst := fileState{Size: info.Size(), ModTime: info.ModTime().UnixNano()}
		old, ok := st.Files[name]
		if ok && old.Size == fst.Size && old.ModTime == fst.ModTime {
			seen[name] = old
			return nil
		}
		sum, n, err := hashFile(root, name)
		if err != nil {
			return nil // unreadable now: tried again next pass
		}
		fst.SHA256, fst.Size = sum, n
		seen[name] = fst
		if ok && old.SHA256 == sum {
			// Touched, not changed: remember the new time, send nothing
			// (nor ask again for a content refused).
			fst.Refused = old.Refused
			seen[name] = fst
			st.Files[name] = fst
			touched = true
			return nil
		}
		changes = append(changes, Change{Path: name, Present: true, Size: n, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	var gone []string
	for name := range st.Files {
		if _, ok := seen[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		if st.Files[name].Refused != "" {
			delete(st.Files, name) // never sent: nothing to delete
			touched = true
			continue
		}
		changes = append(changes, Change{Path: name})
	}
	return changes, seen, touched, nil
}

func hashFile(root *os.Root, name string) (string, int64, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// sendBatch gets grants for batch and sends them, asking again for those
// that expired before their turn.
func (s *Syncer) sendBatch(ctx context.Context, root *os.Root, p Path, st *state, seen map[string]fileState, batch []Change, lim *rate.Limiter, res *Result) error {
	stale := 0 // answers in a row whose grants had all expired
	for len(batch) > 0 {
		grants, expires, err := s.Granter.Grant(ctx, p.Workload, p.Target, batch)
		if err != nil {
			return fmt.Errorf("grant uploads: %w", err)
		}
		byPath := map[string]Grant{}
		for _, g := range grants {
			byPath[g.Path] = g
		}
		var again []Change
		for i, c := range batch {
			g, ok := byPath[c.Path]
			if !ok {
				res.Failed = append(res.Failed, Failure{Path: c.Path, Reason: "no grant for this file"})
				continue
			}
			if g.Refused != "" {
				res.Failed = append(res.Failed, Failure{Path: c.Path, Reason: "refused: " + trim(g.Refused)})
				if c.Present {
					f := seen[c.Path]
					f.Refused = trim(g.Refused)
					st.Files[c.Path] = f
				}
				continue
			}
			// A grant about to expire is asked for again rather than
			// sent to fail half-way.
			if !expires.IsZero() && s.now().After(expires.Add(-5*time.Second)) {
				again = append(again, batch[i:]...)
				break
			}
			if err := s.send(ctx, root, c, g, lim); err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				res.Failed = append(res.Failed, Failure{Path: c.Path, Reason: trim(err.Error())})
				continue
			}
			res.Sent = append(res.Sent, c.Path)
			if c.Present {
				st.Files[c.Path] = seen[c.Path]
			} else {
				delete(st.Files, c.Path)
			}
			if err := s.save(p, st); err != nil {
				return err
			}
		}
		if err := s.save(p, st); err != nil {
			return err
		}
		if len(again) < len(batch) {
			stale = 0
		} else if stale++; stale >= 2 {
			return fmt.Errorf("grant uploads: the grants expire before they can be used (at %s; is the clock right?)", expires.Format(time.RFC3339))
		}
		batch = again
	}
	return nil
}

// send carries out one grant.
func (s *Syncer) send(ctx context.Context, root *os.Root, c Change, g Grant, lim *rate.Limiter) error {
	var body io.Reader
	var f *os.File
	switch {
	case c.Present && g.Method == http.MethodPut:
		var err error
		f, err = root.Open(c.Path)
		if err != nil {
			return err
		}
		defer f.Close()
		info, err := f.Stat()
		if err != nil {
			return err
		}
		if info.Size() != c.Size || info.ModTime().UnixNano() == 0 {
			return fmt.Errorf("changed since it was scanned")
		}
		body = throttle.Reader(ctx, io.LimitReader(f, c.Size), lim)
	case !c.Present && g.Method == http.MethodDelete:
	default:
		return fmt.Errorf("grant method %q does not fit a file %s", g.Method, map[bool]string{true: "to upload", false: "to delete"}[c.Present])
	}
	req, err := http.NewRequestWithContext(ctx, g.Method, g.URL, body)
	if err != nil {
		return fmt.Errorf("grant URL: %w", err)
	}
	if body != nil {
		req.ContentLength = c.Size
		if c.Size == 0 {
			req.Body = http.NoBody
		}
	}
	for _, h := range g.Headers {
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
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
	case g.Method == http.MethodDelete && resp.StatusCode == http.StatusNotFound:
		// Gone already: what a DELETE wants.
	default:
		return fmt.Errorf("%s: %s: %s", g.Method, resp.Status, strings.TrimSpace(string(msg)))
	}
	if f != nil {
		// Written to while it was sent: what was sent is not what the
		// state would say. Sent again on the next pass.
		if info, err := f.Stat(); err != nil || info.Size() != c.Size {
			return fmt.Errorf("changed while it was sent")
		}
		if sum, _, err := hashFile(root, c.Path); err != nil || sum != c.SHA256 {
			return fmt.Errorf("changed while it was sent")
		}
	}
	return nil
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

func (s *Syncer) load(p Path) (*state, error) {
	s.states.Dir, s.states.Name = s.StateDir, "upload state"
	// A damaged state has every file sent again, which is harmless.
	return s.states.Load(p.Workload, p.Target, func() *state { return &state{Files: map[string]fileState{}} },
		func(st *state) bool { return st.Files != nil })
}

func (s *Syncer) save(p Path, st *state) error {
	s.states.Dir, s.states.Name = s.StateDir, "upload state"
	return s.states.Save(p.Workload, p.Target, st)
}

// Forget drops the state of a workload's data paths (it was removed): a
// workload of that name starts afresh.
func (s *Syncer) Forget(workload string) error {
	s.states.Dir, s.states.Name = s.StateDir, "upload state"
	return s.states.Forget(workload)
}
