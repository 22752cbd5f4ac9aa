package redfish_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
	"github.com/eimhq/eim/oob/redfish"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const user, password = "admin", "pa55-w0rd"

type bmc struct {
	sim *redfishsim.BMC
	srv *redfishsim.Server
	m   *redfishsim.Memory
}

// serve starts a simulated BMC of one system in memory (or of systems, when
// given) over HTTPS and HTTP on loopback.
func serve(t *testing.T, cfg redfishsim.Config) *bmc {
	t.Helper()
	b := &bmc{}
	if cfg.Username == "" {
		cfg.Username, cfg.Password = user, password
	}
	if len(cfg.Systems) == 0 {
		b.m = redfishsim.NewMemory(redfishsim.MemoryConfig{})
		cfg.Systems = []redfishsim.SystemConfig{{Machine: b.m}}
	}
	sim, err := redfishsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redfishsim.Serve(sim, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	b.sim, b.srv = sim, srv
	return b
}

// config trusts the BMC's certificate as a CA bundle.
func (b *bmc) config() redfish.Config {
	return redfish.Config{URL: b.srv.URL, Username: user, Password: password, CABundle: b.srv.CertPEM,
		Timeout: 5 * time.Second, TaskPoll: 5 * time.Millisecond}
}

func dial(t *testing.T, cfg redfish.Config) *redfish.Client {
	t.Helper()
	c, err := redfish.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestPowerAndBoot(t *testing.T) {
	ctx := context.Background()
	b := serve(t, redfishsim.Config{})
	c := dial(t, b.config())
	if c.SystemID() != "1" {
		t.Errorf("system: got %q, want 1", c.SystemID())
	}
	if b.sim.Sessions() != 1 {
		t.Errorf("sessions after Dial: got %d, want 1", b.sim.Sessions())
	}
	if s, err := c.PowerState(ctx); err != nil || s != redfish.Off {
		t.Fatalf("power state: got %q, %v, want Off", s, err)
	}
	if err := c.Reset(ctx, redfish.ResetOn); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.PowerState(ctx); s != redfish.On {
		t.Fatalf("after On: got %q", s)
	}
	if err := c.SetBoot(ctx, redfish.Boot{Target: "Pxe", Enabled: "Once", Mode: "UEFI"}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Boot(ctx); err != nil || got != (redfish.Boot{Target: "Pxe", Enabled: "Once", Mode: "UEFI"}) {
		t.Fatalf("boot read back: got %+v, %v", got, err)
	}
	if err := c.Reset(ctx, redfish.ForceRestart); err != nil {
		t.Fatal(err)
	}
	boots := b.m.Boots()
	if last := boots[len(boots)-1]; last.Target != "Pxe" || last.Mode != "UEFI" {
		t.Errorf("the restart booted %+v, want Pxe UEFI", last.Boot)
	}
	if got, _ := c.Boot(ctx); got.Enabled != "Disabled" {
		t.Errorf("a one-time override after its boot: got %+v, want Disabled", got)
	}
	// UEFI HTTP boot with its URI.
	if err := c.SetBoot(ctx, redfish.Boot{Target: "UefiHttp", Enabled: "Continuous", Mode: "UEFI", HTTPBootURI: "http://127.0.0.1:8080/boot.ipxe"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Boot(ctx); got.HTTPBootURI != "http://127.0.0.1:8080/boot.ipxe" || got.Enabled != "Continuous" {
		t.Errorf("HTTP boot read back: %+v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := b.sim.Sessions(); n != 0 {
		t.Errorf("sessions after Close: got %d, want 0 (logged out)", n)
	}
}

func TestBasicAuthOverHTTP(t *testing.T) {
	ctx := context.Background()
	b := serve(t, redfishsim.Config{})
	cfg := b.config()
	cfg.URL, cfg.BasicAuth = b.srv.HTTPURL, true
	c := dial(t, cfg)
	if err := c.Reset(ctx, redfish.ResetOn); err != nil {
		t.Fatal(err)
	}
	if n := b.sim.SessionsOpened(); n != 0 {
		t.Errorf("sessions opened with Basic authentication: got %d, want 0", n)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  redfish.Config
		want string
	}{
		{redfish.Config{Username: "u"}, "URL is empty"},
		{redfish.Config{URL: "ftp://h", Username: "u"}, "scheme"},
		{redfish.Config{URL: "https://u:p@h", Username: "u"}, "want scheme://host[:port]"},
		{redfish.Config{URL: "https://h/other", Username: "u"}, "want scheme://host[:port]"},
		{redfish.Config{URL: "h"}, "username is empty"},
		{redfish.Config{URL: "h", Username: "u", CABundle: []byte("junk")}, "no PEM certificate"},
	} {
		_, err := redfish.Dial(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, err error, want error, text string) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
		if !strings.Contains(err.Error(), text) {
			t.Errorf("got %q, want it to say %q", err, text)
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("the message shows the password: %q", err)
		}
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		b := serve(t, redfishsim.Config{})
		cfg := b.config()
		cfg.CABundle = nil
		_, err := redfish.Dial(ctx, cfg)
		check(t, err, redfish.ErrBadCertificate, "certificate")
		cfg.Insecure = true // the explicit choice
		dial(t, cfg)
	})
	t.Run("wrong password", func(t *testing.T) {
		b := serve(t, redfishsim.Config{})
		for _, basic := range []bool{false, true} {
			cfg := b.config()
			cfg.Password, cfg.BasicAuth = "wrong", basic
			_, err := redfish.Dial(ctx, cfg)
			check(t, err, redfish.ErrBadCredentials, "HTTP 401")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		_, err = redfish.Dial(ctx, redfish.Config{URL: addr, Username: user, Password: password, Insecure: true, Timeout: time.Second})
		check(t, err, redfish.ErrUnreachable, "refused")
	})
	t.Run("no answer", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var conns []net.Conn
		var mu sync.Mutex
		wg.Add(1)
		go func() { // accepts, never answers
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		defer func() {
			ln.Close()
			wg.Wait()
			for _, c := range conns {
				c.Close()
			}
		}()
		_, err = redfish.Dial(ctx, redfish.Config{URL: ln.Addr().String(), Username: user, Password: password, Insecure: true, Timeout: 300 * time.Millisecond})
		check(t, err, redfish.ErrUnreachable, "")
	})
	t.Run("session limit", func(t *testing.T) {
		b := serve(t, redfishsim.Config{MaxSessions: 1})
		dial(t, b.config())
		_, err := redfish.Dial(ctx, b.config())
		check(t, err, redfish.ErrBusy, "HTTP 503")
		b2 := serve(t, redfishsim.Config{MaxSessions: 1, SessionLimitStatus: 400}) // iDRAC's answer
		dial(t, b2.config())
		_, err = redfish.Dial(ctx, b2.config())
		check(t, err, redfish.ErrBusy, "HTTP 400")
	})
	t.Run("several systems", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{
			{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})},
			{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})},
		}})
		_, err := redfish.Dial(ctx, b.config())
		check(t, err, redfish.ErrAmbiguous, "2 systems (1, 2)")
		cfg := b.config()
		cfg.SystemID = "9"
		_, err = redfish.Dial(ctx, cfg)
		check(t, err, redfish.ErrAmbiguous, `no system "9"`)
		cfg.SystemID = "2"
		c := dial(t, cfg)
		if got := c.Systems(); len(got) != 2 {
			t.Errorf("systems: got %v", got)
		}
		if b.sim.Sessions() != 1 {
			t.Errorf("sessions: got %d, want 1 (the failed Dials logged out)", b.sim.Sessions())
		}
	})
	t.Run("reset type not allowed", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{
			Machine:    redfishsim.NewMemory(redfishsim.MemoryConfig{}),
			ResetTypes: []redfishsim.ResetType{redfishsim.ResetOn, redfishsim.ForceOff},
		}}})
		c := dial(t, b.config())
		check(t, c.Reset(ctx, redfish.PowerCycle), redfish.ErrUnsupported, "the system allows On, ForceOff")
	})
	t.Run("boot target not allowed", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{
			Machine:     redfishsim.NewMemory(redfishsim.MemoryConfig{}),
			BootTargets: []string{"None", "Pxe", "Hdd"},
		}}})
		c := dial(t, b.config())
		check(t, c.SetBoot(ctx, redfish.Boot{Target: "Cd", Enabled: "Once"}), redfish.ErrUnsupported, "None, Pxe, Hdd")
	})
	t.Run("409 when already off", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Faults: redfishsim.Faults{ConflictInState: true}})
		c := dial(t, b.config())
		check(t, c.Reset(ctx, redfish.GracefulShutdown), redfish.ErrAlreadyInState, "already powered OFF")
	})
}

