package objstore_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/objstore"
)

// TestGrantRefusals: a bad prefix or too many files refuse the call; a
// file with a path leaving the prefix, too big or without its checksum is
// refused by name while the others are granted; a device asking faster
// than its rate is told to come back (EUNAVAILABLE), another device is
// not slowed.
func TestGrantRefusals(t *testing.T) {
	e := newEnv(t, objstore.Options{GrantBurst: 5, GrantRate: 0.001})
	prefix := e.hostA + "/cam/out/"
	for _, p := range []string{"", "cam/", e.hostA + "/cam", "/" + e.hostA + "/x/", e.hostA + "/../x/", e.hostA + "//x/", "host-zzz/x/"} {
		if _, _, err := e.svc.GrantUploads(t.Context(), "a", p, nil); eim.ErrorCode(err) != eim.EINVALID || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("prefix %q: got %v, want EINVALID naming prefix", p, err)
		}
	}
	big := change("big.bin", []byte("x"))
	big.Size = eim.DefaultMaxUploadSize + 1
	noSum := change("nosum", []byte("y"))
	noSum.SHA256 = ""
	gs, _, err := e.svc.GrantUploads(t.Context(), "a", prefix, []eim.FileChange{
		change("ok/file.txt", []byte("ok")), change("../escape", []byte("x")), change("/etc/passwd", []byte("x")),
		big, noSum,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", `".." segment`, "is absolute", "size:", "sha256:"} {
		if want == "" && (gs[i].Refused != "" || gs[i].URL == "") || want != "" && (!strings.Contains(gs[i].Refused, want) || gs[i].URL != "") {
			t.Errorf("grant %d (%s): got refused %q url %q, want refused containing %q", i, gs[i].Path, gs[i].Refused, gs[i].URL, want)
		}
	}
	// The burst (5) is spent: the next call is refused as retryable.
	if _, _, err := e.svc.GrantUploads(t.Context(), "a", prefix, []eim.FileChange{change("x", []byte("x"))}); eim.ErrorCode(err) != eim.EUNAVAILABLE {
		t.Fatalf("over the rate: got %v, want EUNAVAILABLE", err)
	}
	if _, _, err := e.svc.GrantUploads(t.Context(), "b", e.hostB+"/cam/out/", []eim.FileChange{change("x", []byte("x"))}); err != nil {
		t.Fatalf("another device: got %v, want its grant", err)
	}
	many := make([]eim.FileChange, objstore.MaxChanges+1)
	if _, _, err := e.svc.GrantUploads(t.Context(), "b", e.hostB+"/cam/out/", many); eim.ErrorCode(err) != eim.EINVALID || !strings.Contains(err.Error(), "changes") {
		t.Fatalf("too many changes: got %v, want EINVALID naming changes", err)
	}
}

// TestEmbeddedStore: without object storage, a grant's PUT stores the
// file in the data directory under the device's prefix, the API lists it
// and serves it back; a changed file is uploaded again; a deleted file's
// DELETE removes it; a grant used for another key, another content or
// after it expired is refused; another project sees nothing.
func TestEmbeddedStore(t *testing.T) {
	e := newEnv(t, objstore.Options{})
	prefix := e.hostA + "/cam/out/"
	v1, v2 := []byte("frame one\n"), []byte("frame two, longer\n")
	gs := grant(t, e.svc, "a", prefix, change("day 1/img.raw", v1), change("log.txt", []byte("log")))
	if gs[0].Method != http.MethodPut || !strings.HasPrefix(gs[0].URL, e.srv.URL+objstore.UploadPath+"a/"+e.hostA+"/cam/out/day%201/img.raw?") {
		t.Fatalf("grant: got %+v, want a PUT to the embedded store under the device's prefix", gs[0])
	}
	for i, body := range [][]byte{v1, []byte("log")} {
		if code, b := send(t, gs[i], body); code != http.StatusOK {
			t.Fatalf("PUT %s: got %d %s, want 200", gs[i].Path, code, b)
		}
	}
	list := e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA, nil, http.StatusOK,
		`"path":"cam/out/day 1/img.raw"`, `"path":"cam/out/log.txt"`, `"totalElements":2`)
	if strings.Contains(list, "upload-") {
		t.Fatalf("list shows a temporary file: %s", list)
	}
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"?prefix=cam/out/day", nil, http.StatusOK, `"totalElements":1`)
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/out/day%201/img.raw", nil, http.StatusOK, string(v1))
	e.want("bwrite", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/out/log.txt", nil, http.StatusForbidden)
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/../../x", nil, http.StatusBadRequest)

	// Tampered: the grant of log.txt used for another key, another content.
	tampered := gs[1]
	tampered.URL = strings.Replace(tampered.URL, "log.txt", "other.txt", 1)
	if code, b := send(t, tampered, []byte("log")); code != http.StatusForbidden {
		t.Fatalf("grant used for another key: got %d %s, want 403", code, b)
	}
	tampered.URL = strings.Replace(gs[1].URL, "/a/"+e.hostA, "/b/"+e.hostA, 1)
	if code, b := send(t, tampered, []byte("log")); code != http.StatusForbidden {
		t.Fatalf("grant used for another project: got %d %s, want 403", code, b)
	}
	if code, b := send(t, gs[1], []byte("LOG")); code != http.StatusBadRequest || !strings.Contains(b, "SHA-256") {
		t.Fatalf("grant used for another content: got %d %s, want 400 naming the SHA-256", code, b)
	}
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/out/log.txt", nil, http.StatusOK, "log")

	// Changed: uploaded again.
	g := grant(t, e.svc, "a", prefix, change("day 1/img.raw", v2))[0]
	if code, b := send(t, g, v2); code != http.StatusOK {
		t.Fatalf("PUT of the changed file: got %d %s", code, b)
	}
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/out/day%201/img.raw", nil, http.StatusOK, string(v2))

	// Expired: refused.
	g = grant(t, e.svc, "a", prefix, change("log.txt", nil))[0]
	e.clock.add(16 * time.Minute)
	if code, b := send(t, g, nil); code != http.StatusForbidden || !strings.Contains(b, "expired") {
		t.Fatalf("expired grant: got %d %s, want 403 expired", code, b)
	}
	// Deleted: removed, with its empty directories.
	gs = grant(t, e.svc, "a", prefix, change("log.txt", nil), change("day 1/img.raw", nil))
	for _, g := range gs {
		if g.Method != http.MethodDelete {
			t.Fatalf("grant of a deleted file: got %s, want DELETE", g.Method)
		}
		if code, b := send(t, g, nil); code != http.StatusNoContent {
			t.Fatalf("DELETE %s: got %d %s", g.Path, code, b)
		}
	}
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA, nil, http.StatusOK, `"totalElements":0`)
	e.want("reader", "GET", "/v1/projects/a/edgedata/"+e.hostA+"/cam/out/log.txt", nil, http.StatusNotFound)
	if ents, _ := os.ReadDir(filepath.Join(e.dataDir, "objects", "a")); len(ents) != 0 {
		t.Fatalf("after the deletes: %d entries left in the project's directory, want none", len(ents))
	}
}
