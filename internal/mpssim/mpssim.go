// Package mpssim is a Management Presence Server (MPS) of Intel's Open AMT
// Cloud Toolkit (now Device Management Toolkit) for tests: the part of its
// REST API through which EIM, as the original EIM's device manager did,
// powers AMT devices on and off and reads their power state. No MPS runs
// here; this one follows the MPS's published OpenAPI document (swagger.yaml
// of device-management-toolkit/mps) and its documentation of AMT power
// states and actions:
//
//   - POST /api/v1/authorize {username, password}: 200 {token} (a JWT,
//     HS256, that expires), 401 for wrong credentials;
//   - every other call needs "Authorization: Bearer <token>" (401 without);
//   - GET /api/v1/devices/{guid}: the device (guid, hostname,
//     connectionStatus, deviceInfo), 404 for a GUID the MPS does not know;
//   - GET /api/v1/amt/power/state/{guid}: {powerstate, OSPowerSavingState}
//     with CIM power state codes (2 on, 3/4 sleep, 6/8 off, 7 hibernate);
//   - GET /api/v1/amt/power/capabilities/{guid}: the actions by name;
//   - POST /api/v1/amt/power/action/{guid} {action, useSOL}: actions 1–99
//     (2 on, 5 cycle, 8 off, 10 reset; 4 sleep, 7 hibernate, 12 soft off,
//     14 soft reset, which need Intel LMS on the device), answered
//     {Body: {ReturnValue, ReturnValueStr}} ("SUCCESS" is 0);
//   - POST /api/v1/amt/power/bootOptions/{guid}: actions 100 and up (100
//     and 101 to BIOS setup, 202 and 203 IDE-R CD, 400 reset to PXE, 401
//     power on to PXE);
//   - a device that is unknown or not connected (no CIRA connection) is
//     404 {"error": "Device not found/connected. Please connect again using
//     CIRA.", "errorDescription": "guid : <guid>"} on the amt routes.
//
// What the documents do not say is marked as the simulator's choice where
// it is made (the ReturnValue of a transition AMT refuses, the body of a
// 401).
package mpssim

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// CIM power states (CIM_AssociatedPowerManagementService.PowerState) that
// the power state route answers.
const (
	StateOn        = 2
	StateSleep     = 4 // sleep, deep (S3)
	StateOffHard   = 6
	StateHibernate = 7 // S4
	StateOffSoft   = 8 // S5
)

// Power actions (CIM_PowerManagementService.RequestPowerStateChange and
// the MPS's boot options).
const (
	ActionOn            = 2
	ActionSleep         = 4
	ActionCycle         = 5
	ActionHibernate     = 7
	ActionOff           = 8
	ActionReset         = 10
	ActionSoftOff       = 12
	ActionSoftReset     = 14
	ActionOnToBIOS      = 100
	ActionResetToBIOS   = 101
	ActionResetToIDERCD = 202
	ActionOnToIDERCD    = 203
	ActionResetToPXE    = 400
	ActionOnToPXE       = 401
)

// Config describes an MPS.
type Config struct {
	Username, Password string
	Devices            []DeviceConfig
	TokenTTL           time.Duration    // default 24h, as the MPS's default expiration
	Now                func() time.Time // the clock (default time.Now)
}

// DeviceConfig is one AMT device known to the MPS.
type DeviceConfig struct {
	GUID     string
	Hostname string
	On       bool
	// Disconnected: the device has no CIRA connection to the MPS.
	Disconnected bool
	// LMS: Intel LMS runs on the device's OS, so sleep, hibernate and soft
	// actions are possible.
	LMS bool
}

// Action is one power action the MPS received.
type Action struct {
	GUID   string
	Action int
	Result string // "done", "dropped", "refused"
	Boot   string // the boot it started: "pxe", "bios", "ider-cd", "" (normal)
}

// MPS is the simulated server (an http.Handler).
type MPS struct {
	user, password string
	ttl            time.Duration
	now            func() time.Time
	key            []byte

	mu      sync.Mutex
	devices map[string]*device
	drops   int
	actions []Action
}

type device struct {
	cfg   DeviceConfig
	state int
	boots []string
}

