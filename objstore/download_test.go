package objstore_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/s3test"
	"github.com/eimhq/eim/objstore"
)

// fetch GETs a download grant's URL: the status and the body.
func fetch(t *testing.T, g eim.DownloadGrant) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, g.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range g.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// raw sends body as it is to the API as tok.
func (e *env) raw(tok, method, path string, body []byte) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// listing calls GrantDownloads and maps its grants by path.
func listing(t *testing.T, svc *objstore.Service, project string, prefixes ...string) map[string]eim.DownloadGrant {
	t.Helper()
	gs, truncated, exp, err := svc.GrantDownloads(t.Context(), project, prefixes)
	if err != nil || truncated || exp.IsZero() {
		t.Fatalf("GrantDownloads: %d grants, truncated %v, expiring %v, %v", len(gs), truncated, exp, err)
	}
	out := map[string]eim.DownloadGrant{}
	for _, g := range gs {
		out[g.Path] = g
	}
	return out
}

// TestEmbeddedDownloads: an operator puts files into the embedded store
// (PUT …/edgedata/, writers only; the workloads' shared directory or a
// host's), GrantDownloads lists a device's prefix and the shared one (the
// device's winning) with signed GETs of the agent listener, which serve
// the content and refuse a changed URL or an expired one; a DELETE takes
// a file away; a project with object storage refuses the PUT.
func TestEmbeddedDownloads(t *testing.T) {
	e := newEnv(t, objstore.Options{})
	base := "/v1/projects/a/edgedata/"
	shared, own := eim.SharedIngressPrefix("cam", "models"), e.hostA+"/cam/models/"
	for _, c := range []struct {
		tok, path, body string
		status          int
		contains        string
	}{
		{"writer", base + shared + "net.bin", "weights v1", http.StatusOK, `"size":10`},
		{"writer", base + shared + "labels/en.txt", "cat", http.StatusOK, `"path":"cam/models/labels/en.txt"`},
		{"writer", base + own + "net.bin", "this device's weights", http.StatusOK, ""},
		{"reader", base + shared + "x", "x", http.StatusForbidden, ""},
		{"bwrite", base + shared + "x", "x", http.StatusForbidden, ""},
		{"writer", base + "host-1/x", "x", http.StatusBadRequest, "hostId"},
		{"writer", base + shared + "%2e%2e/%2e%2e/%2e%2e/x", "x", http.StatusBadRequest, "path"},
		{"writer", base + shared + "a%01b", "x", http.StatusBadRequest, "path"},
	} {
		code, b := e.raw(c.tok, http.MethodPut, c.path, []byte(c.body))
		if code != c.status || !strings.Contains(b, c.contains) {
			t.Fatalf("PUT %s as %s: got %d %s, want %d with %q", c.path, c.tok, code, b, c.status, c.contains)
		}
	}
	e.want("reader", "GET", base+eim.SharedIngressDir+"?prefix=cam/", nil, http.StatusOK, `"totalElements":2`)

	gs := listing(t, e.svc, "a", own, shared)
	if len(gs) != 2 || gs["net.bin"].Size != int64(len("this device's weights")) || gs["labels/en.txt"].ETag == "" {
		t.Fatalf("listing: got %+v, want net.bin (the device's) and labels/en.txt", gs)
	}
	for p, want := range map[string]string{"net.bin": "this device's weights", "labels/en.txt": "cat"} {
		if code, b := fetch(t, gs[p]); code != http.StatusOK || b != want {
			t.Fatalf("GET %s: got %d %q, want %q", p, code, b, want)
		}
	}
	// Another device sees the shared file only.
	if gb := listing(t, e.svc, "a", e.hostB+"/cam/models/", shared); len(gb) != 2 || gb["net.bin"].Size != 10 {
		t.Fatalf("another device's listing: got %+v, want the shared files", gb)
	}
	// A URL changed to another key, or used after its expiry, is refused.
	bad := gs["net.bin"]
	bad.URL = strings.Replace(bad.URL, e.hostA, e.hostB, 1)
	if code, _ := fetch(t, bad); code != http.StatusForbidden {
		t.Fatalf("a grant used for another key: got %d, want 403", code)
	}
	e.clock.add(-16 * time.Minute)
	old := listing(t, e.svc, "a", own)["net.bin"]
	e.clock.add(16 * time.Minute)
	if code, b := fetch(t, old); code != http.StatusForbidden || !strings.Contains(b, "expired") {
		t.Fatalf("an expired grant: got %d %s, want 403 expired", code, b)
	}
	// Deleted: the device's file is gone, the shared one shows through.
	e.want("writer", "DELETE", base+own+"net.bin", nil, http.StatusOK)
	e.want("writer", "DELETE", base+own+"net.bin", nil, http.StatusNotFound)
	if gs := listing(t, e.svc, "a", own, shared); gs["net.bin"].Size != 10 {
		t.Fatalf("after the delete: got %+v, want the shared net.bin", gs)
	}
	// Bad prefixes are refused as a whole.
	for _, p := range []string{"_workloads/../x/", "host-1/x/", "/abs/", "_workloads/cam"} {
		if _, _, _, err := e.svc.GrantDownloads(t.Context(), "a", []string{p}); eim.ErrorCode(err) != eim.EINVALID {
			t.Errorf("prefix %q: got %v, want EINVALID", p, err)
		}
	}
	// With object storage, the devices read the bucket: no PUT here.
	secret := "s3cr3t-Key"
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", map[string]any{"endpoint": "http://127.0.0.1:1", "bucket": "edge",
		"pathStyle": true, "accessKeyId": "AKID", "secretAccessKey": secret}, http.StatusOK)
	if code, b := e.raw("writer", http.MethodPut, base+shared+"y", []byte("y")); code != http.StatusConflict || !strings.Contains(b, "bucket") {
		t.Fatalf("PUT with object storage: got %d %s, want 409 naming the bucket", code, b)
	}
}

