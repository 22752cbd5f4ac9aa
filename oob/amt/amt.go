// Package amt drives Intel AMT devices the way the original EIM reaches
// them: through the REST API of a Management Presence Server (MPS, of
// Intel's Open AMT Cloud Toolkit, now the Device Management Toolkit), to
// which each device keeps a CIRA connection. It logs in
// (POST /api/v1/authorize, a JWT sent as a bearer token and renewed once
// when the MPS refuses it), reads a device's power state
// (GET /api/v1/amt/power/state/{guid}: CIM power state codes) and sends
// power actions (POST /api/v1/amt/power/action/{guid} for 1–99,
// /api/v1/amt/power/bootOptions/{guid} for 100 and up: to PXE, to BIOS
// setup, to an IDE-R CD). It speaks the MPS's numbers; oob's adapter
// (oob/amtdriver.go) maps them to the protocol-neutral oob.Conn.
//
// Failures are *Error values of a Kind; a device the MPS does not know or
// that has no CIRA connection is Unreachable (the original's device
// manager retries it too). Messages never include the password or the
// token.
package amt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eimhq/eim/oob/bmchttp"
)

// DefaultTimeout bounds each request when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// CIM power states (CIM_AssociatedPowerManagementService.PowerState), as
// the power state route reports them.
const (
	StateOn                 = 2
	StateSleepLight         = 3
	StateSleepDeep          = 4
	StatePowerCycleOffSoft  = 5
	StateOffHard            = 6
	StateHibernate          = 7 // off, soft (S4)
	StateOffSoft            = 8 // S5
	StatePowerCycleOffHard  = 9
	StateOffSoftGraceful    = 12
	StateOffHardGraceful    = 13
	StatePowerCycleSoftGrac = 15
	StatePowerCycleHardGrac = 16
)

// Power actions.
const (
	ActionOn            = 2
	ActionSleep         = 4 // needs Intel LMS on the device
	ActionCycle         = 5
	ActionHibernate     = 7 // needs LMS
	ActionOff           = 8 // hard
	ActionReset         = 10
	ActionSoftOff       = 12 // needs LMS
	ActionSoftReset     = 14 // needs LMS
	ActionOnToBIOS      = 100
	ActionResetToBIOS   = 101
	ActionResetToIDERCD = 202
	ActionOnToIDERCD    = 203
	ActionResetToPXE    = 400
	ActionOnToPXE       = 401
)

// Config addresses one AMT device through its MPS.
type Config struct {
	// URL is the MPS's base URL (https://mps.example.com:3000), under which
	// /api/v1/… are; behind the toolkit's Kong gateway, its /mps route
	// (https://example.com/mps), whose login is under /mps/login.
	URL string
	// GUID is the device's AMT GUID (the host's UUID).
	GUID               string
	Username, Password string // the MPS's account
	CABundle           []byte // PEM; empty: the system's roots
	Insecure           bool
	Timeout            time.Duration // each request (0: DefaultTimeout)
}

// Client is a logged-in connection to an MPS for one device. A Client is
// used by one goroutine at a time.
type Client struct {
	cfg        Config
	base, root string // base: where /api/v1 is; root: scheme://host, for messages
	login      string
	hc         *http.Client
	token      string
}