// New returns an MPS.
func New(cfg Config) (*MPS, error) {
	if cfg.Username == "" {
		return nil, fmt.Errorf("mpssim: no username")
	}
	m := &MPS{user: cfg.Username, password: cfg.Password, ttl: cfg.TokenTTL, now: cfg.Now, devices: map[string]*device{}}
	if m.ttl == 0 {
		m.ttl = 24 * time.Hour
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.key = make([]byte, 32)
	if _, err := rand.Read(m.key); err != nil {
		return nil, err
	}
	for _, d := range cfg.Devices {
		g := strings.ToLower(d.GUID)
		if g == "" || m.devices[g] != nil {
			return nil, fmt.Errorf("mpssim: device GUID %q empty or twice", d.GUID)
		}
		st := StateOffSoft
		if d.On {
			st = StateOn
		}
		m.devices[g] = &device{cfg: d, state: st}
	}
	return m, nil
}

// DropActions makes the next n accepted actions answer SUCCESS and do
// nothing, as an AMT device busy or asleep may.
func (m *MPS) DropActions(n int) {
	m.mu.Lock()
	m.drops = n
	m.mu.Unlock()
}

// SetConnected connects or disconnects a device's CIRA connection.
func (m *MPS) SetConnected(guid string, connected bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.devices[strings.ToLower(guid)]; d != nil {
		d.cfg.Disconnected = !connected
	}
}

// SetPowerState sets a device's power state behind the MPS's back.
func (m *MPS) SetPowerState(guid string, state int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.devices[strings.ToLower(guid)]; d != nil {
		d.state = state
	}
}

// PowerState returns a device's power state.
func (m *MPS) PowerState(guid string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.devices[strings.ToLower(guid)]; d != nil {
		return d.state
	}
	return 0
}

// Actions returns the power actions received so far, oldest first.
func (m *MPS) Actions() []Action {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.actions)
}

// Boots returns the boots a device made ("pxe", "bios", "ider-cd", "").
func (m *MPS) Boots(guid string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.devices[strings.ToLower(guid)]; d != nil {
		return slices.Clone(d.boots)
	}
	return nil
}

const maxBody = 16 << 10

// ServeHTTP answers the MPS's REST API.
func (m *MPS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	p := strings.TrimSuffix(r.URL.Path, "/")
	if p == "/api/v1/authorize" {
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "Method not allowed"})
			return
		}
		m.authorize(w, r)
		return
	}
	if !strings.HasPrefix(p, "/api/v1/") {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "Not found"})
		return
	}
	if !m.authenticated(r) {
		// The simulator's choice: MPS answers 401; its body is not in the
		// OpenAPI document.
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Unauthorized"})
		return
	}
	seg := strings.Split(strings.TrimPrefix(p, "/api/v1/"), "/")
	switch {
	case len(seg) == 2 && seg[0] == "devices" && r.Method == http.MethodGet:
		m.getDevice(w, seg[1])
	case len(seg) == 4 && seg[0] == "amt" && seg[1] == "power":
		m.power(w, r, seg[2], seg[3])
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "Not found"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (m *MPS) authorize(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Username == "" || in.Password == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []map[string]any{{"msg": "username and password are required"}}})
		return
	}
	if !hmac.Equal([]byte(in.Username), []byte(m.user)) || !hmac.Equal([]byte(in.Password), []byte(m.password)) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Incorrect Username and/or Password!"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": m.token()})
}

var b64 = base64.RawURLEncoding

// token is a JWT (HS256) with the MPS's claims: tenantId, iss, exp.
func (m *MPS) token() string {
	header := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"tenantId": "", "iss": "mpssim", "exp": m.now().Add(m.ttl).Unix()})
	signing := header + "." + b64.EncodeToString(claims)
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(signing))
	return signing + "." + b64.EncodeToString(mac.Sum(nil))
}

func (m *MPS) authenticated(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(parts[0] + "." + parts[1]))
	sig, err := b64.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return false
	}
	raw, err := b64.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(raw, &claims) != nil {
		return false
	}
	return m.now().Unix() < claims.Exp
}

func notConnected(w http.ResponseWriter, guid string) {
	writeJSON(w, http.StatusNotFound, map[string]any{
		"error":            "Device not found/connected. Please connect again using CIRA.",
		"errorDescription": "guid : " + guid,
	})
}

func (m *MPS) getDevice(w http.ResponseWriter, guid string) {
	m.mu.Lock()
	d := m.devices[strings.ToLower(guid)]
	var v map[string]any
	if d != nil {
		v = map[string]any{
			"guid": d.cfg.GUID, "hostname": d.cfg.Hostname, "tags": []string{}, "mpsInstance": "mpssim",
			"connectionStatus": !d.cfg.Disconnected, "mpsusername": "admin", "tenantId": "", "friendlyName": "", "dnsSuffix": "",
			"deviceInfo": map[string]any{"fwVersion": "16.1", "fwBuild": "1111", "fwSku": "16392", "currentMode": "0", "features": "AMT Pro Corporate", "ipAddress": ""},
		}
	}
	m.mu.Unlock()
	if d == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "Device not found", "errorDescription": "guid : " + guid})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// power serves the power routes of one device.
