package objstore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/eimhq/eim"
)

// MaxChanges is the most files one GrantUploads call may name.
const MaxChanges = 1000

// maxKey is S3's longest object key (bytes).
const maxKey = 1024

// GrantUploads implements eim.UploadGranter: one grant per change, a PUT
// of the file bound to its SHA-256 or a DELETE, under prefix
// (<host>/<workload>/<target>/) of the project's object storage, valid
// until expires. A file that may not be sent (a bad path, too big, no
// checksum) gets a grant with Refused saying why, not an error: the
// other files go on. The call is refused as a whole (EINVALID) for a bad
// prefix or too many changes, and answered EUNAVAILABLE (retry later)
// when the device asked for more grants than its rate allows.
func (s *Service) GrantUploads(ctx context.Context, project, prefix string, changes []eim.FileChange) ([]eim.UploadGrant, time.Time, error) {
	host, err := checkPrefix(prefix)
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(changes) > MaxChanges {
		return nil, time.Time{}, eim.Errorf(eim.EINVALID, "changes: %d files in one call, at most %d", len(changes), MaxChanges)
	}
	now := s.o.Now()
	if !s.limiter(project, host).AllowN(now, len(changes)) {
		return nil, time.Time{}, eim.Errorf(eim.EUNAVAILABLE, "device %s asked for more upload grants than %.0f a minute: ask again later", host, s.o.GrantRate*60)
	}
	setting, err := s.o.Store.GetObjectStorage(ctx, project)
	if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		return nil, time.Time{}, err
	}
	expires := now.Add(s.o.GrantTTL).Truncate(time.Second)
	var sign func(g *eim.UploadGrant, key string, c eim.FileChange)
	maxSize := eim.DefaultMaxUploadSize
	if setting != nil {
		secret, err := s.o.Key.OpenText(setting.SealedSecretKey, eim.ObjectStorageSecretPurpose(project))
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("object storage of %s: open the secret key: %w", project, err)
		}
		if setting.MaxFileSize > 0 {
			maxSize = setting.MaxFileSize
		}
		creds := Credentials{AccessKeyID: setting.AccessKeyID, SecretKey: secret}
		dev := forDevice(setting, host)
		if dev != setting {
			if err := s.ensureBucket(ctx, dev, creds); err != nil {
				return nil, time.Time{}, err
			}
		}
		sign = func(g *eim.UploadGrant, key string, c eim.FileChange) {
			s.signS3(g, dev, creds, setting.KeyPrefix+key, c, now)
		}
	} else {
		if s.o.AgentURL == "" {
			return nil, time.Time{}, eim.Errorf(eim.EPRECONDITION, "project %s has no object storage and this server has no embedded store", project)
		}
		sign = func(g *eim.UploadGrant, key string, c eim.FileChange) {
			s.signLocal(g, project, key, c, expires)
		}
	}
	grants := make([]eim.UploadGrant, len(changes))
	for i, c := range changes {
		g := &grants[i]
		g.Path = c.Path
		if why := checkChange(c, maxSize); why != "" {
			g.Refused = why
			continue
		}
		key := prefix + c.Path
		if len(key)+len(setKeyPrefix(setting)) > maxKey {
			g.Refused = fmt.Sprintf("path: the object key would be over %d bytes", maxKey)
			continue
		}
		sign(g, key, c)
	}
	return grants, expires, nil
}

func setKeyPrefix(o *eim.ObjectStorage) string {
	if o == nil {
		return ""
	}
	return o.KeyPrefix
}

