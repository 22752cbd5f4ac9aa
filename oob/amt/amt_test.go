package amt_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/mpssim"
	"github.com/eimhq/eim/oob/amt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	user, password = "standalone", "G00d-pa55"
	guid           = "4c4c4544-005a-3510-8047-b4c04f564433"
	offline        = "00000000-0000-0000-0000-00000000beef"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// mps serves a simulated MPS over HTTPS on loopback, under prefix.
func mps(t *testing.T, prefix string, clk *clock) (*mpssim.MPS, *httptest.Server, []byte) {
	t.Helper()
	cfg := mpssim.Config{Username: user, Password: password, Devices: []mpssim.DeviceConfig{
		{GUID: guid, Hostname: "edge-1"},
		{GUID: offline, Disconnected: true},
	}}
	if clk != nil {
		cfg.Now, cfg.TokenTTL = clk.now, time.Hour
	}
	sim, err := mpssim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = sim
	if prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(prefix+"/login/", http.StripPrefix(prefix+"/login", sim))
		mux.Handle(prefix+"/", http.StripPrefix(prefix, sim))
		h = mux
	}
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return sim, srv, ca
}

func dial(t *testing.T, cfg amt.Config) *amt.Client {
	t.Helper()
	c, err := amt.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPower(t *testing.T) {
	ctx := context.Background()
	sim, srv, ca := mps(t, "", nil)
	c := dial(t, amt.Config{URL: srv.URL, GUID: guid, Username: user, Password: password, CABundle: ca})
	d, err := c.Device(ctx)
	if err != nil || d.Hostname != "edge-1" || !d.ConnectionStatus || d.DeviceInfo.Features != "AMT Pro Corporate" {
		t.Fatalf("device: got %+v, %v", d, err)
	}
	if s, err := c.PowerState(ctx); err != nil || s != amt.StateOffSoft {
		t.Fatalf("power state: got %d, %v, want 8", s, err)
	}
	if err := c.PowerAction(ctx, amt.ActionOnToPXE); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.PowerState(ctx); s != amt.StateOn {
		t.Errorf("after power on to PXE: got %d, want 2", s)
	}
	if b := sim.Boots(guid); len(b) != 1 || b[0] != "pxe" {
		t.Errorf("boots: %v", b)
	}
	for _, a := range []int{amt.ActionReset, amt.ActionCycle, amt.ActionOff} {
		if err := c.PowerAction(ctx, a); err != nil {
			t.Fatalf("action %d: %v", a, err)
		}
	}
	if s, _ := c.PowerState(ctx); s != amt.StateOffSoft {
		t.Errorf("after off: got %d", s)
	}
	acts := sim.Actions()
	if len(acts) != 4 || acts[0].Action != 401 || acts[3].Action != 8 {
		t.Errorf("actions the MPS received: %+v", acts)
	}
	caps, err := c.Capabilities(ctx)
	if err != nil || caps["Reset to PXE"] != 400 || caps["Power up"] != 2 {
		t.Errorf("capabilities: %v, %v", caps, err)
	}
	// A reset of a device that is off: AMT refuses it.
	err = c.PowerAction(ctx, amt.ActionReset)
	if err == nil || !strings.Contains(err.Error(), "AMT refused it: ReturnValue 2 NOT_READY") {
		t.Errorf("reset when off: got %v", err)
	}
	// Sleep needs LMS, which the device has not.
	if err := c.PowerAction(ctx, amt.ActionOn); err != nil {
		t.Fatal(err)
	}
	if err := c.PowerAction(ctx, amt.ActionSleep); err == nil {
		t.Error("sleep without LMS: no error")
	}
	// An action the MPS does not know.
	err = c.PowerAction(ctx, 3)
	if err == nil || !strings.Contains(err.Error(), "HTTP 400: Power action type does not exist") {
		t.Errorf("action 3: got %v", err)
	}
}

func TestKongPrefixAndTokenRenewal(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	_, srv, ca := mps(t, "/mps", clk)
	c := dial(t, amt.Config{URL: srv.URL + "/mps", GUID: guid, Username: user, Password: password, CABundle: ca})
	if _, err := c.PowerState(ctx); err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Hour) // the token has expired: logged in again
	if _, err := c.PowerState(ctx); err != nil {
		t.Fatalf("after the token expired: %v", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	sim, srv, ca := mps(t, "", nil)
	good := amt.Config{URL: srv.URL, GUID: guid, Username: user, Password: password, CABundle: ca, Timeout: 2 * time.Second}
	check := func(t *testing.T, err, want error, text string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
		if !strings.Contains(err.Error(), text) || strings.Contains(err.Error(), password) {
			t.Errorf("message %q: want it to say %q, never the password", err, text)
		}
	}
	t.Run("wrong password", func(t *testing.T) {
		cfg := good
		cfg.Password = "nope"
		_, err := amt.Dial(ctx, cfg)
		check(t, err, amt.ErrBadCredentials, "Incorrect Username and/or Password")
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		cfg := good
		cfg.CABundle = nil
		_, err := amt.Dial(ctx, cfg)
		check(t, err, amt.ErrBadCertificate, "certificate")
		cfg.Insecure = true
		dial(t, cfg)
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cfg := good
		cfg.URL = "https://" + addr
		_, err = amt.Dial(ctx, cfg)
		check(t, err, amt.ErrUnreachable, "refused")
	})
	t.Run("unknown device", func(t *testing.T) {
		cfg := good
		cfg.GUID = "11111111-2222-3333-4444-555555555555"
		_, err := amt.Dial(ctx, cfg)
		if err == nil || errors.Is(err, amt.ErrUnreachable) || !strings.Contains(err.Error(), "the MPS has no device 11111111-") {
			t.Errorf("got %v, want a failure naming the device", err)
		}
	})
	t.Run("device not connected", func(t *testing.T) {
		cfg := good
		cfg.GUID = offline
		c := dial(t, cfg)
		_, err := c.PowerState(ctx)
		check(t, err, amt.ErrUnreachable, "Device not found/connected")
		sim.SetConnected(offline, true)
		if _, err := c.PowerState(ctx); err != nil {
			t.Errorf("once connected: %v", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for _, cfg := range []amt.Config{
			{URL: srv.URL, Username: user},
			{URL: srv.URL, GUID: "a/../b", Username: user},
			{URL: "ftp://x", GUID: guid, Username: user},
			{URL: srv.URL, GUID: guid},
		} {
			if _, err := amt.Dial(ctx, cfg); err == nil {
				t.Errorf("%+v: no error", cfg)
			}
		}
	})
}
