package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var httpLineRE = regexp.MustCompile(`eim: serving (?:API|HTTP) on (http://\S+)`)

// moduleServer is an "eim server" of some modules.
type moduleServer struct {
	http, agent string // agent "" when the process has no agent listener
	out, errOut *syncBuffer
	stop        func()
}

// startModules runs "eim server" with the flags given and waits for its
// HTTP line (and agent line, when wantAgent).
func startModules(t *testing.T, dataDir string, wantAgent bool, flags ...string) moduleServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := moduleServer{out: &syncBuffer{}, errOut: &syncBuffer{}}
	done := make(chan error, 1)
	go func() {
		args := []string{"server", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0", "--log-level", "info", "--rate-limit", "0"}
		done <- Main(ctx, append(args, flags...), s.out, s.errOut)
	}()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server exited with %v; stderr:\n%s", err, s.errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("server did not stop within 30 s after cancel")
			}
		})
	}
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := httpLineRE.FindStringSubmatch(s.out.String())
		a := agentLineRE.FindStringSubmatch(s.out.String())
		if h != nil && (a != nil || !wantAgent) {
			s.http = h[1]
			if a != nil {
				s.agent = a[1]
			}
			return s
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("server exited before serving: %v; stderr:\n%s", err, s.errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not print its addresses within 30 s; stdout:\n%s\nstderr:\n%s", s.out.String(), s.errOut.String())
		}
	}
}

// getJSON does a request and decodes a JSON answer.
func getJSON(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, obj
}

// TestServerProfile: a process of the provisioning profile runs its
// modules (and opens the agent listener), answers the writes of modules it
// does not run with 501 naming them, says what it runs in GET
// /v1/orchestrator and /readyz, and reports the needs nothing meets.
func TestServerProfile(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "provisioning")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	api := s.http + "/v1/projects/default"

	code, body := getJSON(t, "POST", api+"/schedules/single", tok, `{"name":"w","scheduleStatus":"SCHEDULE_STATUS_MAINTENANCE","startSeconds":2000000000}`)
	if code != 501 || body["code"] != "Unimplemented" || !strings.Contains(body["message"].(string), `module "maintenance"`) {
		t.Errorf("POST a schedule without the maintenance module: %d %v", code, body)
	}
	if code, body := getJSON(t, "GET", api+"/schedules/single", tok, ""); code != 200 {
		t.Errorf("GET schedules: %d %v", code, body)
	}
	if code, body := getJSON(t, "POST", api+"/regions", tok, `{"name":"r"}`); code != 200 {
		t.Errorf("POST a region: %d %v", code, body)
	}
	_, info := getJSON(t, "GET", s.http+"/v1/orchestrator", tok, "")
	eimf := info["orchestrator"].(map[string]any)["features"].(map[string]any)["edge-infrastructure-manager"].(map[string]any)
	installed := func(name string) bool { return eimf[name].(map[string]any)["installed"] == true }
	if !installed("onboarding") || !installed("provisioning") || installed("day2") {
		t.Errorf("feature list: %v", eimf)
	}
	waitReady(t, s.http, []string{"api", "onboarding", "provisioning", "os", "tenant", "ui"})
	if errs := s.errOut.String(); strings.Contains(errs, "runs nowhere") {
		t.Errorf("needs reported missing in the provisioning profile:\n%s", errs)
	}
}

