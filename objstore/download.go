package objstore

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// Ingress: the server lists a data path's prefixes with the project's
// credentials and answers each object with a presigned GET. A presigned
// ListObjectsV2 handed to the device would need a fresh signature per
// page (the continuation token is in the signed query), could not merge
// the workload's shared prefix with the device's own, would not exist for
// the embedded store, and would make the device parse S3's XML: the
// server's listing does all four in one round trip.

// maxListPages bounds the ListObjectsV2 pages of one prefix (1000 keys
// each: MaxDownloadFiles is reached on the first or second).
const maxListPages = 4

// remoteObject is an object of a listing, its key relative to the prefix.
type remoteObject struct {
	rel      string
	size     int64
	etag     string
	modified time.Time
}

// GrantDownloads implements eim.DownloadGranter: the objects under each
// prefix (the device's <host>/<workload>/<target>/ or the workload's
// shared _workloads/<workload>/<target>/) of the project's object storage,
// or of the embedded store when it has none, each with a GET valid until
// expires. Keys that are not plain relative paths below their prefix
// (directory markers, "." or ".." segments, control characters) are left
// out. One call counts as one grant of the rate of the first prefix's
// device.
func (s *Service) GrantDownloads(ctx context.Context, project string, prefixes []string) ([]eim.DownloadGrant, bool, time.Time, error) {
	if len(prefixes) == 0 || len(prefixes) > 4 {
		return nil, false, time.Time{}, eim.Errorf(eim.EINVALID, "prefixes: 1 to 4")
	}
	owner := ""
	owners := make([]string, len(prefixes))
	for i, p := range prefixes {
		o, err := checkListPrefix(p)
		if err != nil {
			return nil, false, time.Time{}, err
		}
		if owner == "" {
			owner = o
		}
		owners[i] = o
	}
	now := s.o.Now()
	if !s.limiter(project, owner).AllowN(now, 1) {
		return nil, false, time.Time{}, eim.Errorf(eim.EUNAVAILABLE, "%s asked for more grants than %.0f a minute: ask again later", owner, s.o.GrantRate*60)
	}
	setting, err := s.o.Store.GetObjectStorage(ctx, project)
	if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		return nil, false, time.Time{}, err
	}
	expires := now.Add(s.o.GrantTTL).Truncate(time.Second)
	var (
		list func(i int) ([]remoteObject, bool, error)
		sign func(g *eim.DownloadGrant, i int, key string)
	)
	if setting != nil {
		secret, err := s.o.Key.OpenText(setting.SealedSecretKey, eim.ObjectStorageSecretPurpose(project))
		if err != nil {
			return nil, false, time.Time{}, fmt.Errorf("object storage of %s: open the secret key: %w", project, err)
		}
		creds := Credentials{AccessKeyID: setting.AccessKeyID, SecretKey: secret}
		client, err := httpClient(setting.CACert, s.o.DialContext)
		if err != nil {
			return nil, false, time.Time{}, eim.Errorf(eim.EPRECONDITION, "object storage of %s: %v", project, err)
		}
		defer client.CloseIdleConnections()
		// A device's prefix is in its own bucket (BucketPerDevice), the
		// shared ones in the setting's.
		buckets := make([]*eim.ObjectStorage, len(prefixes))
		for i, o := range owners {
			buckets[i] = setting
			if !strings.HasPrefix(o, eim.SharedIngressDir+"/") {
				if buckets[i] = forDevice(setting, o); buckets[i] != setting {
					if err := s.ensureBucket(ctx, buckets[i], creds); err != nil {
						return nil, false, time.Time{}, err
					}
				}
			}
		}
		list = func(i int) ([]remoteObject, bool, error) {
			return s.listS3(ctx, client, buckets[i], creds, prefixes[i])
		}
		sign = func(g *eim.DownloadGrant, i int, key string) {
			g.URL = Presign(http.MethodGet, objectURL(buckets[i], setting.KeyPrefix+key), nil, setting.Region, creds, now, s.o.GrantTTL)
		}
	} else {
		if s.o.AgentURL == "" {
			return nil, false, time.Time{}, eim.Errorf(eim.EPRECONDITION, "project %s has no object storage and this server has no embedded store", project)
		}
		list = func(i int) ([]remoteObject, bool, error) { return s.listLocal(project, prefixes[i]) }
		sign = func(g *eim.DownloadGrant, _ int, key string) {
			q := url.Values{}
			q.Set("expires", strconv.FormatInt(expires.Unix(), 10))
			q.Set("sig", s.localSig(http.MethodGet, project, key, "", 0, expires.Unix()))
			g.URL = s.o.AgentURL + UploadPath + url.PathEscape(project) + "/" + escapeKey(key) + "?" + q.Encode()
		}
	}
	byPath := map[string]bool{}
	var out []eim.DownloadGrant
	truncated := false
	for i, p := range prefixes {
		objs, more, err := list(i)
		if err != nil {
			return nil, false, time.Time{}, err
		}
		truncated = truncated || more
		for _, o := range objs {
			if byPath[o.rel] {
				continue // an earlier prefix has this path
			}
			byPath[o.rel] = true
			g := eim.DownloadGrant{Path: o.rel, Size: o.size, ETag: o.etag, Modified: o.modified}
			sign(&g, i, p+o.rel)
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b eim.DownloadGrant) int { return strings.Compare(a.Path, b.Path) })
	if len(out) > eim.MaxDownloadFiles {
		out, truncated = out[:eim.MaxDownloadFiles], true
	}
	return out, truncated, expires, nil
}

