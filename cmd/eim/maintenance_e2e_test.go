package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// OS updates end to end: the real server (Main) and the real node agent
// over HTTPS. Nothing happens outside a window; a window opening on the
// host's region lets the update through (the original honoured host
// targets only); the instance's update status and an OS update run record
// it. Package updates run the apt updater, image updates the A/B updater
// with a reboot between them. The programs the updaters run (apt-get,
// update-grub, grub-editenv) are a TEST DOUBLE that records them (see
// e2eCommands); the image is really downloaded, checked and written to a
// slot file.
func TestMaintenanceSQLite(t *testing.T) {
	testMaintenance(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s"))
}

func TestMaintenancePostgres(t *testing.T) {
	testMaintenance(t, startDay0(t, "--heartbeat-interval", "1s", "--heartbeat-timeout", "3s", "--database", freshPostgres(t)))
}

// e2eCommands is a TEST DOUBLE of the updaters' programs: it records each
// command line and succeeds.
type e2eCommands struct {
	mu   sync.Mutex
	cmds []string
}

func (c *e2eCommands) run(_ context.Context, name string, args ...string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, strings.TrimSpace(name+" "+strings.Join(args, " ")))
	return nil, nil
}

func (c *e2eCommands) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.cmds, "\n")
}

func testMaintenance(t *testing.T, s *day0Server) {
	ctx := t.Context()
	p := eim.DefaultProject
	create := func(k eim.Kind, body map[string]any) map[string]any {
		t.Helper()
		var out map[string]any
		if err := s.admin.Create(ctx, p, k, body, &out); err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
		return out
	}
	region := create(eim.KindRegion, map[string]any{"name": "eu"})
	site := create(eim.KindSite, map[string]any{"name": "plant", "regionId": region["resourceId"]})

	// A package-based node.
	mutableOS := s.createOS(t, p)
	id := sim.Generate(1, 21)[0]
	hostID := register(t, s, p, mutableOS, []sim.Identity{id})[0]
	if err := s.admin.Patch(ctx, p, eim.KindHost, hostID, map[string]any{"siteId": site["resourceId"]}, nil); err != nil {
		t.Fatal(err)
	}
	hc := s.agentClient(t)
	cfg := s.provision(t, hc, id)
	instanceOf := func(host string) map[string]any {
		var h map[string]any
		if err := s.admin.Get(ctx, p, eim.KindHost, host, &h); err != nil {
			t.Fatal(err)
		}
		in, _ := h["instance"].(map[string]any)
		if in == nil {
			t.Fatalf("host %s has no instance", host)
		}
		return in
	}
	inst := instanceOf(hostID)["resourceId"].(string)
	pol := create(eim.KindOSUpdatePolicy, map[string]any{"name": "security", "updatePolicy": "UPDATE_POLICY_TARGET",
		"updatePackages": "openssl\ncurl", "updateSources": []string{"Types: deb\nURIs: http://deb.example/debian\nSuites: stable\nComponents: main"}})
	if err := s.admin.Patch(ctx, p, eim.KindInstance, inst, map[string]any{"osUpdatePolicyID": pol["resourceId"]}, nil); err != nil {
		t.Fatal(err)
	}

	cmds := &e2eCommands{}
	acts := &e2eActions{}
	runNode := func(cfg agent.NodeConfig, stateDir, bootID string, u *agent.Updaters) (stop func()) {
		nctx, cancel := context.WithCancel(ctx)
		n := &agent.Node{Client: hc, Config: cfg, Actions: acts, StateDir: stateDir, BootID: bootID, Updaters: u,
			MaintenanceCheck: 200 * time.Millisecond, Backoff: agent.Backoff{Min: 100 * time.Millisecond, Max: time.Second}}
		done := make(chan error, 1)
		go func() { done <- n.Run(nctx) }()
		return func() { cancel(); <-done }
	}
	stop := runNode(cfg, t.TempDir(), "boot-1", &agent.Updaters{Mutable: &agent.Apt{Run: cmds.run, Root: t.TempDir()}})
	defer func() { stop() }()

	// No window: the node learns its plan and waits.
	waitFor(t, "the host Running", func() bool {
		var h map[string]any
		s.admin.Get(ctx, p, eim.KindHost, hostID, &h)
		return h["hostStatus"] == "Running"
	})
	time.Sleep(2 * time.Second) // heartbeats, plan fetched, several checks
	if got := cmds.all(); got != "" {
		t.Fatalf("updated outside a window: %s", got)
	}
	if st := instanceOf(hostID)["updateStatus"]; st == "Update completed" || st == "Updating" {
		t.Fatalf("update status %v before any window", st)
	}

	// A window opens on the region.
	create(eim.KindSingleSchedule, map[string]any{"name": "now", "scheduleStatus": "SCHEDULE_STATUS_OS_UPDATE",
		"startSeconds": time.Now().Add(-time.Minute).Unix(), "endSeconds": time.Now().Add(time.Hour).Unix(), "targetRegionId": region["resourceId"]})
	waitFor(t, "the package update completed", func() bool { return instanceOf(hostID)["updateStatus"] == "Update completed" })
	if got := cmds.all(); !strings.Contains(got, "apt-get update") || !strings.Contains(got, "install -- openssl curl") {
		t.Fatalf("commands: %s", got)
	}
	run := onlyRun(t, s, inst)
	if run["status"] != "Update completed" || run["statusIndicator"] != "STATUS_INDICATION_IDLE" || run["endTime"] == float64(0) || run["startTime"] == float64(0) {
		t.Fatalf("run %v", run)
	}
	if !strings.Contains(run["statusDetails"].(string), "apt-get") {
		t.Fatalf("run log %q lacks the commands' output", run["statusDetails"])
	}
	// Applied: the next checks apply nothing again, and the status stays
	// "Update completed" until the plan changes.
	n := len(cmds.all())
	time.Sleep(time.Second)
	if len(cmds.all()) != n {
		t.Fatalf("applied again: %s", cmds.all())
	}
	if st := instanceOf(hostID)["updateStatus"]; st != "Update completed" {
		t.Fatalf("update status %v a second after the update, want it to stay Update completed", st)
	}
	stop()

	// An image-based node: v1 installed, v2 in the catalog, policy LATEST.
	img := []byte(strings.Repeat("edge os v2\n", 4096))
	if err := os.WriteFile(filepath.Join(s.bootDir, "os-v2.img"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(img)
	v1 := create(eim.KindOS, map[string]any{"name": "emt-1", "profileName": "emt-e2e", "imageId": "1.0", "osType": "OS_TYPE_IMMUTABLE",
		"imageUrl": s.api + "/boot/artifacts/os.img", "sha256": strings.Repeat("0", 64)})["resourceId"].(string)
	v2 := create(eim.KindOS, map[string]any{"name": "emt-2", "profileName": "emt-e2e", "imageId": "2.0", "osType": "OS_TYPE_IMMUTABLE",
		"imageUrl": s.api + "/boot/artifacts/os-v2.img", "sha256": hex.EncodeToString(sum[:])})["resourceId"].(string)
	id2 := sim.Generate(1, 22)[0]
	host2 := register(t, s, p, v1, []sim.Identity{id2})[0]
	if err := s.admin.Patch(ctx, p, eim.KindHost, host2, map[string]any{"siteId": site["resourceId"]}, nil); err != nil {
		t.Fatal(err)
	}
	cfg2 := s.provision(t, hc, id2)
	inst2 := instanceOf(host2)["resourceId"].(string)
	latest := create(eim.KindOSUpdatePolicy, map[string]any{"name": "latest", "updatePolicy": "UPDATE_POLICY_LATEST"})
	if err := s.admin.Patch(ctx, p, eim.KindInstance, inst2, map[string]any{"osUpdatePolicyID": latest["resourceId"]}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	slots := agent.ABSlots{Slots: map[string]string{"a": filepath.Join(dir, "root-a"), "b": filepath.Join(dir, "root-b")},
		Entries: map[string]string{"a": "eim-a", "b": "eim-b"}, GrubEnv: filepath.Join(dir, "grubenv")}
	for _, f := range slots.Slots {
		os.WriteFile(f, nil, 0o600)
	}
	state := t.TempDir()
	reboots := acts.count()
	stop = runNode(cfg2, state, "boot-1", &agent.Updaters{Immutable: &agent.ABImage{Layout: slots, Cmdline: "eim.slot=a", Run: cmds.run}})
	waitFor(t, "the image written and a reboot asked for", func() bool { return acts.count() > reboots })
	if got, _ := os.ReadFile(slots.Slots["b"]); string(got) != string(img) {
		t.Fatal("slot b does not hold the new image")
	}
	if st := instanceOf(host2)["updateStatusIndicator"]; st != "STATUS_INDICATION_IN_PROGRESS" {
		t.Fatalf("update status indicator %v while rebooting", st)
	}
	// The reboot: the agent is down for longer than the heartbeat timeout,
	// and the host is not "No Connection" — it is updating.
	stop()
	time.Sleep(5 * time.Second)
	var h2 map[string]any
	s.admin.Get(ctx, p, eim.KindHost, host2, &h2)
	if h2["hostStatus"] == "No Connection" {
		t.Fatal("an updating node was flagged No Connection during its reboot")
	}
	stop = runNode(cfg2, state, "boot-2", &agent.Updaters{Immutable: &agent.ABImage{Layout: slots, Cmdline: "eim.slot=b", Run: cmds.run}})
	waitFor(t, "the instance on the new OS", func() bool {
		in := instanceOf(host2)
		os, _ := in["os"].(map[string]any)
		return os != nil && os["resourceId"] == v2
	})
	if !strings.Contains(cmds.all(), "set saved_entry=eim-b") {
		t.Fatalf("slot b not committed: %s", cmds.all())
	}
	run2 := onlyRun(t, s, inst2)
	if run2["status"] != "Update completed" || run2["endTime"] == float64(0) || !strings.Contains(run2["statusDetails"].(string), "slot b") {
		t.Fatalf("image run %v", run2)
	}
}

// onlyRun returns the one OS update run of an instance.
func onlyRun(t *testing.T, s *day0Server, inst string) map[string]any {
	t.Helper()
	page, err := s.admin.List(t.Context(), eim.DefaultProject, eim.KindOSUpdateRun, client.ListOptions{Filter: `instance.resourceId="` + inst + `"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("%d runs of %s, want one", len(page.Items), inst)
	}
	var run map[string]any
	if err := json.Unmarshal(page.Items[0], &run); err != nil {
		t.Fatal(err)
	}
	return run
}
