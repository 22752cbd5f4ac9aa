package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/pki"
)

// TestServerReplicasShareKeys starts two servers as a Kubernetes deployment
// runs its replicas: each with a data directory of its own, all with the
// token-signing key and the agent listener's CA and certificate given as
// files (the chart's Secrets). A token written by one verifies on the
// other, both present the same CA, and the given files are only read.
func TestServerReplicasShareKeys(t *testing.T) {
	secrets := t.TempDir()
	gen := t.TempDir()
	if _, err := auth.LoadIssuer(gen); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Load(gen, pki.Options{Hosts: []string{"eim-agent.example.com"}}); err != nil {
		t.Fatal(err)
	}
	// Group-readable, as a Secret mounted for the pod's fsGroup is.
	for from, to := range map[string]string{
		auth.KeyFile: "signing.key", pki.CACertFile: "ca.crt", pki.ServerCertFile: "tls.crt", pki.ServerKeyFile: "tls.key",
	} {
		b, err := os.ReadFile(filepath.Join(gen, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(secrets, to), b, 0o440); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{
		"--signing-key", filepath.Join(secrets, "signing.key"),
		"--tls-cert", filepath.Join(secrets, "tls.crt"), "--tls-key", filepath.Join(secrets, "tls.key"),
		"--tls-ca", filepath.Join(secrets, "ca.crt"),
	}
	aDir, bDir := t.TempDir(), t.TempDir()
	a := startAgentServer(t, aDir, flags...)
	b := startAgentServer(t, bDir, flags...)
	if a.fingerprint != b.fingerprint {
		t.Errorf("CA fingerprints: %s and %s, want one", a.fingerprint, b.fingerprint)
	}
	if _, err := os.Stat(filepath.Join(aDir, auth.KeyFile)); err == nil {
		t.Errorf("the server made a key of its own in its data directory despite --signing-key")
	}

	get := func(api, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, api+"/v1/projects", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tok, err := os.ReadFile(filepath.Join(aDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := get(b.api, strings.TrimSpace(string(tok))); got != http.StatusOK {
		t.Errorf("replica A's admin token on replica B: got %d, want 200", got)
	}
	// A token minted from the Secret, as `kubectl exec … eim token create` does.
	var out, errOut syncBuffer
	if err := Main(context.Background(), []string{"token", "create", "--admin", "--data-dir", t.TempDir(),
		"--signing-key", filepath.Join(secrets, "signing.key")}, &out, &errOut); err != nil {
		t.Fatalf("token create --signing-key: %v; %s", err, errOut.String())
	}
	if got := get(a.api, strings.TrimSpace(out.String())); got != http.StatusOK {
		t.Errorf("token minted with --signing-key: got %d, want 200", got)
	}
	entries, _ := os.ReadDir(secrets)
	if len(entries) != 4 {
		t.Errorf("the Secret's directory holds %d entries, want the 4 given files", len(entries))
	}
}

// A --signing-key that cannot be used stops the start, naming the file.
func TestServerSigningKeyFlag(t *testing.T) {
	dir := t.TempDir()
	if _, err := auth.LoadIssuer(dir); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, "open.key")
	b, _ := os.ReadFile(filepath.Join(dir, auth.KeyFile))
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"missing": filepath.Join(dir, "absent.key"), "readable by others": open} {
		t.Run(name, func(t *testing.T) {
			var out, errOut syncBuffer
			err := Main(context.Background(), []string{"server", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
				"--agent-addr", "127.0.0.1:0", "--signing-key", path}, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s", err, path)
			}
		})
	}
}