// TestServerModulesApart: a process without the api module serves health
// and its agent side, and says that the API is elsewhere; its modules'
// needs that nothing meets are reported at start, in words.
func TestServerModulesApart(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--modules", "maintenance")
	code, body := getJSON(t, "GET", s.http+"/v1/projects/default/regions", "", "")
	if code != 404 || !strings.Contains(body["message"].(string), "not the api module") {
		t.Errorf("the API of a process without it: %d %v", code, body)
	}
	waitReady(t, s.http, []string{"maintenance"})
	if errs := s.errOut.String(); !strings.Contains(errs, "module maintenance needs module host (nodes learn of plan changes in heartbeat answers), which runs nowhere in this deployment") {
		t.Errorf("missing need not reported; stderr:\n%s", errs)
	}
	// The node side: the token endpoint answers (a bad request, here).
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // only the answer's status matters here
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(s.agent+"/oauth2/token", "application/x-www-form-urlencoded", bytes.NewBufferString("grant_type=client_credentials"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 && resp.StatusCode != 401 {
		t.Errorf("token endpoint: %d", resp.StatusCode)
	}

	// A process with only the API opens no agent listener.
	a := startModules(t, t.TempDir(), false, "--modules", "api")
	if strings.Contains(a.out.String(), "serving agents") {
		t.Errorf("an API-only process opened the agent listener:\n%s", a.out.String())
	}
	waitReady(t, a.http, []string{"api"})
}

// waitReady waits for /readyz to answer 200 naming the modules.
func waitReady(t *testing.T, base string, modules []string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := getJSON(t, "GET", base+"/readyz", "", "")
		if code == 200 {
			got, _ := json.Marshal(body["modules"])
			want, _ := json.Marshal(modules)
			if string(got) != string(want) {
				t.Errorf("/readyz modules: got %s, want %s", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %v after 20 s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServerSQLiteOneProcess: a second server on the same SQLite database
// is refused, saying why; once the first is gone it starts.
func TestServerSQLiteOneProcess(t *testing.T) {
	dataDir := t.TempDir()
	first := startModules(t, dataDir, false, "--modules", "api")
	var out, errOut bytes.Buffer
	err := Main(context.Background(), []string{"server", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--modules", "api"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "in use by another eim server process") || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("a second server on one SQLite database: got %v", err)
	}
	first.stop()
	startModules(t, dataDir, false, "--modules", "api")
}

// TestServerDeploymentPostgres: processes on one PostgreSQL see each
// other's modules: the API answers a module's writes 501 until a process
// running it is up, and again after it stopped (its membership gone); two
// processes of a run-once loop run it one at a time, the other standing by
// and taking it over when the first stops.
func TestServerDeploymentPostgres(t *testing.T) {
	dsn := freshPostgres(t)
	dataDir := t.TempDir()
	api := startModules(t, dataDir, false, "--database", dsn, "--modules", "api", "--lease-ttl", "2s")
	tok := strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dataDir, adminTokenFile)))))
	osURL := api.http + "/v1/projects/default/compute/os"
	osBody := func(n int) string {
		return fmt.Sprintf(`{"name":"u%d","profileName":"u%d","imageUrl":"https://example.com/u.img","sha256":"%064x"}`, n, n, n)
	}
	if code, body := getJSON(t, "POST", osURL, tok, osBody(1)); code != 501 {
		t.Fatalf("POST an OS profile with no os module anywhere: %d %v", code, body)
	}
	os1 := startModules(t, dataDir, false, "--database", dsn, "--modules", "os", "--lease-ttl", "2s")
	os2 := startModules(t, dataDir, false, "--database", dsn, "--modules", "os", "--lease-ttl", "2s")
	waitStatus(t, "POST an OS profile once an os process runs", 20*time.Second, func() int {
		code, _ := getJSON(t, "POST", osURL, tok, osBody(2))
		return code
	}, 200)

	// One catalog loop runs; the other process stands by, ready.
	states := func() (string, string) {
		_, b1 := getJSON(t, "GET", os1.http+"/readyz", "", "")
		_, b2 := getJSON(t, "GET", os2.http+"/readyz", "", "")
		return b1["loops"].(map[string]any)["os/catalog"].(string), b2["loops"].(map[string]any)["os/catalog"].(string)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s1, s2 := states()
		if (s1 == "running") != (s2 == "running") && s1 != "failed" && s2 != "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("os/catalog: %s and %s; want one running, one standby", s1, s2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitReady(t, os1.http, []string{"os"})
	waitReady(t, os2.http, []string{"os"})
	// The holder stops; the other takes the loop over (the lease is
	// released at a clean stop).
	holder, other := os1, os2
	if s1, _ := states(); s1 != "running" {
		holder, other = os2, os1
	}
	holder.stop()
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, b := getJSON(t, "GET", other.http+"/readyz", "", "")
		if b["loops"].(map[string]any)["os/catalog"] == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("os/catalog not taken over: %v", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	other.stop()
	// No os process left: the API says so again once their membership is
	// gone (a clean stop removes it at once).
	waitStatus(t, "POST an OS profile after every os process stopped", 20*time.Second, func() int {
		code, _ := getJSON(t, "POST", osURL, tok, osBody(3))
		return code
	}, 501)
}

// waitStatus polls do until it returns want.
func waitStatus(t *testing.T, what string, d time.Duration, do func() int, want int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := do()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %d, want %d within %s", what, got, want, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
