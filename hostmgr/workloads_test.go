package hostmgr_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/workloads"
)

// TestHeartbeatWorkloadsVersion: a heartbeat's answer carries the
// device's edge workloads version from the workloads module (its cache,
// fed by the change feed): none before a workload selects the device, a
// version after, a newer one when its set changes.
func TestHeartbeatWorkloadsVersion(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		raw := make([]byte, 32)
		rand.Read(raw)
		key, _ := seal.New(raw)
		wl, err := workloads.New(workloads.Options{Store: e.store, FeedStore: e.store, Inventory: e.inv, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		go func() { defer close(done); wl.Versions().Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		o := e.opts
		o.Workloads = wl
		svc := hostmgr.New(o)
		h := e.host(func(h *eim.Host) { h.Metadata = eim.Metadata{{Key: "line", Value: "1"}} })
		if v := e.beat(svc, h, nil).WorkloadsVersion; v != "" {
			t.Fatalf("before any workload: version %q, want none", v)
		}
		spec := eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}},
			Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "app:1"}}}}}
		if err := e.store.CreateEdgeWorkload(e.ctx, &eim.EdgeWorkload{Project: e.proj, Name: "app", Spec: spec}); err != nil {
			t.Fatal(err)
		}
		if err := wl.ReconcileProject(e.ctx, e.proj); err != nil {
			t.Fatal(err)
		}
		v1 := waitVersion(t, func() string { return e.beat(svc, h, nil).WorkloadsVersion }, "")
		spec.Pod.Spec.Containers[0].Image = "app:2"
		if _, err := e.store.ReviseEdgeWorkload(e.ctx, e.proj, "app", 1, spec); err != nil {
			t.Fatal(err)
		}
		if err := wl.ReconcileProject(e.ctx, e.proj); err != nil {
			t.Fatal(err)
		}
		waitVersion(t, func() string { return e.beat(svc, h, nil).WorkloadsVersion }, v1)
	})
}

// waitVersion polls until the version is set and not old.
func waitVersion(t *testing.T, get func() string, old string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v := get(); v != "" && v != old {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat's workloads version stayed %q", old)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
