package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/pki"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
)

var agentLineRE = regexp.MustCompile(`eim: serving agents on (https://\S+) \(CA fingerprint sha256:([0-9a-f]{64})\)`)

type agentServer struct {
	api, agent, fingerprint string
	stop                    func()
}

// startAgentServer runs "eim server" with both listeners on free ports and
// waits for both lines announcing them.
func startAgentServer(t *testing.T, dataDir string, extra ...string) agentServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		args := []string{"server", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0", "--log-level", "warn"}
		done <- Main(ctx, append(args, extra...), &out, &errOut)
	}()
	var s agentServer
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server exited with %v; stderr:\n%s", err, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("server did not stop within 30 s after cancel")
			}
		})
	}
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		api := servingRE.FindStringSubmatch(out.String())
		ag := agentLineRE.FindStringSubmatch(out.String())
		if api != nil && ag != nil {
			s.api, s.agent, s.fingerprint = api[1], ag[1], ag[2]
			return s
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("server exited before serving: %v; stderr:\n%s", err, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not print its addresses within 30 s; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
}

// TestServerAgentListener: the agent listener speaks HTTPS with a
// certificate of the CA in <data-dir>/ca.crt whose fingerprint is printed;
// it serves the token endpoint, Discover without a token and the node
// services only with one; the API listener serves the boot script naming
// the agent URL and the fingerprint. A restart keeps the CA.
func TestServerAgentListener(t *testing.T) {
	dataDir := t.TempDir()
	s := startAgentServer(t, dataDir)

	pemBytes, err := os.ReadFile(filepath.Join(dataDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(pemBytes)
	if blk == nil {
		t.Fatal("ca.crt: no PEM block")
	}
	sum := sha256.Sum256(blk.Bytes)
	if got := hex.EncodeToString(sum[:]); got != s.fingerprint {
		t.Errorf("printed fingerprint %s, ca.crt has %s", s.fingerprint, got)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// Token endpoint: an unknown client is refused the OAuth2 way.
	resp, err := hc.PostForm(s.agent+"/oauth2/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"edgenode-host-12345678"}, "client_secret": {"x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var oerr struct{ Error string }
	json.NewDecoder(resp.Body).Decode(&oerr)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || oerr.Error != "invalid_client" || resp.ProtoMajor != 2 {
		t.Errorf("token for an unknown client: %s %d %q, want HTTP/2 401 invalid_client", resp.Proto, resp.StatusCode, oerr.Error)
	}

	// Discover needs no token: an unknown device gets the onboarding
	// module's answer, not unauthenticated.
	ob := onboardingv1connect.NewOnboardingServiceClient(hc, s.agent)
	_, err = ob.Discover(context.Background(), connect.NewRequest(&onboardingv1.DiscoverRequest{
		Uuid: "6f1c3b4e-2a5d-4c8e-9b7a-1d2e3f4a5b6c", Serial: "ABC12345",
	}))
	if code := connect.CodeOf(err); code != connect.CodeNotFound {
		t.Errorf("Discover of an unknown device: %v, want not_found", err)
	}
	// The node services need a token.
	hs := hostv1connect.NewHostServiceClient(hc, s.agent)
	if _, err := hs.ReportIn(context.Background(), connect.NewRequest(&hostv1.ReportInRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("ReportIn without a token: %v, want unauthenticated", err)
	}

	// A client that does not trust the CA is refused.
	plain := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	if _, err := plain.Get(s.agent + "/oauth2/token"); err == nil {
		t.Error("client with the system roots: got a response, want a certificate error")
	} else {
		var uerr x509.UnknownAuthorityError
		if !errors.As(err, &uerr) {
			t.Logf("certificate error: %v", err)
		}
	}

	// The boot script, on the plain-HTTP API listener.
	resp, err = http.Get(s.api + "/boot/boot.ipxe")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(script), "eim.url="+s.agent+" ") ||
		!strings.Contains(string(script), "eim.ca=sha256:"+s.fingerprint) {
		t.Errorf("boot script (%d) does not name the agent URL %s and the fingerprint:\n%s", resp.StatusCode, s.agent, script)
	}

	// Restart on the same data dir: the same CA.
	s.stop()
	s2 := startAgentServer(t, dataDir)
	if s2.fingerprint != s.fingerprint {
		t.Errorf("fingerprint after restart %s, want %s", s2.fingerprint, s.fingerprint)
	}
}

func TestServerAgentFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"cert without key", []string{"--tls-cert", "x.crt"}},
		{"key without cert", []string{"--tls-key", "x.key"}},
		{"ca without cert", []string{"--tls-ca", "ca.crt"}},
		{"http agent url", []string{"--agent-url", "http://eim.example.com"}},
		{"agent url with query", []string{"--agent-url", "https://eim.example.com/?a=b"}},
		{"unknown action in a timeout", []string{"--action-timeout", "stream-imag=3h"}},
		{"action timeout too short", []string{"--action-timeout", "erase-disk=5s"}},
		{"action timeout without a duration", []string{"--action-timeout", "erase-disk"}},
		{"connect peer url without a scheme", []string{"--connect-peer-url", "10.0.0.1:8080"}},
		{"connect peer url with a path", []string{"--connect-peer-url", "http://10.0.0.1:8080/api"}},
		{"connect ping interval zero", []string{"--connect-ping-interval", "0s"}},
		{"connect token ttl too short", []string{"--connect-token-ttl", "10s"}},
		{"rollout tick too short", []string{"--workloads-rollout-tick", "10ms"}},
		{"rollout tick too long", []string{"--workloads-rollout-tick", "1h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut syncBuffer
			args := append([]string{"server", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0"}, tc.args...)
			err := Main(context.Background(), args, &out, &errOut)
			var u *usageError
			if !errors.As(err, &u) {
				t.Errorf("got %v, want a usage error", err)
			}
		})
	}
}

// The chart's peer URL on an IPv6 pod network gets its address bracketed;
// every other URL is left to the flag's check.
func TestBracketIPv6(t *testing.T) {
	for in, want := range map[string]string{
		"http://fd00::1:8080":      "http://[fd00::1]:8080",
		"http://fd00::1:8080/":     "http://[fd00::1]:8080",
		"http://[fd00::1]:8080":    "http://[fd00::1]:8080",
		"http://10.0.0.1:8080":     "http://10.0.0.1:8080",
		"http://eim-0.eim:8080":    "http://eim-0.eim:8080",
		"10.0.0.1:8080":            "10.0.0.1:8080",
		"http://::ffff:1.2.3.4:80": "http://::ffff:1.2.3.4:80",
	} {
		if got := bracketIPv6(in); got != want {
			t.Errorf("bracketIPv6(%q) = %q, want %q", in, got, want)
		}
	}
}
