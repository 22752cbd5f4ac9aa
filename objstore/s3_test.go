package objstore_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/s3test"
	"github.com/eimhq/eim/objstore"
)

// TestSetting: the setting is checked field by field (400 naming the
// field), saved whether or not its bucket answers (the Reachable
// condition says), never answered with its secret, kept when a replace
// leaves the secret out, and per project.
func TestSetting(t *testing.T) {
	e := newEnv(t, objstore.Options{CheckTimeout: 3 * time.Second})
	p := "/v1/projects/a/objectstorage"
	// Nothing listens on port 1 of loopback: the check fails at once.
	good := func() map[string]any {
		return map[string]any{"endpoint": "http://127.0.0.1:1", "bucket": "edge-data", "region": "eu-west-1", "pathStyle": true,
			"accessKeyId": "AKID", "secretAccessKey": "s3cr3t-Key"}
	}
	e.want("writer", "GET", p, nil, http.StatusNotFound, "has no object storage")
	for field, bad := range map[string]any{
		"endpoint": "ftp://s3.example", "bucket": "Bad_Bucket", "region": "EU WEST", "keyPrefix": "../x/",
		"accessKeyId": "", "secretAccessKey": "with space", "caCert": "not pem", "maxFileSize": -1,
	} {
		in := good()
		in[field] = bad
		e.want("writer", "PUT", p, in, http.StatusBadRequest, field)
	}
	in := good()
	delete(in, "secretAccessKey")
	e.want("writer", "PUT", p, in, http.StatusBadRequest, "secretAccessKey: required")
	in = good()
	in["unknown"] = 1
	e.want("writer", "PUT", p, in, http.StatusBadRequest, "unknown")
	e.want("reader", "PUT", p, good(), http.StatusForbidden)
	e.want("bwrite", "PUT", p, good(), http.StatusForbidden)

	b := e.want("writer", "PUT", p, good(), http.StatusOK, `"status":"UNREACHABLE"`, `"secretAccessKeySet":true`, `"maxFileSize":5368709120`)
	if strings.Contains(b, "s3cr3t") {
		t.Fatalf("PUT answered the secret: %s", b)
	}
	b = e.want("reader", "GET", p, nil, http.StatusOK, `"bucket":"edge-data"`, `"lastError":"`)
	if strings.Contains(b, "s3cr3t") {
		t.Fatalf("GET answered the secret: %s", b)
	}
	stored, err := e.store.GetObjectStorage(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored.SealedSecretKey, "s3cr3t") {
		t.Fatalf("the store holds the secret in the clear: %q", stored.SealedSecretKey)
	}
	in = good()
	delete(in, "secretAccessKey")
	in["bucket"] = "other-bucket"
	e.want("writer", "PUT", p, in, http.StatusOK, `"bucket":"other-bucket"`)
	if o, _ := e.store.GetObjectStorage(t.Context(), "a"); o.SealedSecretKey != stored.SealedSecretKey {
		t.Fatal("a replace without the secret changed the stored secret")
	}
	e.want("bwrite", "GET", "/v1/projects/b/objectstorage", nil, http.StatusNotFound)
	e.want("writer", "DELETE", p, nil, http.StatusOK)
	e.want("writer", "DELETE", p, nil, http.StatusNotFound)
}