// TestS3Downloads proves the download grants against a real S3 server
// that checks signatures (versitygw): the server lists the device's
// prefix and the workload's shared one with its keys (under the setting's
// key prefix), the device's object hiding the shared one of the same
// path, another device's objects left out; each presigned GET serves the
// object, a GET changed to another key is refused, and no grant holds the
// secret key.
func TestS3Downloads(t *testing.T) {
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "edge")
	e := newEnv(t, objstore.Options{})
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", map[string]any{"endpoint": s3.URL, "bucket": "edge", "keyPrefix": "fleet/",
		"region": s3.Region, "pathStyle": true, "accessKeyId": s3.Creds.AccessKeyID, "secretAccessKey": s3.Creds.SecretKey},
		http.StatusOK, `"status":"REACHABLE"`)
	shared, own := eim.SharedIngressPrefix("cam", "models"), e.hostA+"/cam/models/"
	s3.Put(t, "edge", "fleet/"+shared+"net.bin", []byte("shared weights"))
	s3.Put(t, "edge", "fleet/"+shared+"dir one/labels.txt", []byte("cat dog"))
	s3.Put(t, "edge", "fleet/"+own+"net.bin", []byte("own weights"))
	s3.Put(t, "edge", "fleet/"+e.hostB+"/cam/models/other.bin", []byte("not A's"))
	s3.Put(t, "edge", "fleet/"+e.hostA+"/cam/modelsX/near.bin", []byte("another target"))

	gs := listing(t, e.svc, "a", own, shared)
	if len(gs) != 2 || gs["net.bin"].Size != int64(len("own weights")) || gs["dir one/labels.txt"].ETag == "" {
		t.Fatalf("listing: got %+v, want net.bin (the device's) and dir one/labels.txt", gs)
	}
	for p, want := range map[string]string{"net.bin": "own weights", "dir one/labels.txt": "cat dog"} {
		g := gs[p]
		if strings.Contains(g.URL, s3.Creds.SecretKey) || strings.Contains(g.URL, url.QueryEscape(s3.Creds.SecretKey)) {
			t.Fatalf("grant %s holds the secret key", p)
		}
		if code, b := fetch(t, g); code != http.StatusOK || b != want {
			t.Fatalf("GET %s: got %d %q, want %q", p, code, b, want)
		}
	}
	bad := gs["net.bin"]
	bad.URL = strings.Replace(bad.URL, "net.bin", "other.bin", 1)
	if code, _ := fetch(t, bad); code != http.StatusForbidden {
		t.Fatalf("a grant used for another key: got %d, want 403", code)
	}
	// A changed object has another entity tag; a deleted one is not
	// listed.
	s3.Put(t, "edge", "fleet/"+shared+"dir one/labels.txt", []byte("cat dog bird"))
	s3.Delete(t, "edge", "fleet/"+own+"net.bin")
	after := listing(t, e.svc, "a", own, shared)
	if after["dir one/labels.txt"].ETag == gs["dir one/labels.txt"].ETag || after["net.bin"].Size != int64(len("shared weights")) {
		t.Fatalf("after a change and a delete: got %+v", after)
	}
}