// checkListPrefix checks a prefix to list: a device's (checkPrefix) or a
// workload's shared one. It returns whose it is (the host's ID, or the
// shared directory and the workload).
func checkListPrefix(prefix string) (string, error) {
	rest, ok := strings.CutPrefix(prefix, eim.SharedIngressDir+"/")
	if !ok {
		return checkPrefix(prefix)
	}
	if !strings.HasSuffix(rest, "/") || checkRelPath(strings.TrimSuffix(rest, "/")) != "" {
		return "", eim.Errorf(eim.EINVALID, "prefix: %q: want %s/<workload>/<target>/", prefix, eim.SharedIngressDir)
	}
	w, _, _ := strings.Cut(rest, "/")
	return eim.SharedIngressDir + "/" + w, nil
}

// keptKey says whether the key rel (relative to its prefix) is offered
// for download.
func keptKey(rel string) bool {
	return rel != "" && !strings.HasSuffix(rel, "/") && checkRelPath(rel) == "" && len(rel) <= maxKey
}

// listS3 lists prefix in the setting's bucket (ListObjectsV2, signed with
// creds), up to eim.MaxDownloadFiles+1 kept objects.
func (s *Service) listS3(ctx context.Context, client *http.Client, o *eim.ObjectStorage, creds Credentials, prefix string) ([]remoteObject, bool, error) {
	full := o.KeyPrefix + prefix
	var out []remoteObject
	token := ""
	for range maxListPages {
		u := objectURL(o, "")
		q := url.Values{}
		q.Set("list-type", "2")
		q.Set("prefix", full)
		q.Set("max-keys", "1000")
		if token != "" {
			q.Set("continuation-token", token)
		}
		u.RawQuery = q.Encode()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, false, err
		}
		Sign(req, EmptySHA256, o.Region, creds, s.o.Now())
		resp, err := client.Do(req)
		if err != nil {
			return nil, false, eim.Errorf(eim.EUNAVAILABLE, "list the object storage: %v", err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		resp.Body.Close()
		if err != nil {
			return nil, false, eim.Errorf(eim.EUNAVAILABLE, "list the object storage: %v", err)
		}
		if resp.StatusCode != http.StatusOK {
			code := resp.Header.Get("X-Amz-Error-Code")
			if code == "" {
				code = s3ErrorCode(body)
			}
			return nil, false, eim.Errorf(eim.EUNAVAILABLE, "list the object storage: %s %s", resp.Status, code)
		}
		page, err := ParseListObjectsV2(body)
		if err != nil {
			return nil, false, eim.Errorf(eim.EUNAVAILABLE, "list the object storage: %v", err)
		}
		for _, c := range page.Contents {
			rel, ok := strings.CutPrefix(c.Key, full)
			if !ok || !keptKey(rel) {
				continue
			}
			out = append(out, remoteObject{rel: rel, size: c.Size, etag: c.ETag, modified: c.LastModified})
			if len(out) > eim.MaxDownloadFiles {
				return out, true, nil
			}
		}
		if !page.IsTruncated {
			return out, false, nil
		}
		if page.NextContinuationToken == "" {
			return nil, false, eim.Errorf(eim.EUNAVAILABLE, "list the object storage: a truncated page without a continuation token")
		}
		token = page.NextContinuationToken
	}
	return out, true, nil
}

// ListPage is one page of S3's ListObjectsV2 answer, what GrantDownloads
// uses of it.
type ListPage struct {
	IsTruncated           bool
	NextContinuationToken string
	Contents              []ListEntry
}

// ListEntry is an object of a ListPage. ETag is without its quotes.
type ListEntry struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// ParseListObjectsV2 reads a ListObjectsV2 answer (ListBucketResult). Bad
// XML, a negative size or a missing key is an error.
func ParseListObjectsV2(b []byte) (*ListPage, error) {
	var doc struct {
		XMLName               xml.Name `xml:"ListBucketResult"`
		IsTruncated           bool     `xml:"IsTruncated"`
		NextContinuationToken string   `xml:"NextContinuationToken"`
		Contents              []struct {
			Key          string `xml:"Key"`
			Size         int64  `xml:"Size"`
			ETag         string `xml:"ETag"`
			LastModified string `xml:"LastModified"`
		} `xml:"Contents"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("ListBucketResult: %w", err)
	}
	p := &ListPage{IsTruncated: doc.IsTruncated, NextContinuationToken: doc.NextContinuationToken}
	for i, c := range doc.Contents {
		if c.Key == "" {
			return nil, fmt.Errorf("ListBucketResult: Contents[%d]: no Key", i)
		}
		if c.Size < 0 {
			return nil, fmt.Errorf("ListBucketResult: Contents[%d]: Size %d", i, c.Size)
		}
		e := ListEntry{Key: c.Key, Size: c.Size, ETag: strings.Trim(c.ETag, `"`)}
		if c.LastModified != "" {
			t, err := time.Parse(time.RFC3339Nano, c.LastModified)
			if err != nil {
				return nil, fmt.Errorf("ListBucketResult: Contents[%d]: LastModified %q", i, c.LastModified)
			}
			e.LastModified = t
		}
		p.Contents = append(p.Contents, e)
	}
	return p, nil
}

// s3ErrorCode is the Code of an S3 error body ("" when there is none).
func s3ErrorCode(b []byte) string {
	var e struct {
		Code string `xml:"Code"`
	}
	if xml.Unmarshal(b, &e) != nil || len(e.Code) > 64 {
		return ""
	}
	return e.Code
}

// listLocal lists prefix in the project's part of the embedded store.
func (s *Service) listLocal(project, prefix string) ([]remoteObject, bool, error) {
	base := filepath.Join(s.root(), project, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	var out []remoteObject
	more := false
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return nil // gone meanwhile
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		if !keptKey(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, remoteObject{rel: rel, size: fi.Size(), etag: localETag(fi), modified: fi.ModTime()})
		if len(out) > eim.MaxDownloadFiles {
			more = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}

// localETag is an embedded store file's entity tag: its size and
// modification time (every write is a new file renamed into place).
func localETag(fi os.FileInfo) string {
	return strconv.FormatInt(fi.Size(), 16) + "-" + strconv.FormatInt(fi.ModTime().UnixNano(), 16)
}

// serveDownload answers a device's GET of an embedded store URL whose
// signature was checked: the file, with its entity tag (ranges
// supported, so an interrupted download can resume).
func (s *Service) serveDownload(w http.ResponseWriter, r *http.Request, dst, key string) error {
	f, err := os.Open(dst)
	if err != nil {
		return eim.Errorf(eim.ENOTFOUND, "no object %s", key)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return eim.Errorf(eim.ENOTFOUND, "no object %s", key)
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(10*time.Minute + time.Duration(fi.Size()/(64<<10))*time.Second))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", `"`+localETag(fi)+`"`)
	http.ServeContent(w, r, "", fi.ModTime(), f)
	return nil
}