func TestQuirks(t *testing.T) {
	ctx := context.Background()
	t.Run("dropped power-on", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Faults: redfishsim.Faults{DropPowerOns: 1}})
		c := dial(t, b.config())
		if err := c.Reset(ctx, redfish.ResetOn); err != nil {
			t.Fatal(err)
		}
		if s, _ := c.PowerState(ctx); s != redfish.Off {
			t.Fatalf("after a dropped On: got %q, want Off (the BMC acknowledged and did nothing)", s)
		}
		if err := c.Reset(ctx, redfish.ResetOn); err != nil { // resent, as the job engine does
			t.Fatal(err)
		}
		if s, _ := c.PowerState(ctx); s != redfish.On {
			t.Fatalf("after the resend: got %q, want On", s)
		}
	})
	t.Run("slow transition", func(t *testing.T) {
		now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		m := redfishsim.NewMemory(redfishsim.MemoryConfig{Delay: time.Minute, Now: clock})
		b := serve(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}, Now: clock})
		c := dial(t, b.config())
		if err := c.Reset(ctx, redfish.ResetOn); err != nil {
			t.Fatal(err)
		}
		if s, _ := c.PowerState(ctx); s != redfish.PoweringOn {
			t.Fatalf("during the transition: got %q, want PoweringOn", s)
		}
		mu.Lock()
		now = now.Add(2 * time.Minute)
		mu.Unlock()
		if s, _ := c.PowerState(ctx); s != redfish.On {
			t.Fatalf("after it: got %q, want On", s)
		}
	})
	t.Run("once read back as continuous", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Faults: redfishsim.Faults{OnceAsContinuous: true}})
		c := dial(t, b.config())
		if err := c.SetBoot(ctx, redfish.Boot{Target: "Pxe", Enabled: "Once", Mode: "UEFI"}); err != nil {
			t.Fatalf("a Once read back as Continuous is accepted: %v", err)
		}
		if got, _ := c.Boot(ctx); got.Enabled != "Continuous" {
			t.Errorf("read back: got %+v, want Continuous (what the BMC keeps)", got)
		}
		// Clearing it after use.
		if err := c.SetBoot(ctx, redfish.Boot{Target: "None", Enabled: "Disabled"}); err != nil {
			t.Fatal(err)
		}
		if _, enabled, _, _ := b.sim.BootOverride("1"); enabled != "Disabled" {
			t.Errorf("after clearing: %q", enabled)
		}
	})
	t.Run("no boot mode", func(t *testing.T) {
		b := serve(t, redfishsim.Config{Faults: redfishsim.Faults{NoBootMode: true}})
		c := dial(t, b.config())
		s, err := c.System(ctx)
		if err != nil || s.HasBootMode {
			t.Fatalf("got %+v, %v, want no boot mode", s, err)
		}
		if err := c.SetBoot(ctx, redfish.Boot{Target: "Pxe", Enabled: "Once", Mode: "UEFI"}); err != nil {
			t.Fatalf("the mode is left out for a system without one: %v", err)
		}
		if got, _ := c.Boot(ctx); got != (redfish.Boot{Target: "Pxe", Enabled: "Once"}) {
			t.Errorf("read back: %+v", got)
		}
	})
}

