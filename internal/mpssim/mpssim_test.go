package mpssim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/mpssim"
)

const guid = "4c4c4544-005a-3510-8047-b4c04f564433"

type env struct {
	sim *mpssim.MPS
	srv *httptest.Server
	tok string
}

func start(t *testing.T, cfg mpssim.Config) *env {
	t.Helper()
	if cfg.Username == "" {
		cfg.Username, cfg.Password = "standalone", "G00d-pa55"
	}
	if cfg.Devices == nil {
		cfg.Devices = []mpssim.DeviceConfig{{GUID: guid, Hostname: "edge-1"}}
	}
	sim, err := mpssim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	e := &env{sim: sim, srv: srv}
	st, body := e.do(t, "POST", "/api/v1/authorize", `{"username":"standalone","password":"G00d-pa55"}`)
	if st != 200 || body["token"] == nil {
		t.Fatalf("authorize: %d %v", st, body)
	}
	e.tok = body["token"].(string)
	return e
}

func (e *env) do(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if e.tok != "" {
		req.Header.Set("Authorization", "Bearer "+e.tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(raw, &v)
	return resp.StatusCode, v
}

func returnValue(body map[string]any) any {
	b, _ := body["Body"].(map[string]any)
	return b["ReturnValue"]
}

func TestAuth(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := start(t, mpssim.Config{Now: clock, TokenTTL: time.Hour})
	if st, _ := e.do(t, "GET", "/api/v1/amt/power/state/"+guid, ""); st != 200 {
		t.Fatalf("with the token: %d", st)
	}
	tok := e.tok
	for _, bad := range []string{"", "x.y.z", tok[:len(tok)-2] + "AA"} {
		e.tok = bad
		if st, _ := e.do(t, "GET", "/api/v1/amt/power/state/"+guid, ""); st != 401 {
			t.Errorf("token %q: got %d, want 401", bad, st)
		}
	}
	e.tok = tok
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if st, _ := e.do(t, "GET", "/api/v1/amt/power/state/"+guid, ""); st != 401 {
		t.Errorf("expired token: got %d, want 401", st)
	}
	e.tok = ""
	if st, body := e.do(t, "POST", "/api/v1/authorize", `{"username":"standalone","password":"nope"}`); st != 401 || body["message"] != "Incorrect Username and/or Password!" {
		t.Errorf("wrong password: %d %v", st, body)
	}
	if st, _ := e.do(t, "POST", "/api/v1/authorize", `{`); st != 400 {
		t.Errorf("malformed login: %d", st)
	}
}

func TestPower(t *testing.T) {
	e := start(t, mpssim.Config{Devices: []mpssim.DeviceConfig{{GUID: guid}, {GUID: "off-line", Disconnected: true}}})
	state := func() any {
		_, b := e.do(t, "GET", "/api/v1/amt/power/state/"+guid, "")
		return b["powerstate"]
	}
	if s := state(); s != float64(8) {
		t.Fatalf("initial state: %v, want 8", s)
	}
	// Reset of a device that is off: refused by AMT.
	if st, b := e.do(t, "POST", "/api/v1/amt/power/action/"+guid, `{"action":10,"useSOL":false}`); st != 200 || returnValue(b) != float64(2) {
		t.Errorf("reset when off: %d %v", st, b)
	}
	// Boot options only on their own route, and the reverse.
	if st, _ := e.do(t, "POST", "/api/v1/amt/power/action/"+guid, `{"action":401,"useSOL":false}`); st != 400 {
		t.Errorf("401 on the action route: %d, want 400", st)
	}
	if st, _ := e.do(t, "POST", "/api/v1/amt/power/bootOptions/"+guid, `{"action":2,"useSOL":false}`); st != 400 {
		t.Errorf("2 on the boot options route: %d, want 400", st)
	}
	if st, b := e.do(t, "POST", "/api/v1/amt/power/bootOptions/"+guid, `{"action":401,"useSOL":false}`); st != 200 || returnValue(b) != float64(0) {
		t.Fatalf("power on to PXE: %d %v", st, b)
	}
	if s := state(); s != float64(2) {
		t.Errorf("after power on: %v", s)
	}
	e.sim.DropActions(1)
	e.do(t, "POST", "/api/v1/amt/power/action/"+guid, `{"action":8,"useSOL":false}`)
	if s := state(); s != float64(2) {
		t.Errorf("after a dropped off: %v, want 2", s)
	}
	e.do(t, "POST", "/api/v1/amt/power/action/"+guid, `{"action":8,"useSOL":false}`)
	if s := state(); s != float64(8) {
		t.Errorf("after off: %v, want 8", s)
	}
	var results []string
	for _, a := range e.sim.Actions() {
		results = append(results, a.Result)
	}
	if got := strings.Join(results, ","); got != "refused,done,dropped,done" {
		t.Errorf("results: %s", got)
	}
	if b := e.sim.Boots(guid); len(b) != 1 || b[0] != "pxe" {
		t.Errorf("boots: %v", b)
	}
	// Unknown and disconnected devices.
	for _, g := range []string{"nope", "off-line"} {
		st, b := e.do(t, "GET", "/api/v1/amt/power/state/"+g, "")
		if st != 404 || b["error"] != "Device not found/connected. Please connect again using CIRA." || b["errorDescription"] != "guid : "+g {
			t.Errorf("%s: %d %v", g, st, b)
		}
	}
	if st, b := e.do(t, "GET", "/api/v1/devices/off-line", ""); st != 200 || b["connectionStatus"] != false {
		t.Errorf("a disconnected device's record: %d %v", st, b)
	}
	if st, _ := e.do(t, "GET", "/api/v1/devices/nope", ""); st != 404 {
		t.Errorf("unknown device record: %d", st)
	}
	if st, b := e.do(t, "GET", "/api/v1/amt/power/capabilities/"+guid, ""); st != 200 || b["Reset to PXE"] != float64(400) || b["Sleep"] != nil {
		t.Errorf("capabilities without LMS: %d %v", st, b)
	}
}

// FuzzRequests: request bodies the simulator parses never make it panic
// or answer a server error.
func FuzzRequests(f *testing.F) {
	for _, s := range []string{`{"action":2,"useSOL":false}`, `{"action":401}`, `{"action":"2"}`, `{}`, `[`, `{"username":"a","password":"b"}`} {
		f.Add(s)
	}
	sim, err := mpssim.New(mpssim.Config{Username: "u", Password: "p", Devices: []mpssim.DeviceConfig{{GUID: guid}}})
	if err != nil {
		f.Fatal(err)
	}
	login := httptest.NewRecorder()
	sim.ServeHTTP(login, httptest.NewRequest("POST", "/api/v1/authorize", strings.NewReader(`{"username":"u","password":"p"}`)))
	var tok struct{ Token string }
	_ = json.Unmarshal(login.Body.Bytes(), &tok)
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/api/v1/authorize", "/api/v1/amt/power/action/" + guid, "/api/v1/amt/power/bootOptions/" + guid} {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("POST", path, bytes.NewReader([]byte(body)))
			r.Header.Set("Authorization", "Bearer "+tok.Token)
			sim.ServeHTTP(w, r)
			if w.Code >= 500 || !json.Valid(w.Body.Bytes()) {
				t.Errorf("%s %q: %d %s", path, body, w.Code, w.Body)
			}
		}
	})
}
