package objstore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, as S3 checks it: in the query of a presigned
// URL (what devices are given) or in the Authorization header (the
// server's own requests, such as the check of a bucket).

// Credentials are an S3 access key.
type Credentials struct {
	AccessKeyID string
	SecretKey   string
}

const (
	sigAlgorithm    = "AWS4-HMAC-SHA256"
	unsignedPayload = "UNSIGNED-PAYLOAD"
	amzDate         = "20060102T150405Z"
	// EmptySHA256 is the hex SHA-256 of no bytes: the payload hash of a
	// request without a body.
	EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Presign returns u (an S3 request's URL; its query the operation's
// parameters, if any) signed in its query for method, valid for ttl from
// now. headers (lower-case names) are signed too: the request must carry
// them with exactly these values, which is how a PUT is bound to one
// content (x-amz-checksum-sha256). The host is always signed. The payload
// is UNSIGNED-PAYLOAD, as S3 takes it in presigned URLs.
func Presign(method string, u *url.URL, headers map[string]string, region string, c Credentials, now time.Time, ttl time.Duration) string {
	now = now.UTC()
	scope := now.Format("20060102") + "/" + region + "/s3/aws4_request"
	hdrs := map[string]string{"host": u.Host}
	for k, v := range headers {
		hdrs[strings.ToLower(k)] = v
	}
	names, canonHdrs := canonicalHeaders(hdrs)
	q := u.Query()
	q.Set("X-Amz-Algorithm", sigAlgorithm)
	q.Set("X-Amz-Credential", c.AccessKeyID+"/"+scope)
	q.Set("X-Amz-Date", now.Format(amzDate))
	q.Set("X-Amz-Expires", strconv.Itoa(int(ttl/time.Second)))
	q.Set("X-Amz-SignedHeaders", names)
	query := canonicalQuery(q)
	path := canonicalPath(u.Path)
	creq := method + "\n" + path + "\n" + query + "\n" + canonHdrs + "\n" + names + "\n" + unsignedPayload
	sig := signature(c.SecretKey, now, region, scope, creq)
	out := *u
	out.Path, out.RawPath, out.RawQuery = u.Path, path, query+"&X-Amz-Signature="+sig
	return out.String()
}

// Sign signs req in its Authorization header (and sets X-Amz-Date and
// X-Amz-Content-Sha256): payloadHash is the hex SHA-256 of its body
// (EmptySHA256 without one), or UNSIGNED-PAYLOAD.
func Sign(req *http.Request, payloadHash, region string, c Credentials, now time.Time) {
	now = now.UTC()
	scope := now.Format("20060102") + "/" + region + "/s3/aws4_request"
	req.Header.Set("X-Amz-Date", now.Format(amzDate))
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	hdrs := map[string]string{"host": req.URL.Host}
	if req.Host != "" {
		hdrs["host"] = req.Host
	}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if lk == "authorization" || lk == "user-agent" || lk == "accept-encoding" {
			continue
		}
		hdrs[lk] = strings.Join(vs, ",")
	}
	names, canonHdrs := canonicalHeaders(hdrs)
	path := canonicalPath(req.URL.Path)
	req.URL.RawPath = path
	query := canonicalQuery(req.URL.Query())
	req.URL.RawQuery = query
	creq := req.Method + "\n" + path + "\n" + query + "\n" + canonHdrs + "\n" + names + "\n" + payloadHash
	sig := signature(c.SecretKey, now, region, scope, creq)
	req.Header.Set("Authorization", sigAlgorithm+" Credential="+c.AccessKeyID+"/"+scope+", SignedHeaders="+names+", Signature="+sig)
}

// signature is the hex signature of a canonical request.
func signature(secret string, now time.Time, region, scope, creq string) string {
	sum := sha256.Sum256([]byte(creq))
	sts := sigAlgorithm + "\n" + now.Format(amzDate) + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	k := hmacSHA256([]byte("AWS4"+secret), now.Format("20060102"))
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	return hex.EncodeToString(hmacSHA256(k, sts))
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// canonicalHeaders returns the signed header names (sorted, ';'-joined)
// and their canonical lines.
func canonicalHeaders(h map[string]string) (names, lines string) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strings.Join(strings.Fields(h[k]), " "))
		b.WriteByte('\n')
	}
	return strings.Join(keys, ";"), b.String()
}

// canonicalQuery is q sorted by name then value, each escaped as SigV4
// wants ('/' too).
func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		vs := slices.Clone(q[k])
		slices.Sort(vs)
		for _, v := range vs {
			parts = append(parts, awsEscape(k, true)+"="+awsEscape(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// canonicalPath is a (decoded) path escaped once as S3 wants it: every
// byte but the unreserved ones and '/'.
func canonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	return awsEscape(p, false)
}

// awsEscape percent-encodes every byte of s except A-Z a-z 0-9 - _ . ~
// (and '/' unless slash).
func awsEscape(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !slash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}
