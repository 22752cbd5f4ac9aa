package sim_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/agent/sim"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

func actions() []*provisioningv1.Action {
	return []*provisioningv1.Action{
		{Index: 0, Name: "erase-disk", Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{}}},
		{Index: 1, Name: "stream-image", Spec: &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{Url: "http://x/os.img", Sha256: "ab"}}},
		{Index: 2, Name: "write-file", Spec: &provisioningv1.Action_WriteFile{WriteFile: &provisioningv1.WriteFile{Path: "/seed/user-data", Content: []byte("#cloud-config\n")}}},
		{Index: 3, Name: "reboot", Spec: &provisioningv1.Action_Reboot{Reboot: &provisioningv1.Reboot{}}},
	}
}

func TestExecutorHealthy(t *testing.T) {
	e := &sim.Executor{Delay: time.Millisecond}
	for _, a := range actions() {
		var out bytes.Buffer
		if err := e.Run(context.Background(), a, &out); err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if !strings.Contains(out.String(), a.Name+": done") {
			t.Errorf("%s output: got %q", a.Name, out.String())
		}
	}
	if e.Failed() {
		t.Error("healthy executor says it failed")
	}
}

func TestExecutorFail(t *testing.T) {
	e := &sim.Executor{Fail: true}
	acts := actions()
	var out bytes.Buffer
	if err := e.Run(context.Background(), acts[0], &out); err != nil || e.Failed() {
		t.Fatalf("erase-disk: got %v (failed %v), want success", err, e.Failed())
	}
	err := e.Run(context.Background(), acts[1], &out)
	if err == nil || !strings.Contains(err.Error(), "simulated failure of stream-image") || !e.Failed() {
		t.Fatalf("stream-image: got %v (failed %v), want the injected failure", err, e.Failed())
	}
	if !strings.Contains(out.String(), "injected failure") {
		t.Errorf("output: got %q", out.String())
	}
}

func TestExecutorReboot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	e := &sim.Executor{Reboot: true, OnReboot: func() { calls++; cancel() }}
	acts := actions()
	for _, a := range acts[:2] {
		if err := e.Run(context.Background(), a, &bytes.Buffer{}); err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
	}
	if err := e.Run(ctx, acts[2], &bytes.Buffer{}); !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("write-file: got %v after %d reboots, want context.Canceled after 1", err, calls)
	}
	// Once only: after the restart the same action succeeds.
	if err := e.Run(context.Background(), acts[2], &bytes.Buffer{}); err != nil || calls != 1 {
		t.Fatalf("write-file again: got %v after %d reboots, want success", err, calls)
	}
}

func TestExecutorCancelledWhileSleeping(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := &sim.Executor{Delay: time.Hour}
	if err := e.Run(ctx, actions()[0], &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
