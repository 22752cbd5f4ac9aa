package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim/server"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// greeter is a throwaway shared part: two modules use it, it is built once.
type greeter struct{ word string }

// A module of a registry of the test's own: one file's worth, one
// registration, touching nothing else of the server. Its route is served,
// its loop runs, its part is built once for two modules, and Close waits
// for its loop.
func TestProcessRunsARegisteredModule(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var builds atomic.Int32
	greeting := &server.Part[*greeter]{Name: "greeting", Build: func(b *server.Builder) (*greeter, error) {
		builds.Add(1)
		return &greeter{word: "hello"}, nil
	}}
	// A part first asked for once the process is open is refused: what a
	// process runs is known before it serves.
	late := &server.Part[int]{Name: "late", Build: func(*server.Builder) (int, error) { return 1, nil }}
	var loopRan, loopEnded atomic.Bool
	hello := &server.Module{
		Name: "hello", Summary: "says hello",
		Build: func(b *server.Builder) (server.Parts, error) {
			g, err := server.Use(b, greeting)
			if err != nil {
				return server.Parts{}, err
			}
			return server.Parts{
				Routes: []server.Route{{Pattern: "GET /hello", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.WriteString(w, g.word)
				})}, {Pattern: "GET /late", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, err := server.Use(b, late)
					io.WriteString(w, fmt.Sprint(err))
				})}},
				Loops: []server.Loop{{Name: "tick", Run: func(ctx context.Context) error {
					loopRan.Store(true)
					<-ctx.Done()
					loopEnded.Store(true)
					return nil
				}}},
			}, nil
		},
	}
	echo := &server.Module{
		Name: "echo", Summary: "says it again",
		Build: func(b *server.Builder) (server.Parts, error) {
			g, err := server.Use(b, greeting)
			if err != nil {
				return server.Parts{}, err
			}
			return server.Parts{Routes: []server.Route{{Pattern: "GET /echo", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, g.word+" "+g.word)
			})}}}, nil
		},
	}
	reg, err := server.NewRegistry(hello, echo)
	if err != nil {
		t.Fatal(err)
	}
	p, err := server.Open(context.Background(), server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr("agent") != nil || p.Addr("metrics") != nil {
		t.Errorf("listeners without a module that serves nodes or a --metrics-addr: agent %v, metrics %v; want neither", p.Addr("agent"), p.Addr("metrics"))
	}
	base := "http://" + p.Addr("http").String()
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.Background()) }()

	for path, want := range map[string]string{"/hello": "hello", "/echo": "hello hello",
		"/late": "shared part late: first used after the process opened"} {
		if got := get(t, base+path); got != want {
			t.Errorf("GET %s: got %q, want %q", path, got, want)
		}
	}
	waitFor(t, func() bool { return loopRan.Load() })
	var ready struct {
		Status  string            `json:"status"`
		Modules []string          `json:"modules"`
		Loops   map[string]string `json:"loops"`
	}
	if err := json.Unmarshal([]byte(get(t, base+"/readyz")), &ready); err != nil {
		t.Fatal(err)
	}
	if ready.Status != "ready" || strings.Join(ready.Modules, ",") != "hello,echo" || ready.Loops["hello/tick"] != "running" {
		t.Errorf("/readyz: got %+v, want ready, modules hello and echo, hello/tick running", ready)
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("the part used by two modules was built %d times, want once", n)
	}

	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !loopEnded.Load() {
		t.Error("Close returned before the module's loop ended")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: got %v, want nil after Close", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	if err := p.Serve(context.Background()); err == nil {
		t.Error("Serve after Close: got nil, want an error")
	}
	if _, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(base + "/hello"); err == nil {
		t.Error("GET after Close: answered, want the listener closed")
	}
}