func (m *MPS) power(w http.ResponseWriter, r *http.Request, route, guid string) {
	m.mu.Lock()
	d := m.devices[strings.ToLower(guid)]
	if d == nil || d.cfg.Disconnected {
		m.mu.Unlock()
		notConnected(w, guid)
		return
	}
	switch {
	case route == "state" && r.Method == http.MethodGet:
		st := d.state
		m.mu.Unlock()
		os := 0 // UNKNOWN, as devices without LMS report
		if d.cfg.LMS {
			os = 2 // FULL_POWER
		}
		writeJSON(w, http.StatusOK, map[string]any{"powerstate": st, "OSPowerSavingState": os})
	case route == "capabilities" && r.Method == http.MethodGet:
		caps := map[string]int{
			"Power up": ActionOn, "Power cycle": ActionCycle, "Power down": ActionOff, "Reset": ActionReset,
			"Power up to BIOS": ActionOnToBIOS, "Reset to BIOS": ActionResetToBIOS,
			"Reset to IDE-R CDROM": ActionResetToIDERCD, "Power on to IDE-R CDROM": ActionOnToIDERCD,
			"Reset to PXE": ActionResetToPXE, "Power on to PXE": ActionOnToPXE,
		}
		if d.cfg.LMS {
			caps["Soft-off"], caps["Soft-reset"], caps["Sleep"], caps["Hibernate"] = ActionSoftOff, ActionSoftReset, ActionSleep, ActionHibernate
		}
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, caps)
	case (route == "action" || route == "bootOptions") && r.Method == http.MethodPost:
		m.mu.Unlock()
		m.act(w, r, route, d)
	default:
		m.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "Not found"})
	}
}

func (m *MPS) act(w http.ResponseWriter, r *http.Request, route string, d *device) {
	var in struct {
		Action *int  `json:"action"`
		UseSOL *bool `json:"useSOL"`
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&in); err != nil || in.Action == nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []map[string]any{{"msg": "action is required and must be a number", "param": "action", "location": "body"}}})
		return
	}
	a := *in.Action
	boot := route == "bootOptions"
	valid := map[int]bool{ActionOn: true, ActionCycle: true, ActionOff: true, ActionReset: true,
		ActionSleep: true, ActionHibernate: true, ActionSoftOff: true, ActionSoftReset: true}
	if boot {
		valid = map[int]bool{ActionOnToBIOS: true, ActionResetToBIOS: true, ActionResetToIDERCD: true,
			ActionOnToIDERCD: true, ActionResetToPXE: true, ActionOnToPXE: true}
	}
	if !valid[a] {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []map[string]any{{"msg": "Power action type does not exist", "param": "action", "value": a, "location": "body"}}})
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := Action{GUID: d.cfg.GUID, Action: a, Result: "done"}
	defer func() { m.actions = append(m.actions, rec) }()
	on := d.state == StateOn
	needsLMS := a == ActionSleep || a == ActionHibernate || a == ActionSoftOff || a == ActionSoftReset
	// What AMT refuses: an action that needs LMS on a device without it,
	// or one whose documented start state is "powered up" (all but the
	// power-ons and a hard power off, which does nothing to a device that
	// is off) on a device that is not. The simulator's choice: AMT's RequestPowerStateChange return
	// value 2 ("Unknown or Unspecified Error"), as the MPS passes it on.
	startsOn := a != ActionOn && a != ActionOnToBIOS && a != ActionOnToIDERCD && a != ActionOnToPXE
	if (needsLMS && !d.cfg.LMS) || (startsOn && a != ActionOff && !on) {
		rec.Result = "refused"
		writeJSON(w, http.StatusOK, map[string]any{"Body": map[string]any{"ReturnValue": 2, "ReturnValueStr": "NOT_READY"}})
		return
	}
	if m.drops > 0 {
		m.drops--
		rec.Result = "dropped"
	} else {
		switch a {
		case ActionOn, ActionOnToBIOS, ActionOnToIDERCD, ActionOnToPXE:
			if !on {
				d.state = StateOn
				rec.Boot = bootOf(a)
				d.boots = append(d.boots, rec.Boot)
			}
		case ActionOff, ActionSoftOff:
			d.state = StateOffSoft
		case ActionSleep:
			d.state = StateSleep
		case ActionHibernate:
			d.state = StateHibernate
		case ActionCycle, ActionReset, ActionSoftReset, ActionResetToBIOS, ActionResetToIDERCD, ActionResetToPXE:
			rec.Boot = bootOf(a)
			d.boots = append(d.boots, rec.Boot)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"Header": map[string]any{
			"To":          "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous",
			"Action":      "http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_PowerManagementService/RequestPowerStateChangeResponse",
			"ResourceURI": "http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_PowerManagementService",
		},
		"Body": map[string]any{"ReturnValue": 0, "ReturnValueStr": "SUCCESS"},
	})
}

func bootOf(a int) string {
	switch a {
	case ActionOnToPXE, ActionResetToPXE:
		return "pxe"
	case ActionOnToBIOS, ActionResetToBIOS:
		return "bios"
	case ActionOnToIDERCD, ActionResetToIDERCD:
		return "ider-cd"
	}
	return ""
}
