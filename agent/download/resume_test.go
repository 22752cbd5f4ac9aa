package download_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/agent/download"
	"github.com/eimhq/eim/internal/s3test"
	"github.com/eimhq/eim/objstore"
)

// cutter is a TCP proxy in front of the S3 server that can cut a
// connection after a number of bytes of its answer, as a dropped link
// does mid-file. It records each request's head and the answer bytes it
// passed.
type cutter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	cut    int64    // cut the next connection's answer after this many bytes (0: never)
	heads  []string // the request heads, in order
	served []int64  // the answer bytes passed, per connection
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); c.serve(conn) }()
		}
	}()
	return c
}

func (c *cutter) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		return
	}
	defer server.Close()
	c.mu.Lock()
	limit := c.cut
	c.cut = 0
	i := len(c.served)
	c.served = append(c.served, 0)
	c.heads = append(c.heads, "")
	c.mu.Unlock()
	go func() {
		// The request, whole; its head recorded.
		buf := make([]byte, 64<<10)
		var head bytes.Buffer
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if head.Len() < 4096 {
					head.Write(buf[:n])
					c.mu.Lock()
					c.heads[i] = head.String()
					c.mu.Unlock()
				}
				if _, err := server.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				server.Close()
				return
			}
		}
	}()
	var r io.Reader = server
	if limit > 0 {
		r = io.LimitReader(server, limit)
	}
	n, _ := io.Copy(client, r)
	c.mu.Lock()
	c.served[i] = n
	c.mu.Unlock()
}

// s3Lister lists one object of a bucket, with a presigned GET through the
// cutter (the signed Host header is the S3 server's).
type s3Lister struct {
	t      *testing.T
	s3     *s3test.Server
	proxy  string
	bucket string
	key    string
	// stale, when set, is the listing answered instead (an entity tag and
	// size the object no longer has).
	stale *download.File
}

func (l *s3Lister) List(ctx context.Context, workload, target string) ([]download.File, time.Time, bool, error) {
	u, err := url.Parse(l.s3.URL + "/" + l.bucket + "/" + l.key)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	head, err := http.NewRequestWithContext(ctx, http.MethodHead, objstore.Presign(http.MethodHead, u, nil, l.s3.Region, l.s3.Creds, time.Now(), time.Minute), nil)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	resp, err := http.DefaultClient.Do(head)
	if err != nil {
		return nil, time.Time{}, false, err
	}
	resp.Body.Close()
	f := download.File{Path: "model.bin", Size: resp.ContentLength, ETag: strings.Trim(resp.Header.Get("ETag"), `"`)}
	if l.stale != nil {
		f.Size, f.ETag = l.stale.Size, l.stale.ETag
	}
	get, _ := url.Parse(objstore.Presign(http.MethodGet, u, nil, l.s3.Region, l.s3.Creds, time.Now(), time.Minute))
	host := get.Host
	get.Host = l.proxy
	f.URL, f.Headers = get.String(), [][2]string{{"Host", host}}
	return []download.File{f}, time.Now().Add(time.Minute), false, nil
}

func (l *s3Lister) Report(context.Context, string, string, []string, []download.Failure) error {
	return nil
}

