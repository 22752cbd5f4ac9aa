package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Fetcher opens an artifact's content by the location a cluster plan
// names: a path on the EIM server the node talks to, or a URL.
type Fetcher interface {
	// Fetch returns the body and its length (-1 when unknown).
	Fetch(ctx context.Context, location string) (io.ReadCloser, int64, error)
}

// ArtifactCache keeps verified artifacts by SHA-256, so that a plan
// applied again, or resumed after a restart, downloads nothing it has.
// A file enters the cache only after its digest and size were checked
// (downloaded beside it, then renamed), and is checked again whenever it
// is copied out.
type ArtifactCache struct {
	Dir string
}

// Artifact is what a cache entry must match.
type Artifact struct {
	Name     string
	Location string // a server path or a URL
	Sha256   string // lowercase hex
	Size     int64  // 0: not checked
}

// Path returns where the cache keeps a.
func (c *ArtifactCache) Path(a Artifact) string { return filepath.Join(c.Dir, a.Sha256) }

// Has reports whether a is in the cache (by digest and size; the content
// is checked when it is copied out).
func (c *ArtifactCache) Has(a Artifact) bool {
	st, err := os.Stat(c.Path(a))
	return err == nil && st.Mode().IsRegular() && (a.Size <= 0 || st.Size() == a.Size)
}

// checkDigest refuses a digest that is not 64 lowercase (or uppercase)
// hex digits: it names a cache file.
func checkDigest(s string) (string, error) {
	d := strings.ToLower(s)
	if len(d) != 64 {
		return "", fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	if _, err := hex.DecodeString(d); err != nil {
		return "", fmt.Errorf("sha256 %q is not hex", s)
	}
	return d, nil
}

// Get makes sure a is in the cache, downloading it with f when it is not.
// It reports whether it downloaded. A download that does not match a's
// size or digest is removed and fails.
func (c *ArtifactCache) Get(ctx context.Context, f Fetcher, a Artifact) (bool, error) {
	if c.Has(a) {
		return false, nil
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return false, fmt.Errorf("artifact cache: %w", err)
	}
	body, length, err := f.Fetch(ctx, a.Location)
	if err != nil {
		return false, err
	}
	defer body.Close()
	if a.Size > 0 && length >= 0 && length != a.Size {
		return false, fmt.Errorf("%s is %d bytes, the plan says %d", a.Location, length, a.Size)
	}
	tmp, err := os.CreateTemp(c.Dir, ".download-*")
	if err != nil {
		return false, fmt.Errorf("artifact cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing to remove
	defer tmp.Close()
	h := sha256.New()
	r := io.Reader(body)
	if a.Size > 0 {
		r = io.LimitReader(body, a.Size+1) // one byte more tells it is too long
	}
	n, err := io.CopyBuffer(io.MultiWriter(tmp, h), r, make([]byte, 1<<20))
	if err != nil {
		return false, fmt.Errorf("download %s: after %d bytes: %w", a.Location, n, err)
	}
	if a.Size > 0 && n != a.Size {
		return false, fmt.Errorf("download %s: got %s bytes, the plan says %d", a.Location, sizeOrMore(n, a.Size), a.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != a.Sha256 {
		return false, fmt.Errorf("download %s: sha256 mismatch: got %s, want %s", a.Location, got, a.Sha256)
	}
	if err := tmp.Sync(); err != nil {
		return false, fmt.Errorf("artifact cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("artifact cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.Path(a)); err != nil {
		return false, fmt.Errorf("artifact cache: %w", err)
	}
	return true, nil
}

func sizeOrMore(n, want int64) string {
	if n > want {
		return fmt.Sprintf("more than %d", want)
	}
	return fmt.Sprint(n)
}

// errCorrupt is a cached artifact whose content no longer matches its
// digest (a damaged disk, or someone wrote it): it was removed.
var errCorrupt = errors.New("the cached copy did not match its sha256 and was removed; it is downloaded again at the next try")

// CopyOut writes the cached a to dst (atomically, with mode), checking its
// digest on the way; a cached copy that does not match is removed.
func (c *ArtifactCache) CopyOut(a Artifact, dst string, mode os.FileMode) error {
	src, err := os.Open(c.Path(a))
	if err != nil {
		return fmt.Errorf("artifact cache: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(tmp, h), src, make([]byte, 1<<20)); err != nil {
		return fmt.Errorf("copy %s: %w", a.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != a.Sha256 {
		os.Remove(c.Path(a))
		return fmt.Errorf("%s: %w", a.Name, errCorrupt)
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// fileDigest returns the SHA-256 of the file at path, "" when it cannot
// be read (absent).
func fileDigest(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// httpFetcher fetches a server path from the EIM server with the node's
// token, and a URL with a client that trusts the system's roots and EIM's
// CA, without the token: the node's credentials go to EIM only.
type httpFetcher struct {
	server string       // the EIM server's base URL
	client *http.Client // trusts the EIM CA (pinned)
	token  func(ctx context.Context) (string, error)
	other  *http.Client
}

func (f *httpFetcher) Fetch(ctx context.Context, location string) (io.ReadCloser, int64, error) {
	var url string
	client := f.client
	auth := false
	switch {
	case strings.HasPrefix(location, "/") && !strings.HasPrefix(location, "//"):
		url, auth = strings.TrimSuffix(f.server, "/")+location, true
	case strings.HasPrefix(location, "https://"), strings.HasPrefix(location, "http://"):
		url, client = location, f.other
	default:
		return nil, 0, fmt.Errorf("artifact location %q is neither a path on the EIM server nor an http(s) URL", location)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("download %s: %w", location, err)
	}
	if auth {
		tok, err := f.token(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("download %s: node token: %w", location, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("download %s: %w", location, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("download %s: %s", location, resp.Status)
	}
	return resp.Body, resp.ContentLength, nil
}