// Dial logs in to the MPS and checks that it knows the device.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Username == "" {
		return nil, errors.New("amt: the MPS username is empty")
	}
	if cfg.GUID == "" {
		return nil, errors.New("amt: the device GUID is empty")
	}
	if strings.ContainsAny(cfg.GUID, "/?#% ") {
		return nil, fmt.Errorf("amt: device GUID %q is not a GUID", cfg.GUID)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	raw := strings.TrimSpace(cfg.URL)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("amt: MPS URL %q: want https://host[:port][/path]", cfg.URL)
	}
	c := &Client{cfg: cfg, root: u.Scheme + "://" + u.Host}
	c.base = c.root + strings.TrimSuffix(u.Path, "/")
	c.login = c.base + "/api/v1/authorize"
	if strings.HasSuffix(c.base, "/mps") {
		c.login = c.base + "/login/api/v1/authorize"
	}
	if c.hc, err = bmchttp.Client(bmchttp.Options{CABundle: cfg.CABundle, Insecure: cfg.Insecure, Timeout: cfg.Timeout}); err != nil {
		return nil, fmt.Errorf("amt: %w", err)
	}
	if err := c.authorize(ctx); err != nil {
		c.hc.CloseIdleConnections()
		return nil, err
	}
	if _, err := c.Device(ctx); err != nil {
		c.hc.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

// Close forgets the token (a JWT has no logout) and closes idle
// connections.
func (c *Client) Close() error {
	c.token = ""
	c.hc.CloseIdleConnections()
	return nil
}

func (c *Client) authorize(ctx context.Context) error {
	const op = "log in"
	body, _ := json.Marshal(map[string]string{"username": c.cfg.Username, "password": c.cfg.Password})
	status, data, err := c.send(ctx, http.MethodPost, c.login, body, false)
	if err != nil {
		return c.classify(ctx, op, err)
	}
	if status != http.StatusOK {
		return c.answerError(op, status, data)
	}
	tok, err := parseToken(data)
	if err != nil {
		return &Error{Kind: Failed, Op: op, URL: c.root, Status: status, Detail: err.Error()}
	}
	c.token = tok
	return nil
}

// send makes one request and reads at most 1 MiB of the answer.
func (c *Client) send(ctx context.Context, method, u string, body []byte, auth bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, data, nil
}

// call makes an authenticated call, logging in again once when the MPS
// refuses the token (it expired).
func (c *Client) call(ctx context.Context, op, method, path string, in any) ([]byte, error) {
	var body []byte
	if in != nil {
		body, _ = json.Marshal(in)
	}
	for attempt := 0; ; attempt++ {
		status, data, err := c.send(ctx, method, c.base+path, body, true)
		if err != nil {
			return nil, c.classify(ctx, op, err)
		}
		if status == http.StatusUnauthorized && attempt == 0 {
			if err := c.authorize(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if status != http.StatusOK {
			return nil, c.answerError(op, status, data)
		}
		return data, nil
	}
}

// Device is what the MPS knows of the device (GET /api/v1/devices/{guid}).
type Device struct {
	GUID             string `json:"guid"`
	Hostname         string `json:"hostname"`
	ConnectionStatus bool   `json:"connectionStatus"`
	DeviceInfo       struct {
		FWVersion   string `json:"fwVersion"`
		FWSku       string `json:"fwSku"`
		CurrentMode string `json:"currentMode"`
		Features    string `json:"features"`
	} `json:"deviceInfo"`
}

// Device reads the device's record at the MPS. A GUID the MPS does not
// know is Failed (not retryable: the target is wrong).
func (c *Client) Device(ctx context.Context) (Device, error) {
	const op = "read device"
	data, err := c.call(ctx, op, http.MethodGet, "/api/v1/devices/"+url.PathEscape(c.cfg.GUID), nil)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			e.Kind, e.Detail = Failed, fmt.Sprintf("the MPS has no device %s", c.cfg.GUID)
		}
		return Device{}, err
	}
	var d Device
	if err := json.Unmarshal(data, &d); err != nil {
		return Device{}, &Error{Kind: Failed, Op: op, URL: c.root, Detail: "unexpected answer: " + err.Error()}
	}
	return d, nil
}

// PowerState reads the device's CIM power state.
func (c *Client) PowerState(ctx context.Context) (int, error) {
	const op = "read power state"
	data, err := c.call(ctx, op, http.MethodGet, "/api/v1/amt/power/state/"+url.PathEscape(c.cfg.GUID), nil)
	if err != nil {
		return 0, err
	}
	st, err := parsePowerState(data)
	if err != nil {
		return 0, &Error{Kind: Failed, Op: op, URL: c.root, Detail: err.Error()}
	}
	return st, nil
}

// PowerAction sends a power action (actions of 100 and up through the
// boot options route). The MPS answers once AMT has accepted it: read
// PowerState to confirm. AMT's refusal (a non-zero ReturnValue) is Failed
// with its text.
func (c *Client) PowerAction(ctx context.Context, action int) error {
	op := fmt.Sprintf("power action %d", action)
	route := "/api/v1/amt/power/action/"
	if action >= 100 {
		route = "/api/v1/amt/power/bootOptions/"
	}
	data, err := c.call(ctx, op, http.MethodPost, route+url.PathEscape(c.cfg.GUID), map[string]any{"action": action, "useSOL": false})
	if err != nil {
		return err
	}
	rv, text, err := parseActionResult(data)
	if err != nil {
		return &Error{Kind: Failed, Op: op, URL: c.root, Detail: err.Error()}
	}
	if rv != 0 {
		return &Error{Kind: Failed, Op: op, URL: c.root, Detail: fmt.Sprintf("AMT refused it: ReturnValue %d %s", rv, text)}
	}
	return nil
}

// Capabilities reads the actions the device allows, by name ("Power up":
// 2, "Reset to PXE": 400…).
func (c *Client) Capabilities(ctx context.Context) (map[string]int, error) {
	const op = "read power capabilities"
	data, err := c.call(ctx, op, http.MethodGet, "/api/v1/amt/power/capabilities/"+url.PathEscape(c.cfg.GUID), nil)
	if err != nil {
		return nil, err
	}
	caps, err := parseCapabilities(data)
	if err != nil {
		return nil, &Error{Kind: Failed, Op: op, URL: c.root, Detail: err.Error()}
	}
	return caps, nil
}