// TestSyncResumeS3: a download cut mid-file, against a real S3 server
// (versitygw) through a proxy that drops the connection, keeps what it
// received; the next pass asks for the rest with a Range request (the
// listing names the same entity tag and size) and the file is whole. A
// partial file of an object that changed since (another entity tag in the
// listing, or in the range's answer) is started over, never mixed with the
// new content.
func TestSyncResumeS3(t *testing.T) {
	s3 := s3test.Start(t)
	s3.CreateBucket(t, "edge")
	u, _ := url.Parse(s3.URL)
	proxy := newCutter(t, u.Host)
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	const size = 2 << 20
	v1 := random(size)
	s3.Put(t, "edge", "m/model.bin", v1)
	l := &s3Lister{t: t, s3: s3, proxy: proxy.ln.Addr().String(), bucket: "edge", key: "m/model.bin"}
	dir, state := filepath.Join(t.TempDir(), "models"), t.TempDir()
	sy := &download.Syncer{Lister: l, StateDir: state}
	p := download.Path{Workload: "cam", Dir: dir, Target: "models"}
	pass := func() download.Result {
		t.Helper()
		res, err := sy.Sync(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	partials := func() map[string]int64 {
		t.Helper()
		out := map[string]int64{}
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if strings.HasPrefix(e.Name(), ".eim-download-") {
				fi, _ := e.Info()
				out[e.Name()] = fi.Size()
			}
		}
		return out
	}
	cut := func(n int64) {
		proxy.mu.Lock()
		proxy.cut = n
		proxy.mu.Unlock()
	}
	last := func() (string, int64) {
		proxy.mu.Lock()
		defer proxy.mu.Unlock()
		return proxy.heads[len(proxy.heads)-1], proxy.served[len(proxy.served)-1]
	}

	// Cut after 700 KiB of the answer: the file is not in place, its
	// first bytes are kept.
	cut(700 << 10)
	if res := pass(); len(res.Failed) != 1 || len(res.Done) != 0 {
		t.Fatalf("the cut pass: got %+v, want model.bin failed", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "model.bin")); !os.IsNotExist(err) {
		t.Fatalf("a cut download is in place: %v", err)
	}
	ps := partials()
	var kept int64
	for _, n := range ps {
		kept = n
	}
	if len(ps) != 1 || kept <= 0 || kept >= size {
		t.Fatalf("partial files after the cut: %v, want one of 1..%d bytes", ps, size-1)
	}

	// The next pass (a new Syncer: as after a restart) asks for the rest.
	sy = &download.Syncer{Lister: l, StateDir: state}
	if res := pass(); len(res.Done) != 1 || len(res.Failed) != 0 {
		t.Fatalf("the resumed pass: got %+v, want model.bin done", res)
	}
	head, served := last()
	if !strings.Contains(strings.ToLower(head), "range: bytes=") || served >= size {
		t.Fatalf("the resumed GET: %d bytes served of %d, head:\n%s\nwant a Range request for the rest", served, size, head)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.bin")); !bytes.Equal(b, v1) {
		t.Fatalf("the resumed file: %d bytes, not the object's %d", len(b), size)
	}
	if ps := partials(); len(ps) != 0 {
		t.Fatalf("partial files after the download: %v", ps)
	}

	// A new version is cut, then changes again before the next pass: the
	// listing names another entity tag, so the file starts over.
	v2 := random(size)
	s3.Put(t, "edge", "m/model.bin", v2)
	cut(500 << 10)
	pass()
	if len(partials()) != 1 {
		t.Fatalf("no partial file of version 2: %v", partials())
	}
	v3 := random(size)
	s3.Put(t, "edge", "m/model.bin", v3)
	if res := pass(); len(res.Done) != 1 {
		t.Fatalf("the pass after a change: got %+v", res)
	}
	if head, served := last(); strings.Contains(strings.ToLower(head), "range:") || served < size {
		t.Fatalf("after a change of the object: a Range request (%d bytes served):\n%s", served, head)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.bin")); !bytes.Equal(b, v3) {
		t.Fatal("the file is not version 3")
	}

	// Cut again, then the object changes while the listing still names
	// the old one (a listing older than the change): the range's answer
	// has another entity tag, and the file starts over, whole and new.
	v4 := random(size)
	s3.Put(t, "edge", "m/model.bin", v4)
	cut(300 << 10)
	pass()
	stale, _, _, err := l.List(t.Context(), "cam", "models")
	if err != nil {
		t.Fatal(err)
	}
	l.stale = &stale[0]
	v5 := random(size)
	s3.Put(t, "edge", "m/model.bin", v5)
	if res := pass(); len(res.Done) != 1 || len(res.Failed) != 0 {
		t.Fatalf("the pass with a stale listing: got %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "model.bin")); !bytes.Equal(b, v5) {
		t.Fatalf("with a stale listing: the file is not version 5 (version 4: %v)", bytes.Equal(b, v4))
	}
	if ps := partials(); len(ps) != 0 {
		t.Fatalf("partial files after the download: %v", ps)
	}
}