// limiter is the grant rate limiter of a device.
func (s *Service) limiter(project, host string) *rate.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := project + "/" + host
	l := s.limiters[k]
	if l == nil {
		if len(s.limiters) > 100_000 {
			// Forget the devices that are idle (full buckets) rather than
			// grow without bound.
			for k, l := range s.limiters {
				if l.TokensAt(s.o.Now()) >= float64(s.o.GrantBurst) {
					delete(s.limiters, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Limit(s.o.GrantRate), s.o.GrantBurst)
		s.limiters[k] = l
	}
	return l
}

// checkPrefix checks a device's prefix: <hostId>/ then path segments,
// ending with '/'. It returns the host's ID.
func checkPrefix(prefix string) (string, error) {
	if !strings.HasSuffix(prefix, "/") {
		return "", eim.Errorf(eim.EINVALID, "prefix: %q must end with '/'", prefix)
	}
	if why := checkRelPath(strings.TrimSuffix(prefix, "/")); why != "" {
		return "", eim.Errorf(eim.EINVALID, "prefix: %q: %s", prefix, why)
	}
	host, _, _ := strings.Cut(prefix, "/")
	if err := eim.CheckID(eim.KindHost, "prefix", host); err != nil {
		return "", eim.Errorf(eim.EINVALID, "prefix: %q must start with the device's host ID", prefix)
	}
	return host, nil
}

// checkChange says why c may not be granted ("" when it may).
func checkChange(c eim.FileChange, maxSize int64) string {
	if why := checkRelPath(c.Path); why != "" {
		return "path: " + why
	}
	if !c.Present {
		return ""
	}
	switch {
	case c.Size < 0:
		return "size: negative"
	case c.Size > maxSize:
		return fmt.Sprintf("size: %d bytes is over the most allowed, %d", c.Size, maxSize)
	case !isHexSHA256(c.SHA256):
		return "sha256: the file's SHA-256 (64 hex digits) is required to upload it"
	}
	return ""
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// checkRelPath says why p is not a relative, slash-separated path of
// plain segments ("" when it is).
func checkRelPath(p string) string {
	switch {
	case p == "":
		return "empty"
	case strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q is absolute", p)
	case !utf8.ValidString(p):
		return fmt.Sprintf("%q is not UTF-8", p)
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }):
		return fmt.Sprintf("%q holds a control character or a backslash", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return fmt.Sprintf("%q has an empty segment", p)
		case ".", "..":
			return fmt.Sprintf("%q has a %q segment", p, seg)
		}
	}
	return ""
}

// objectURL is the URL of key in the setting's bucket.
func objectURL(o *eim.ObjectStorage, key string) *url.URL {
	u, _ := url.Parse(o.Endpoint) // checked when saved
	u.Path, u.RawPath = "", ""
	if o.PathStyle {
		u.Path = "/" + o.Bucket + "/" + key
	} else {
		u.Host = o.Bucket + "." + u.Host
		u.Path = "/" + key
	}
	if key == "" {
		u.Path = strings.TrimSuffix(u.Path, "/")
		if u.Path == "" {
			u.Path = "/"
		}
	}
	return u
}

// signS3 fills g with a presigned S3 request for c.
func (s *Service) signS3(g *eim.UploadGrant, o *eim.ObjectStorage, creds Credentials, key string, c eim.FileChange, now time.Time) {
	u := objectURL(o, key)
	if !c.Present {
		g.Method = "DELETE"
		g.URL = Presign("DELETE", u, nil, o.Region, creds, now, s.o.GrantTTL)
		return
	}
	sum, _ := hex.DecodeString(c.SHA256)
	h := map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum)}
	g.Method = "PUT"
	g.URL = Presign("PUT", u, h, o.Region, creds, now, s.o.GrantTTL)
	g.Headers = h
}

// signLocal fills g with a request to the embedded store for c: its URL
// signed with the server's key over the method, project, key, content
// and expiry.
func (s *Service) signLocal(g *eim.UploadGrant, project, key string, c eim.FileChange, expires time.Time) {
	g.Method = "DELETE"
	sha, size := "", int64(0)
	if c.Present {
		g.Method, sha, size = "PUT", strings.ToLower(c.SHA256), c.Size
	}
	q := url.Values{}
	q.Set("expires", strconv.FormatInt(expires.Unix(), 10))
	if c.Present {
		q.Set("sha256", sha)
		q.Set("size", strconv.FormatInt(size, 10))
	}
	q.Set("sig", s.localSig(g.Method, project, key, sha, size, expires.Unix()))
	g.URL = s.o.AgentURL + UploadPath + url.PathEscape(project) + "/" + escapeKey(key) + "?" + q.Encode()
}

// localSig is the signature of an embedded store URL.
func (s *Service) localSig(method, project, key, sha string, size, expires int64) string {
	m := hmac.New(sha256.New, s.mac)
	fmt.Fprintf(m, "%s\n%s\n%s\n%s\n%d\n%d", method, project, key, sha, size, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// escapeKey escapes each segment of key for a URL path.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// validUntil is the unix time in an embedded store URL, checked.
func validUntil(v string, now time.Time) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 || n == math.MaxInt64 {
		return 0, false
	}
	return n, now.Unix() <= n
}