// TestS3 proves the grants against a real S3 server that checks
// signatures (versitygw): the setting's check says REACHABLE with the
// right keys and why not with wrong ones; a grant's PUT stores the file
// under the device's prefix (read back as the bucket owner); a changed
// file is uploaded again; a deleted file's DELETE removes it; a grant
// used for another key, for another content than its checksum, or after
// it expired is refused by the server; no grant holds the secret key.
func TestS3(t *testing.T) {
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "edge")
	e := newEnv(t, objstore.Options{})
	setting := map[string]any{"endpoint": s3.URL, "bucket": "edge", "keyPrefix": "fleet/", "region": s3.Region, "pathStyle": true,
		"accessKeyId": s3.Creds.AccessKeyID, "secretAccessKey": "wrong-secret"}
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", setting, http.StatusOK, `"status":"UNREACHABLE"`, "403")
	setting["secretAccessKey"] = s3.Creds.SecretKey
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", setting, http.StatusOK, `"status":"REACHABLE"`)

	prefix := e.hostA + "/cam/out/"
	v1, v2 := []byte("frame one\n"), []byte("frame two, longer\n")
	gs := grant(t, e.svc, "a", prefix, change("day 1/img.raw", v1), change("log.txt", []byte("log")))
	for _, g := range gs {
		if strings.Contains(g.URL, s3.Creds.SecretKey) || strings.Contains(g.URL, url.QueryEscape(s3.Creds.SecretKey)) {
			t.Fatalf("grant %s holds the secret key: %s", g.Path, g.URL)
		}
		for k, v := range g.Headers {
			if strings.Contains(k+v, s3.Creds.SecretKey) {
				t.Fatalf("grant %s's headers hold the secret key", g.Path)
			}
		}
		if g.Method != http.MethodPut || g.Headers["x-amz-checksum-sha256"] == "" {
			t.Fatalf("grant: got %+v, want a PUT bound to the checksum", g)
		}
	}
	for i, body := range [][]byte{v1, []byte("log")} {
		if code, b := send(t, gs[i], body); code != http.StatusOK {
			t.Fatalf("PUT %s: got %d %s, want 200", gs[i].Path, code, b)
		}
	}
	key := "fleet/" + prefix + "day 1/img.raw"
	if got, ok := s3.Get(t, "edge", key); !ok || string(got) != string(v1) {
		t.Fatalf("object %s: got %q (exists %v), want %q", key, got, ok, v1)
	}
	if keys := s3.List(t, "edge", ""); len(keys) != 2 || !strings.HasPrefix(keys[0], "fleet/"+e.hostA+"/cam/out/") {
		t.Fatalf("bucket: got keys %v, want the two files under the device's prefix", keys)
	}

	// Tampered: another key (the signature no longer matches), another
	// content than the checksum bound (BadDigest), the checksum header
	// left out (not the signed request).
	tampered := gs[1]
	tampered.URL = strings.Replace(gs[1].URL, "log.txt", "evil.txt", 1)
	if code, b := send(t, tampered, []byte("log")); code != http.StatusForbidden || !strings.Contains(b, "SignatureDoesNotMatch") {
		t.Fatalf("grant used for another key: got %d %s, want 403 SignatureDoesNotMatch", code, b)
	}
	tampered = gs[1]
	tampered.URL = strings.Replace(gs[1].URL, "/"+e.hostA+"/", "/"+e.hostB+"/", 1)
	if code, _ := send(t, tampered, []byte("log")); code != http.StatusForbidden {
		t.Fatalf("grant used for another device's prefix: got %d, want 403", code)
	}
	if code, b := send(t, gs[1], []byte("LOG")); code/100 != 4 || !strings.Contains(b, "BadDigest") {
		t.Fatalf("grant used for another content: got %d %s, want 400 BadDigest", code, b)
	}
	tampered = gs[1]
	tampered.Headers = nil
	if code, b := send(t, tampered, []byte("LOG")); code != http.StatusForbidden {
		t.Fatalf("grant sent without its checksum header: got %d %s, want 403", code, b)
	}
	if got, _ := s3.Get(t, "edge", "fleet/"+prefix+"log.txt"); string(got) != "log" {
		t.Fatalf("after the tampered requests: log.txt holds %q, want log", got)
	}
	if _, ok := s3.Get(t, "edge", "fleet/"+prefix+"evil.txt"); ok {
		t.Fatal("the tampered key was stored")
	}

	// Changed: uploaded again.
	g := grant(t, e.svc, "a", prefix, change("day 1/img.raw", v2))[0]
	if code, b := send(t, g, v2); code != http.StatusOK {
		t.Fatalf("PUT of the changed file: got %d %s", code, b)
	}
	if got, _ := s3.Get(t, "edge", key); string(got) != string(v2) {
		t.Fatalf("changed object: got %q, want %q", got, v2)
	}

	// Expired: a grant made 16 minutes ago is refused by the server.
	e.clock.add(-16 * time.Minute)
	g = grant(t, e.svc, "a", prefix, change("log.txt", nil))[0]
	e.clock.add(16 * time.Minute)
	if code, b := send(t, g, nil); code != http.StatusForbidden || !strings.Contains(b, "expired") {
		t.Fatalf("expired grant: got %d %s, want 403 expired", code, b)
	}

	// Deleted: removed from the bucket.
	gs = grant(t, e.svc, "a", prefix, change("log.txt", nil), change("day 1/img.raw", nil))
	for _, g := range gs {
		if g.Method != http.MethodDelete {
			t.Fatalf("grant of a deleted file: got %s, want DELETE", g.Method)
		}
		if code, b := send(t, g, nil); code != http.StatusNoContent {
			t.Fatalf("DELETE %s: got %d %s, want 204", g.Path, code, b)
		}
	}
	if keys := s3.List(t, "edge", "fleet/"); len(keys) != 0 {
		t.Fatalf("after the deletes: keys %v left, want none", keys)
	}

	// A project without a setting still uses the embedded store.
	if g := grant(t, e.svc, "b", e.hostB+"/cam/out/", change("x", []byte("x")))[0]; !strings.HasPrefix(g.URL, e.srv.URL+objstore.UploadPath) {
		t.Fatalf("project without object storage: got %s, want the embedded store", g.URL)
	}
}