// Serve returns when its context ends; a process opened and closed
// without serving releases its port and its database.
func TestProcessLifecycle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	reg, err := server.NewRegistry(&server.Module{Name: "idle", Build: func(*server.Builder) (server.Parts, error) { return server.Parts{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", Registry: reg}
	p, err := server.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := p.Addr("http").String()
	// The SQLite database serves one process.
	if _, err := server.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "in use by another eim server process") {
		t.Errorf("a second Open of the database: got %v, want it in use", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed without serving: the port and the database are free again.
	cfg.HTTPAddr = addr
	p, err = server.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	get(t, "http://"+addr+"/healthz")
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after its context ended: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close after Serve returned: %v", err)
	}
}

// Open refuses what it cannot serve, naming the module, and releases what
// it took (the port stays free, the database unlocked).
func TestOpenErrors(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	parts := func(p server.Parts) func(*server.Builder) (server.Parts, error) {
		return func(*server.Builder) (server.Parts, error) { return p, nil }
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	type cfgFn func(*server.Config)
	for _, c := range []struct {
		name    string
		modules []*server.Module
		cfg     cfgFn
		want    string
	}{
		{"same route twice", []*server.Module{
			{Name: "a", Build: parts(server.Parts{Routes: []server.Route{{Pattern: "/x", Handler: ok}}})},
			{Name: "b", Build: parts(server.Parts{Routes: []server.Route{{Pattern: "/x", Handler: ok}}})},
		}, nil, "module b: /x is mounted by module a already"},
		{"agent route without the agent listener", []*server.Module{
			{Name: "a", Build: parts(server.Parts{Agent: []server.Route{{Pattern: "/x", Handler: ok}}})},
		}, nil, "module a: /x is for the agent listener, which this process does not open"},
		{"two metrics handlers", []*server.Module{
			{Name: "a", Build: parts(server.Parts{Metrics: ok})},
			{Name: "b", Build: parts(server.Parts{Metrics: ok})},
		}, nil, "module b: /metrics is served by module a already"},
		{"part that needs itself", []*server.Module{
			{Name: "a", Build: func(b *server.Builder) (server.Parts, error) {
				var loop *server.Part[int]
				loop = &server.Part[int]{Name: "loop", Build: func(b *server.Builder) (int, error) { return server.Use(b, loop) }}
				_, err := server.Use(b, loop)
				return server.Parts{}, err
			}},
		}, nil, "module a: shared part loop: needs itself"},
		{"port taken", []*server.Module{{Name: "a", Build: parts(server.Parts{})}},
			func(c *server.Config) { c.HTTPAddr = taken.Addr().String() }, "listen on " + taken.Addr().String()},
	} {
		t.Run(c.name, func(t *testing.T) {
			reg, err := server.NewRegistry(c.modules...)
			if err != nil {
				t.Fatal(err)
			}
			cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", Registry: reg}
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			if _, err := server.Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: got %v, want an error with %q", err, c.want)
			}
			// What the failed Open took is released.
			cfg.Registry, _ = server.NewRegistry(&server.Module{Name: "a", Build: parts(server.Parts{})})
			cfg.HTTPAddr = "127.0.0.1:0"
			p, err := server.Open(context.Background(), cfg)
			if err != nil {
				t.Fatalf("Open after a failed Open: %v", err)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The built-in modules, every listener open, on each engine: the process
// opens, gets ready, serves each listener, and Close leaves no goroutine
// behind.
func TestProcessBuiltin(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", AgentAddr: "127.0.0.1:0",
				MetricsAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0", LeaseTTL: 2 * time.Second}
			if engine == "postgres" {
				cfg.Database = storetest.PostgresURL(t)
			}
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			var out strings.Builder
			cfg.Stdout = &out
			p, err := server.Open(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []string{"http", "agent", "metrics", "debug"} {
				if p.Addr(l) == nil {
					t.Fatalf("listener %s not open", l)
				}
			}
			for _, want := range []string{"eim: serving API on http://" + p.Addr("http").String(), "eim: serving agents on https://" + p.Addr("agent").String(),
				"eim: serving metrics on http://" + p.Addr("metrics").String() + "/metrics"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout: %q, want a line %q", out.String(), want)
				}
			}
			served := make(chan error, 1)
			go func() { served <- p.Serve(context.Background()) }()
			waitFor(t, func() bool { return status(t, "http://"+p.Addr("http").String()+"/readyz") == http.StatusOK })
			for url, want := range map[string]int{
				"http://" + p.Addr("metrics").String() + "/metrics":    http.StatusOK,
				"http://" + p.Addr("http").String() + "/metrics":       http.StatusNotFound, // moved to its own listener
				"http://" + p.Addr("debug").String() + "/debug/pprof/": http.StatusOK,
			} {
				if got := status(t, url); got != want {
					t.Errorf("GET %s: %d, want %d", url, got, want)
				}
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

func TestNewRegistry(t *testing.T) {
	build := func(*server.Builder) (server.Parts, error) { return server.Parts{}, nil }
	for _, c := range []struct {
		name    string
		modules []*server.Module
		want    string
	}{
		{"twice", []*server.Module{{Name: "a", Build: build}, {Name: "a", Build: build}}, "module a: registered twice"},
		{"no name", []*server.Module{{Build: build}}, `module "": want a name`},
		{"comma", []*server.Module{{Name: "a,b", Build: build}}, `module "a,b": want a name`},
		{"no build", []*server.Module{{Name: "a"}}, "module a: no Build"},
	} {
		if _, err := server.NewRegistry(c.modules...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	if n := len(server.Builtin().Modules()); n == 0 {
		t.Error("Builtin: no modules")
	}
}

func status(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// waitFor polls cond until it holds, for up to ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