func TestVirtualMedia(t *testing.T) {
	ctx := context.Background()
	b := serve(t, redfishsim.Config{})
	c := dial(t, b.config())
	if ok, err := c.HasVirtualCD(ctx); err != nil || !ok {
		t.Fatalf("virtual CD: got %v, %v", ok, err)
	}
	const img, img2 = "http://127.0.0.1:8080/micro-os.iso", "http://127.0.0.1:8080/other.iso"
	for _, u := range []string{img, img, img2} { // again: nothing; another: eject first
		if err := c.InsertMedia(ctx, u); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.sim.VirtualCD("1"); got != u {
			t.Fatalf("inserted: got %q, want %q", got, u)
		}
	}
	if err := c.EjectMedia(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.sim.VirtualCD("1"); got != "" {
		t.Errorf("after eject: %q", got)
	}
	if err := c.EjectMedia(ctx); err != nil {
		t.Errorf("eject of an empty CD: %v", err)
	}
}

func TestTasks(t *testing.T) {
	ctx := context.Background()
	b := serve(t, redfishsim.Config{Faults: redfishsim.Faults{AsyncTasks: 3}})
	c := dial(t, b.config())
	if err := c.Reset(ctx, redfish.ResetOn); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.PowerState(ctx); s != redfish.On {
		t.Errorf("after the task: got %q, want On", s)
	}
	if err := c.InsertMedia(ctx, "http://127.0.0.1:8080/a.iso"); err != nil {
		t.Fatal(err)
	}

	b.sim.SetFaults(redfishsim.Faults{AsyncTasks: 1, TaskException: true})
	err := c.Reset(ctx, redfish.ForceOff)
	if err == nil || errors.Is(err, redfish.ErrUnsupported) || !strings.Contains(err.Error(), "task ended Exception") || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("a task in Exception: got %v", err)
	}

	b.sim.SetFaults(redfishsim.Faults{AsyncTasks: 1 << 30})
	cfg := b.config()
	cfg.TaskTimeout = 100 * time.Millisecond
	c2 := dial(t, cfg)
	start := time.Now()
	err = c2.Reset(ctx, redfish.ForceOff)
	if err == nil || !strings.Contains(err.Error(), "not done after 100ms") {
		t.Errorf("a task that never ends: got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("gave up after %s", d)
	}
}

func TestCancelled(t *testing.T) {
	b := serve(t, redfishsim.Config{})
	c := dial(t, b.config())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.PowerState(ctx)
	if err == nil || errors.Is(err, redfish.ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want a cancellation that is not Unreachable", err)
	}
}

// TestNoSessionService: a service whose root links no sessions collection
// (older BMCs) is used with Basic authentication.
func TestNoSessionService(t *testing.T) {
	sim, err := redfishsim.New(redfishsim.Config{Username: user, Password: password,
		Systems: []redfishsim.SystemConfig{{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})}}})
	if err != nil {
		t.Fatal(err)
	}
	// The simulator's service root without Links.Sessions.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") != "/redfish/v1" {
			sim.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, r)
		var root map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &root)
		delete(root, "Links")
		delete(root, "SessionService")
		_ = json.NewEncoder(w).Encode(root)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := redfish.Dial(context.Background(), redfish.Config{URL: srv.URL, Username: user, Password: password, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.PowerState(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sim.SessionsOpened(); n != 0 {
		t.Errorf("sessions opened: %d, want 0 (Basic)", n)
	}
	_, err = redfish.Dial(context.Background(), redfish.Config{URL: srv.URL, Username: user, Password: "wrong", Timeout: 5 * time.Second})
	if !errors.Is(err, redfish.ErrBadCredentials) {
		t.Errorf("wrong password with Basic: %v", err)
	}
}