// TestS3VirtualHost: with virtual-hosted addressing (bucket.host, what AWS
// uses), the setting's check, a grant's PUT and DELETE are accepted by
// versitygw and a grant used for another key is refused. Every name is
// dialed on 127.0.0.1 (no DNS).
func TestS3VirtualHost(t *testing.T) {
	s3 := s3test.StartVirtual(t, "s3.test")
	s3.CreateBucket(t, "edge")
	e := newEnv(t, objstore.Options{DialContext: s3test.Dialer})
	u, _ := url.Parse(s3.URL)
	setting := map[string]any{"endpoint": "http://s3.test:" + u.Port(), "bucket": "edge", "region": s3.Region,
		"accessKeyId": s3.Creds.AccessKeyID, "secretAccessKey": s3.Creds.SecretKey}
	// The check, signed for the bucket's virtual host, passes.
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", setting, http.StatusOK, `"status":"REACHABLE"`)
	client := &http.Client{Transport: &http.Transport{DialContext: s3test.Dialer}}
	sendVia := func(g eim.UploadGrant, body []byte) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), g.Method, g.URL, strings.NewReader(string(body)))
		if body == nil {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		for k, v := range g.Headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	content := []byte("virtual\n")
	g := grant(t, e.svc, "a", e.hostA+"/w/out/", change("f.txt", content))[0]
	if !strings.HasPrefix(g.URL, "http://edge.s3.test:"+u.Port()+"/"+e.hostA+"/w/out/f.txt?") {
		t.Fatalf("grant URL %s: want the bucket in the host", g.URL)
	}
	evil := g
	evil.URL = strings.Replace(g.URL, "f.txt", "g.txt", 1)
	if code := sendVia(evil, content); code != http.StatusForbidden {
		t.Fatalf("grant used for another key: got %d, want 403", code)
	}
	if code := sendVia(g, content); code != http.StatusOK {
		t.Fatalf("PUT: got %d, want 200", code)
	}
	if got, ok := s3.Get(t, "edge", e.hostA+"/w/out/f.txt"); !ok || string(got) != string(content) {
		t.Fatalf("object: got %q (exists %v)", got, ok)
	}
	g = grant(t, e.svc, "a", e.hostA+"/w/out/", change("f.txt", nil))[0]
	if code := sendVia(g, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE: got %d, want 204", code)
	}
	if _, ok := s3.Get(t, "edge", e.hostA+"/w/out/f.txt"); ok {
		t.Fatal("deleted object still there")
	}
}
