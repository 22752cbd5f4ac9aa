package objstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The embedded store: a project's files at DataDir/objects/<project>/<key>,
// written through a temporary file in DataDir/objects.tmp and renamed
// into place once their size and SHA-256 are the ones the grant names.

// serveUpload answers a device's PUT or DELETE of an embedded store URL
// (signLocal).
func (s *Service) serveUpload(w http.ResponseWriter, r *http.Request) {
	err := s.upload(w, r)
	if err != nil {
		if eim.ErrorCode(err) == eim.EINTERNAL {
			s.log.Error("embedded store", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		apiv2.WriteError(w, err)
	}
}

func (s *Service) upload(w http.ResponseWriter, r *http.Request) error {
	project, key := r.PathValue("project"), r.PathValue("key")
	if project == "" || strings.ContainsAny(project, "/\\") || checkRelPath(project) != "" {
		return eim.Errorf(eim.EINVALID, "project: %q is not a project name", project)
	}
	if why := checkRelPath(key); why != "" {
		return eim.Errorf(eim.EINVALID, "key: %s", why)
	}
	q := r.URL.Query()
	expires, ok := validUntil(q.Get("expires"), s.o.Now())
	if !ok {
		return eim.Errorf(eim.EFORBIDDEN, "the grant has expired or its expiry is malformed: ask for a new one")
	}
	var sha string
	var size int64
	if r.Method == http.MethodPut {
		sha = q.Get("sha256")
		n, err := strconv.ParseInt(q.Get("size"), 10, 64)
		if err != nil || n < 0 || !isHexSHA256(sha) {
			return eim.Errorf(eim.EFORBIDDEN, "the grant is malformed (size, sha256)")
		}
		size = n
	}
	want := s.localSig(r.Method, project, key, sha, size, expires)
	if got, err := hex.DecodeString(q.Get("sig")); err != nil || !hmac.Equal(got, mustHex(want)) {
		return eim.Errorf(eim.EFORBIDDEN, "the grant's signature does not match this request")
	}
	dst := filepath.Join(s.root(), project, filepath.FromSlash(key))
	if r.Method == http.MethodGet {
		return s.serveDownload(w, r, dst, key)
	}
	if r.Method == http.MethodDelete {
		if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return eim.Errorf(eim.ECONFLICT, "delete %s: %v", key, err)
		}
		s.pruneDirs(filepath.Dir(dst), filepath.Join(s.root(), project))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	// The listener's deadlines are for small calls: an upload gets ten
	// minutes and one more second per 64 KiB (a slow link's pace).
	rc := http.NewResponseController(w)
	until := time.Now().Add(10*time.Minute + time.Duration(size/(64<<10))*time.Second)
	_ = rc.SetReadDeadline(until)
	_ = rc.SetWriteDeadline(until.Add(time.Minute))
	if r.ContentLength >= 0 && r.ContentLength != size {
		return eim.Errorf(eim.EINVALID, "Content-Length: %d bytes, the grant is for %d", r.ContentLength, size)
	}
	err := s.writeObject(dst, key, r.Body, size, func(n int64, sum string) error {
		if n != size {
			return eim.Errorf(eim.EINVALID, "body: %d bytes, the grant is for %d", n, size)
		}
		if sum != sha {
			return eim.Errorf(eim.EINVALID, "body: SHA-256 %s, the grant is for %s (BadDigest)", sum, sha)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// writeObject stores body (at most max bytes) as dst (the object key),
// through a temporary file renamed into place once check accepts its
// size and hex SHA-256. A body over max is EINVALID.
func (s *Service) writeObject(dst, key string, body io.Reader, max int64, check func(n int64, sum string) error) error {
	tmpDir := s.root() + ".tmp"
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(tmpDir, "upload-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(body, max+1))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return eim.Errorf(eim.EUNAVAILABLE, "upload of %s interrupted: %v", key, err)
	}
	if n > max {
		return eim.Errorf(eim.EINVALID, "body: over %d bytes", max)
	}
	if err := check(n, hex.EncodeToString(h.Sum(nil))); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return eim.Errorf(eim.ECONFLICT, "store %s: %v", key, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return eim.Errorf(eim.ECONFLICT, "store %s: %v", key, err)
	}
	return nil
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s)
	return b
}

// pruneDirs removes dir and its parents up to (not including) top while
// they are empty.
func (s *Service) pruneDirs(dir, top string) {
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// listEdgeData answers GET …/edgedata/{hostId}: the host's files in the
// embedded store by path, paged (pageSize, offset), optionally those under
// ?prefix=.
func (s *Service) listEdgeData(w http.ResponseWriter, r *http.Request, c *call) error {
	host := r.PathValue("hostId")
	if err := checkEdgeOwner(host); err != nil {
		return err
	}
	q := r.URL.Query()
	// Paged as the v1 API's lists are.
	pageSize, offset := 20, 0
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return eim.Errorf(eim.EINVALID, "pageSize: %q must be 1 to 100", v)
		}
		pageSize = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10000 {
			return eim.Errorf(eim.EINVALID, "offset: %q must be 0 to 10000", v)
		}
		offset = n
	}
	prefix := q.Get("prefix")
	base := filepath.Join(s.root(), c.project, host)
	out := eim.EdgeObjectList{Objects: []eim.EdgeObject{}}
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == base {
				return filepath.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, prefix) {
			return nil
		}
		out.TotalElements++
		if out.TotalElements <= offset || len(out.Objects) >= pageSize {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		out.Objects = append(out.Objects, eim.EdgeObject{Path: rel, Size: fi.Size(), UpdatedAt: eim.NewTime(fi.ModTime())})
		return nil
	})
	if err != nil {
		return err
	}
	out.HasNext = offset+len(out.Objects) < out.TotalElements
	apiv2.WriteJSON(w, http.StatusOK, out)
	return nil
}

// getEdgeData answers GET …/edgedata/{hostId}/{path...}: one file's
// content, as an attachment.
func (s *Service) getEdgeData(w http.ResponseWriter, r *http.Request, c *call) error {
	host, p, err := edgeFile(r)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(s.root(), c.project, host, filepath.FromSlash(p)))
	if err != nil {
		return eim.Errorf(eim.ENOTFOUND, "host %s has no file %s", host, p)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return eim.Errorf(eim.ENOTFOUND, "host %s has no file %s", host, p)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="`+strings.ReplaceAll(path.Base(p), `"`, "_")+`"`)
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return nil
}

// checkEdgeOwner checks the {hostId} of an edgedata path: a host's ID or
// the workloads' shared directory (eim.SharedIngressDir).
func checkEdgeOwner(host string) error {
	if host == eim.SharedIngressDir {
		return nil
	}
	if err := eim.CheckID(eim.KindHost, "hostId", host); err != nil {
		return eim.Errorf(eim.EINVALID, "hostId: %q: want a host ID or %s", host, eim.SharedIngressDir)
	}
	return nil
}

// edgeFile is the {hostId} and {path} of an edgedata file's path,
// checked.
func edgeFile(r *http.Request) (string, string, error) {
	host, p := r.PathValue("hostId"), r.PathValue("path")
	if err := checkEdgeOwner(host); err != nil {
		return "", "", err
	}
	if why := checkRelPath(p); why != "" {
		return "", "", eim.Errorf(eim.EINVALID, "path: %s", why)
	}
	if len(host)+1+len(p) > maxKey {
		return "", "", eim.Errorf(eim.EINVALID, "path: the object key would be over %d bytes", maxKey)
	}
	return host, p, nil
}

// putEdgeData answers PUT …/edgedata/{hostId}/{path...}: an operator puts
// a file into the embedded store, for the ingress data paths of the
// devices that read it (docs/workloads.md). A project with object storage
// is refused: its devices read its bucket.
func (s *Service) putEdgeData(w http.ResponseWriter, r *http.Request, c *call) error {
	host, p, err := edgeFile(r)
	if err != nil {
		return err
	}
	if err := s.noSetting(r, c); err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	until := time.Now().Add(10*time.Minute + time.Duration(max(r.ContentLength, 0)/(64<<10))*time.Second)
	_ = rc.SetReadDeadline(until)
	_ = rc.SetWriteDeadline(until.Add(time.Minute))
	if r.ContentLength > eim.DefaultMaxUploadSize {
		return eim.Errorf(eim.EINVALID, "body: over %d bytes", eim.DefaultMaxUploadSize)
	}
	dst := filepath.Join(s.root(), c.project, host, filepath.FromSlash(p))
	err = s.writeObject(dst, host+"/"+p, r.Body, eim.DefaultMaxUploadSize, func(n int64, _ string) error {
		if r.ContentLength >= 0 && n != r.ContentLength {
			return eim.Errorf(eim.EINVALID, "body: %d bytes, Content-Length says %d", n, r.ContentLength)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, eim.EdgeObject{Path: p, Size: fi.Size(), UpdatedAt: eim.NewTime(fi.ModTime())})
	return nil
}

// deleteEdgeData answers DELETE …/edgedata/{hostId}/{path...}.
func (s *Service) deleteEdgeData(w http.ResponseWriter, r *http.Request, c *call) error {
	host, p, err := edgeFile(r)
	if err != nil {
		return err
	}
	top := filepath.Join(s.root(), c.project)
	dst := filepath.Join(top, host, filepath.FromSlash(p))
	if fi, err := os.Lstat(dst); err != nil || !fi.Mode().IsRegular() {
		return eim.Errorf(eim.ENOTFOUND, "%s has no file %s", host, p)
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return eim.Errorf(eim.ECONFLICT, "delete %s: %v", p, err)
	}
	s.pruneDirs(filepath.Dir(dst), top)
	apiv2.WriteJSON(w, http.StatusOK, struct{}{})
	return nil
}

// noSetting refuses a write to the embedded store of a project that has
// object storage.
func (s *Service) noSetting(r *http.Request, c *call) error {
	_, err := s.o.Store.GetObjectStorage(r.Context(), c.project)
	switch eim.ErrorCode(err) {
	case eim.ENOTFOUND:
		return nil
	case "":
		return eim.Errorf(eim.EPRECONDITION, "project %s has object storage: its devices read its bucket; put the file there", c.project)
	default:
		return err
	}
}
