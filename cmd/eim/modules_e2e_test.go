package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
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
	waitReady(t, s.http, []string{"api", "onboarding", "provisioning", "os"})
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
