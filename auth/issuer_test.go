package auth_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

func TestLoadIssuerCreatesPrivateKeyAndReloadsIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	iss, err := auth.LoadIssuer(dir)
	if err != nil {
		t.Fatalf("LoadIssuer: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, auth.KeyFile))
	if err != nil {
		t.Fatalf("key file: %v", err)
	}
	if runtime.GOOS != "windows" {
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("key file mode: got %04o, want 0600", got)
		}
	}
	again, err := auth.LoadIssuer(dir)
	if err != nil {
		t.Fatalf("LoadIssuer again: %v", err)
	}
	if got, want := again.KeyID(), iss.KeyID(); got != want {
		t.Errorf("key ID after reload: got %q, want %q", got, want)
	}
	// A token minted before the reload verifies with the reloaded key.
	tok, err := iss.Mint("alice", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), again, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(context.Background(), tok); err != nil {
		t.Errorf("verify with reloaded key: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data dir holds %d entries, want only the key file", len(entries))
	}
}

func TestLoadIssuerConcurrentStartsAgreeOnOneKey(t *testing.T) {
	dir := t.TempDir()
	const n = 8
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			iss, err := auth.LoadIssuer(dir)
			errs[i] = err
			if err == nil {
				ids[i] = iss.KeyID()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("LoadIssuer %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("key ID %d: got %q, want %q", i, ids[i], ids[0])
		}
	}
}

func TestLoadIssuerRejectsBadKeyFiles(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	tests := []struct {
		name string
		prep func(t *testing.T, path string)
	}{
		{"readable by others", func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"not PEM", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, err := auth.LoadIssuer(dir); err != nil {
				t.Fatal(err)
			}
			tt.prep(t, filepath.Join(dir, auth.KeyFile))
			_, err := auth.LoadIssuer(dir)
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Errorf("error code: got %q (%v), want %q", got, err, eim.EINVALID)
			}
		})
	}
}

func TestMintRejectsBadInput(t *testing.T) {
	iss, err := auth.LoadIssuer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		subject string
		ttl     time.Duration
	}{
		{"empty subject", "", time.Hour},
		{"zero ttl", "bob", 0},
		{"negative ttl", "bob", -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := iss.Mint(tt.subject, nil, tt.ttl)
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Errorf("error code: got %q, want %q", got, eim.EINVALID)
			}
		})
	}
}

// A key the operator provides (a Secret mounted into every replica) is read
// as it is, never written, and tokens of one replica verify on another.
func TestLoadIssuerFileSharesOneKey(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	src := t.TempDir()
	orig, err := auth.LoadIssuer(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	// As Kubernetes mounts a Secret for a pod's fsGroup: group-readable.
	dir := t.TempDir()
	path := filepath.Join(dir, "signing.key")
	if err := os.WriteFile(path, b, 0o440); err != nil {
		t.Fatal(err)
	}
	a, err := auth.LoadIssuerFile(path)
	if err != nil {
		t.Fatalf("LoadIssuerFile: %v", err)
	}
	other, err := auth.LoadIssuerFile(path)
	if err != nil {
		t.Fatalf("LoadIssuerFile again: %v", err)
	}
	if got, want := a.KeyID(), orig.KeyID(); got != want {
		t.Errorf("key ID: got %q, want %q", got, want)
	}
	tok, err := a.Mint("edgenode-host-1234abcd", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), other, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(context.Background(), tok); err != nil {
		t.Errorf("a token of one replica on another: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the key's directory holds %d entries, want only the key", len(entries))
	}
}

func TestLoadIssuerFileRejectsBadFiles(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	dir := t.TempDir()
	if _, err := auth.LoadIssuer(dir); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		mode os.FileMode
		want string // in the message
	}{
		{"readable by others", key, 0o444, "accessible by others"},
		{"not PEM", []byte("garbage"), 0o400, "not a PEM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key.pem")
			if err := os.WriteFile(path, tt.data, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := auth.LoadIssuerFile(path)
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Fatalf("error code: got %q (%v), want %q", got, err, eim.EINVALID)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error: got %q, want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.pem")
		_, err := auth.LoadIssuerFile(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("error: got %v, want one naming %s", err, path)
		}
		if _, serr := os.Stat(path); serr == nil {
			t.Errorf("LoadIssuerFile created %s", path)
		}
	})
}
