package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A real Kubernetes API server for the connect tunnel's end-to-end test:
// kube-apiserver as deploy/helm/check.sh builds it from .ci/kube (cached
// in $EIM_CI_CACHE, default ~/.cache/eim-ci, under the hash of the module
// that pins it), on Debian's etcd, with kubectl in front.

// requireKube: with EIM_REQUIRE_KUBE=1 (CI, after check.sh built the API
// server) a missing tool fails the test instead of skipping it.
const requireKube = "EIM_REQUIRE_KUBE"

// kubeTools finds the API server, etcd and kubectl.
func kubeTools(t *testing.T) (apiserver, etcd, kubectl string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv(requireKube) == "1" {
			t.Fatalf("%s (%s=1)", msg, requireKube)
		}
		t.Skip(msg)
	}
	apiserver, err := cachedAPIServer()
	if err != nil {
		missing("kube-apiserver: %v", err)
	}
	if _, err := os.Stat(apiserver); err != nil {
		missing("kube-apiserver not built: %s is missing (bash deploy/helm/check.sh builds it)", apiserver)
	}
	if etcd, err = exec.LookPath("etcd"); err != nil {
		missing("etcd not installed (apt-get install etcd-server)")
	}
	if kubectl, err = exec.LookPath("kubectl"); err != nil {
		missing("kubectl not installed (apt-get install kubernetes-client)")
	}
	return apiserver, etcd, kubectl
}

// cachedAPIServer is the path check.sh builds the API server at: the
// cache key hashes .ci/kube's go.mod and go.sum and the version flags.
func cachedAPIServer() (string, error) {
	dir := filepath.Join("..", "..", ".ci", "kube")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return "", err
	}
	version := ""
	for _, l := range strings.Split(string(mod), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" && strings.HasPrefix(f[1], "v") {
			version = f[1]
			break
		}
	}
	if version == "" {
		return "", fmt.Errorf("no k8s.io/kubernetes version in %s/go.mod", dir)
	}
	minor := strings.Split(version, ".")[1]
	ldflags := "-X k8s.io/component-base/version.gitVersion=" + version + " -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=" + minor
	h := sha256.New()
	h.Write(mod)
	h.Write(sum)
	h.Write([]byte(ldflags + "\n"))
	cache := os.Getenv("EIM_CI_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "eim-ci")
	}
	return filepath.Join(cache, "kube-apiserver-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// kube is a running API server.
type kube struct {
	url        string // https://127.0.0.1:PORT
	caFile     string // its serving certificate's chain
	adminToken string // system:masters
	agentToken string // the connect agent's identity upstream
	agentUser  string
	kubectl    string
	adminKC    string // kubeconfig of the admin, direct
	dir        string
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startKube starts etcd and the API server (RBAC, static tokens) on
// loopback and waits until it is ready.
func startKube(t *testing.T) *kube {
	t.Helper()
	return startKubeWith(t, kubeSetup{})
}

// kubeSetup adds to startKube's API server: more static tokens (lines of
// its token file: token,user,uid,"group,…"), the authorizers (default
// RBAC) and more flags.
type kubeSetup struct {
	tokens []string
	authz  string
	args   []string
}

func startKubeWith(t *testing.T, setup kubeSetup) *kube {
	t.Helper()
	apiserver, etcd, kubectl := kubeTools(t)
	dir := t.TempDir()
	k := &kube{kubectl: kubectl, dir: dir, adminToken: randomHex(t), agentToken: randomHex(t), agentUser: "eim-connect-agent"}
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	start := func(name string, bin string, args ...string) {
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			logf.Close()
			close(exited)
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				if len(b) > 8000 {
					b = b[len(b)-8000:]
				}
				t.Logf("%s log (tail):\n%s", name, b)
			}
		})
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	start("etcd", etcd, "--data-dir", filepath.Join(dir, "etcd"), "--name", "eim",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "eim="+peerURL)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	saKey := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	saPub := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	tokenLines := fmt.Sprintf("%s,eim-test-admin,eim-test-admin,system:masters\n%s,%s,%s\n", k.adminToken, k.agentToken, k.agentUser, k.agentUser)
	for _, l := range setup.tokens {
		tokenLines += l + "\n"
	}
	tokens := write("tokens.csv", []byte(tokenLines))
	certDir := filepath.Join(dir, "certs")
	start("kube-apiserver", apiserver, append([]string{"--etcd-servers=" + etcdURL,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens, "--authorization-mode=" + cmp.Or(setup.authz, "RBAC"),
		fmt.Sprintf("--secure-port=%d", apiPort), "--cert-dir=" + certDir,
		"--advertise-address=127.0.0.1", "--bind-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.96.0.0/24"}, setup.args...)...)
	k.url = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	k.caFile = filepath.Join(certDir, "apiserver.crt")

	// Ready: /readyz answers 200 to the admin (the certificate is made at
	// start; until then the file is missing).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only to wait: the agent verifies
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, k.url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+k.adminToken)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready within 90 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	k.adminKC = write("admin.kubeconfig", []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: direct, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: direct, context: {cluster: direct, user: admin}}]
current-context: direct
`, k.url, k.caFile, k.adminToken)))
	return k
}

// run runs kubectl with a kubeconfig and returns its output.
func (k *kube) run(t *testing.T, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// must runs kubectl, failing the test when it fails.
func (k *kube) must(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, errOut, err := k.run(t, kubeconfig, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// apply applies a manifest as the admin, directly.
func (k *kube) apply(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(k.dir, fmt.Sprintf("manifest-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	k.must(t, k.adminKC, "apply", "-f", f)
}
