// Package s3test runs a real S3 server for tests: versitygw (Versity's S3
// gateway, Apache-2.0) on a POSIX directory, as a child process on a
// loopback port. It checks SigV4 signatures (header and presigned) and
// SHA-256 checksums as S3 does; it is not a fake. The binary is found in
// $EIM_VERSITYGW, on PATH as versitygw, or in the CI cache
// (${EIM_CI_CACHE:-$HOME/.cache/eim-ci}/versitygw-<Version>/versitygw,
// where .ci/run builds it). Without it the test is skipped, unless
// EIM_REQUIRE_S3 is set: then it fails.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/objstore"
)

// Version is the versitygw release .ci/run builds.
const Version = "v1.8.0"

// RequireEnv makes a missing versitygw fail the test instead of skipping it.
const RequireEnv = "EIM_REQUIRE_S3"

// Server is a running versitygw.
type Server struct {
	// URL is the endpoint (http://127.0.0.1:PORT; buckets path-style).
	URL    string
	Region string
	// Creds are the root user's (the bucket owner's) keys.
	Creds objstore.Credentials
	// Dir is the gateway's directory: a bucket is a directory in it.
	Dir string
}

// Binary returns versitygw's path, or "" when there is none.
func Binary() string {
	if p := os.Getenv("EIM_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	cache := os.Getenv("EIM_CI_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "eim-ci")
	}
	p := filepath.Join(cache, "versitygw-"+Version, "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// Start runs versitygw until the test ends, with fresh random root keys,
// and waits until it answers. Buckets are addressed path-style.
func Start(t testing.TB) *Server { return start(t, "") }

// StartVirtual is Start with virtual-hosted buckets too: bucket.domain:port
// addresses a bucket (the test must resolve those names to 127.0.0.1
// itself: see Dialer).
func StartVirtual(t testing.TB, domain string) *Server { return start(t, domain) }

// Dialer dials every address's port on 127.0.0.1: a transport using it
// reaches a virtual-hosted bucket's name without DNS.
func Dialer(ctx context.Context, network, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
}

func start(t testing.TB, domain string) *Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("versitygw not found ($EIM_VERSITYGW, PATH, the CI cache) and %s is set", RequireEnv)
		}
		t.Skipf("versitygw not found ($EIM_VERSITYGW, PATH or the CI cache; .ci/run builds it); set %s to fail instead", RequireEnv)
	}
	s := &Server{Region: "us-east-1", Dir: t.TempDir(),
		Creds: objstore.Credentials{AccessKeyID: "AK" + randHex(8), SecretKey: randHex(20)}}
	var lastErr error
	for range 5 { // the free port may be taken between its probe and the start
		addr := freePort(t)
		ctx, cancel := context.WithCancel(context.Background())
		args := []string{"--access", s.Creds.AccessKeyID, "--secret", s.Creds.SecretKey, "--region", s.Region, "--port", addr}
		if domain != "" {
			args = append(args, "--virtual-domain", domain)
		}
		cmd := exec.CommandContext(ctx, bin, append(args, "posix", s.Dir)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID=", "ROOT_SECRET_ACCESS_KEY=")
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start versitygw: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		s.URL = "http://" + addr
		if lastErr = s.waitUp(exited); lastErr == nil {
			t.Cleanup(func() {
				cancel()
				<-exited
			})
			return s
		}
		cancel()
		<-exited
		lastErr = fmt.Errorf("%w; its output: %s", lastErr, out.String())
	}
	t.Fatalf("versitygw did not start: %v", lastErr)
	return nil
}

// waitUp polls the server until it answers (any HTTP answer), for at most
// 30 s or until it exits.
func (s *Server) waitUp(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited")
		default:
		}
		resp, err := http.Get(s.URL + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("versitygw did not answer on %s within 30 s", s.URL)
}

// Do sends a request signed as the bucket owner (path-style: path is
// /bucket/key) and returns the status and body.
func (s *Server) Do(t testing.TB, method, path string, body []byte) (int, []byte) {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = path
	req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	sum := sha256.Sum256(body)
	objstore.Sign(req, hex.EncodeToString(sum[:]), s.Region, s.Creds, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// CreateBucket creates a bucket owned by the root user.
func (s *Server) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	if code, b := s.Do(t, http.MethodPut, "/"+bucket, nil); code != http.StatusOK {
		t.Fatalf("create bucket %s: got %d %s", bucket, code, b)
	}
}

// Get reads an object as the bucket owner: its content, or ok false when
// it does not exist (404).
func (s *Server) Get(t testing.TB, bucket, key string) (data []byte, ok bool) {
	t.Helper()
	code, b := s.Do(t, http.MethodGet, "/"+bucket+"/"+key, nil)
	switch code {
	case http.StatusOK:
		return b, true
	case http.StatusNotFound:
		return nil, false
	}
	t.Fatalf("GET %s/%s: got %d %s", bucket, key, code, b)
	return nil, false
}

// List lists the keys of a bucket under prefix (ListObjectsV2, one page).
func (s *Server) List(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	code, b := s.Do(t, http.MethodGet, "/"+bucket, nil)
	if code != http.StatusOK {
		t.Fatalf("list %s: got %d %s", bucket, code, b)
	}
	var keys []string
	for _, part := range strings.Split(string(b), "<Key>")[1:] {
		k, _, _ := strings.Cut(part, "</Key>")
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Put writes an object as the bucket owner.
func (s *Server) Put(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	if code, b := s.Do(t, http.MethodPut, "/"+bucket+"/"+key, data); code != http.StatusOK {
		t.Fatalf("PUT %s/%s: got %d %s", bucket, key, code, b)
	}
}

// Delete removes an object as the bucket owner.
func (s *Server) Delete(t testing.TB, bucket, key string) {
	t.Helper()
	if code, b := s.Do(t, http.MethodDelete, "/"+bucket+"/"+key, nil); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("DELETE %s/%s: got %d %s", bucket, key, code, b)
	}
}