// TestS3BucketPerDevice: with bucketPerDevice, against versitygw: a
// template that cannot make bucket names is a 400 naming the field; a
// device's first grant creates its bucket with the setting's keys, and
// its uploads land there (under the same keys as in one bucket); its
// ingress listing reads its own bucket for its prefix and the setting's
// bucket for the workload's shared files; another device gets another
// bucket.
func TestS3BucketPerDevice(t *testing.T) {
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "edge")
	e := newEnv(t, objstore.Options{})
	setting := map[string]any{"endpoint": s3.URL, "bucket": "edge", "region": s3.Region, "pathStyle": true,
		"accessKeyId": s3.Creds.AccessKeyID, "secretAccessKey": s3.Creds.SecretKey}
	for _, bad := range []string{"eim-device", "EIM-{hostId}", "{hostId}-{hostId}", "x{hostId}" + strings.Repeat("y", 60)} {
		setting["bucketPerDevice"] = bad
		e.want("writer", "PUT", "/v1/projects/a/objectstorage", setting, http.StatusBadRequest, "bucketPerDevice")
	}
	setting["bucketPerDevice"] = "eim-{hostId}"
	e.want("writer", "PUT", "/v1/projects/a/objectstorage", setting, http.StatusOK, `"bucketPerDevice":"eim-{hostId}"`, `"status":"REACHABLE"`)
	bucketA, bucketB := "eim-"+e.hostA, "eim-"+e.hostB
	if code, _ := s3.Do(t, http.MethodHead, "/"+bucketA, nil); code != http.StatusNotFound {
		t.Fatalf("device A's bucket before any grant: HEAD got %d, want 404", code)
	}

	prefix := e.hostA + "/cam/out/"
	g := grant(t, e.svc, "a", prefix, change("f.txt", []byte("frame")))[0]
	if !strings.Contains(g.URL, "/"+bucketA+"/") {
		t.Fatalf("grant of device A: %s, want its bucket %s", g.URL, bucketA)
	}
	if code, b := send(t, g, []byte("frame")); code != http.StatusOK {
		t.Fatalf("PUT into the device's bucket: got %d %s", code, b)
	}
	if got, ok := s3.Get(t, bucketA, prefix+"f.txt"); !ok || string(got) != "frame" {
		t.Fatalf("object in %s: got %q (exists %v)", bucketA, got, ok)
	}
	if keys := s3.List(t, "edge", ""); len(keys) != 0 {
		t.Fatalf("the setting's bucket got %v, want nothing", keys)
	}
	// A second grant finds the bucket there (and the device's next
	// upload replaces the object).
	g = grant(t, e.svc, "a", prefix, change("f.txt", []byte("frame 2")))[0]
	if code, b := send(t, g, []byte("frame 2")); code != http.StatusOK {
		t.Fatalf("second PUT: got %d %s", code, b)
	}

	// Ingress: the device's own files from its bucket, the shared ones
	// from the setting's.
	shared, own := eim.SharedIngressPrefix("cam", "models"), e.hostA+"/cam/models/"
	s3.Put(t, "edge", shared+"net.bin", []byte("shared"))
	s3.Put(t, bucketA, own+"own.cfg", []byte("mine"))
	s3.Put(t, "edge", own+"stray.cfg", []byte("not in A's bucket"))
	gs := listing(t, e.svc, "a", own, shared)
	if len(gs) != 2 || gs["stray.cfg"].URL != "" {
		t.Fatalf("listing: got %+v, want own.cfg and net.bin", gs)
	}
	for p, want := range map[string]string{"own.cfg": "mine", "net.bin": "shared"} {
		if code, b := fetch(t, gs[p]); code != http.StatusOK || b != want {
			t.Fatalf("GET %s: got %d %q, want %q", p, code, b, want)
		}
	}
	// Device B's first listing creates its bucket too.
	if gb := listing(t, e.svc, "a", e.hostB+"/cam/models/", shared); len(gb) != 1 {
		t.Fatalf("device B's listing: got %+v, want the shared file", gb)
	}
	if code, _ := s3.Do(t, http.MethodHead, "/"+bucketB, nil); code != http.StatusOK {
		t.Fatalf("device B's bucket after its first grant: HEAD got %d, want 200", code)
	}
}
