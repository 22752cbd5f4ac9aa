package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSelect(t *testing.T) {
	all := moduleNames(Modules())
	for _, c := range []struct {
		modules, profile string
		want             []string
		err              string
	}{
		{"", "", all, ""},
		{"", "full", all, ""},
		{"os, api", "", []string{"api", "os"}, ""}, // registry order, spaces allowed
		{"", "provisioning", []string{"api", "onboarding", "provisioning", "os", "tenant", "ui"}, ""},
		{"", "observability", []string{"api", "host", "telemetry", "exporter", "webhooks"}, ""},
		{"", "day2", []string{"api", "host", "maintenance", "telemetry", "os"}, ""},
		{"", "oob", []string{"api", "host", "oob"}, ""},
		{"api,hosts", "", nil, `no module "hosts" (modules: api, onboarding`},
		{",", "", nil, "name at least one module"},
		{"", "edge", nil, `no profile "edge" (profiles: full, provisioning`},
		{"api", "oob", nil, "give one of them"},
	} {
		got, err := Select(c.modules, c.profile)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Select(%q, %q): got error %v, want one with %q", c.modules, c.profile, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(moduleNames(got), c.want) {
			t.Errorf("Select(%q, %q) = %v, %v; want %v", c.modules, c.profile, moduleNames(got), err, c.want)
		}
	}
}

// Every profile names modules that exist, and every module is in a profile
// besides full.
func TestProfiles(t *testing.T) {
	for _, p := range Profiles {
		for _, m := range p.Modules {
			if Lookup(m) == nil {
				t.Errorf("profile %s: no module %s", p.Name, m)
			}
		}
	}
	for _, m := range Modules() {
		if len(ProfilesOf(m.Name)) < 2 {
			t.Errorf("module %s is in no profile but full", m.Name)
		}
		for _, n := range m.Needs {
			if Lookup(n.Module) == nil || n.Why == "" {
				t.Errorf("module %s needs %q: no such module, or no reason given", m.Name, n.Module)
			}
		}
	}
}

func TestMissing(t *testing.T) {
	sel, _ := Select("onboarding,maintenance", "")
	got := Missing(sel, []string{"onboarding", "maintenance", "api"})
	if len(got) != 2 || !strings.Contains(got[0], "module onboarding needs module provisioning (onboarded nodes ask it for their workflow)") ||
		!strings.Contains(got[1], "module maintenance needs module host") {
		t.Errorf("Missing: got %q", got)
	}
	if got := Missing(sel, []string{"onboarding", "maintenance", "provisioning", "host"}); len(got) != 0 {
		t.Errorf("Missing with every need met: got %q", got)
	}
}

// A loop that fails, panics or stops by itself runs again; its state says
// so meanwhile; a run-once loop stands by while another holds its lease.
func TestLoopRestarts(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs atomic.Int32
	release := make(chan struct{})
	l := &runningLoop{module: "m", Loop: Loop{Name: "l", Run: func(ctx context.Context) error {
		switch runs.Add(1) {
		case 1:
			return errors.New("boom")
		case 2:
			panic("bang")
		case 3:
			return nil // stopped by itself
		}
		<-release
		<-ctx.Done()
		return nil
	}}}
	done := make(chan struct{})
	go func() { l.run(ctx, alone, log); close(done) }()
	waitFor(t, 3*loopRestart+5*time.Second, func() bool { return runs.Load() == 4 })
	if l.State() != loopRunning || !l.ready() {
		t.Errorf("after three failures the fourth run: state %s", l.State())
	}
	close(release)
	cancel()
	<-done

	// A run-once loop whose lease another process holds stands by, and is
	// ready meanwhile.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	granted := make(chan struct{})
	other := func(ctx context.Context, name string, fn func(context.Context) error) error {
		if name != "loop/m/once" {
			t.Errorf("lease name %q", name)
		}
		select {
		case <-granted:
			return fn(ctx)
		case <-ctx.Done():
			return nil
		}
	}
	var ran atomic.Bool
	o := &runningLoop{module: "m", Loop: Loop{Name: "once", Once: true, Run: func(ctx context.Context) error {
		ran.Store(true)
		<-ctx.Done()
		return nil
	}, Ready: func() bool { return false }}}
	go o.run(ctx2, other, log)
	waitFor(t, 5*time.Second, func() bool { return o.State() == loopStandby })
	if !o.ready() || ran.Load() {
		t.Errorf("standing by: ready %v, ran %v", o.ready(), ran.Load())
	}
	close(granted)
	waitFor(t, 5*time.Second, func() bool { return ran.Load() })
	if o.State() != loopRunning || o.ready() {
		t.Errorf("holding the lease with Ready false: state %s, ready %v", o.State(), o.ready())
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
