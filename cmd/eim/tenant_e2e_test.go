package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// The tenant module in a real server process: a new project gets its
// defaults and becomes ready (os and tenant conditions); its deletion is
// a job that survives the server being SIGKILLed mid-cascade and resumes
// after the restart, leaves another project as it was, and frees the name.

func TestTenantKillSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server process")
	}
	testTenantKill(t, startKillServer(t))
}

func TestTenantKillPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server process")
	}
	testTenantKill(t, startKillServer(t, "--database", freshPostgres(t), "--database-max-conns", "4"))
}

// tenantRegions is how many regions the project deleted holds: enough for
// its cascade to take a number of batches.
const tenantRegions = 1200

func testTenantKill(t *testing.T, s *killServer) {
	ctx := t.Context()
	for _, p := range []string{"big", "other"} {
		if _, err := s.admin.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Ready: the OS catalog loaded and the defaults applied.
	waitProject(t, s, "big", "ready", func(p *client.Project) bool { return p.Status != nil && p.Status.Ready })
	p, err := s.admin.GetProject(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Conditions) != 2 || p.Status.Conditions[0].Module != "os" || p.Status.Conditions[1].Module != "tenant" {
		t.Fatalf("conditions: got %+v, want os and tenant", p.Status.Conditions)
	}
	logs, err := s.admin.ListAt(ctx, "big", client.TelemetryLogsGroups, client.ListOptions{PageSize: 100})
	if err != nil || logs.Total != 6 {
		t.Fatalf("default log groups: got %d, %v; want 6", logs.Total, err)
	}

	// Fill big: nodes onboarded and provisioned by the real agent code
	// (credentials issued, instances running), regions, and registered
	// hosts with instances (both deleted in two phases).
	fleet := s.startFleet(t, "big", 3, 7)
	fleet.check(t)
	fill(t, s, "big", tenantRegions)
	var oses struct {
		OperatingSystemResources []eim.OS `json:"OperatingSystemResources"`
	}
	if err := s.admin.Do(ctx, "GET", "/v1/projects/big/compute/os?pageSize=1", nil, &oses); err != nil || len(oses.OperatingSystemResources) == 0 {
		t.Fatalf("an OS of the catalog: %v", err)
	}
	for i := range 5 {
		h, err := s.admin.RegisterHost(ctx, "big", client.HostRegistration{Name: fmt.Sprintf("h%d", i), SerialNumber: fmt.Sprintf("SERBIG%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]any{"name": "i", "hostID": h.ResourceID, "osID": oses.OperatingSystemResources[0].ResourceID}
		if err := s.admin.Create(ctx, "big", eim.KindInstance, in, nil); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, s, "other", 20)
	otherBefore := regionCount(t, s, "other")

	// Delete, and kill the server once the cascade is at the regions.
	d, err := s.admin.DeleteProject(ctx, "big", true)
	if err != nil || d == nil || d.Status == nil || d.Status.Deletion == nil {
		t.Fatalf("DELETE: got %+v, %v; want the deletion started", d, err)
	}
	at := waitProject(t, s, "big", "the cascade at the regions", func(p *client.Project) bool {
		del := p.Status.Deletion
		return del != nil && del.Phase == "regions" && del.Remaining != nil && *del.Remaining > 0
	})
	s.killAndRestart(t)
	after, err := s.admin.GetProject(ctx, "big")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if after.Status.Deletion == nil || after.Status.Deletion.Step < at.Status.Deletion.Step {
		t.Fatalf("after the restart: got deletion %+v, want it resumed at step %d or later", after.Status.Deletion, at.Status.Deletion.Step)
	}
	t.Logf("killed at %s (%d left); resumed at %s", at.Status.Deletion.Phase, *at.Status.Deletion.Remaining, after.Status.Deletion.Phase)
	// The other project is served meanwhile, and is as it was.
	if err := s.admin.Create(ctx, "other", eim.KindRegion, map[string]any{"name": "during"}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := s.admin.GetProject(ctx, "big")
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("big not deleted within 60 s of the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := regionCount(t, s, "other"); n != otherBefore+1 {
		t.Errorf("other project's regions: got %d, want %d", n, otherBefore+1)
	}
	// The name is free: a new project of it is empty but for its defaults.
	if _, err := s.admin.CreateProject(ctx, "big"); err != nil {
		t.Fatalf("create big again: %v", err)
	}
	waitProject(t, s, "big", "ready again", func(p *client.Project) bool { return p.Status != nil && p.Status.Ready })
	if n := regionCount(t, s, "big"); n != 0 {
		t.Errorf("big again: %d regions, want 0", n)
	}
	var hosts struct {
		Hosts []eim.Host `json:"hosts"`
	}
	if err := s.admin.Do(ctx, "GET", "/v1/projects/big/compute/hosts", nil, &hosts); err != nil || len(hosts.Hosts) != 0 {
		t.Errorf("big again: %d hosts, %v; want none", len(hosts.Hosts), err)
	}
}

// fill creates n regions in the project, a few clients at once.
func fill(t *testing.T, s *killServer, project string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if err := s.admin.Create(context.Background(), project, eim.KindRegion, map[string]any{"name": fmt.Sprintf("r%d", i)}, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(func() []error {
		var out []error
		for err := range errs {
			out = append(out, err)
		}
		return out
	}()...); err != nil {
		t.Fatalf("fill %s: %v", project, err)
	}
}

func regionCount(t *testing.T, s *killServer, project string) int {
	t.Helper()
	page, err := s.admin.List(t.Context(), project, eim.KindRegion, client.ListOptions{PageSize: 1})
	if err != nil {
		t.Fatalf("count regions of %s: %v", project, err)
	}
	return page.Total
}

// waitProject polls the project until cond holds (30 s at most) and
// returns it then.
func waitProject(t *testing.T, s *killServer, name, what string, cond func(*client.Project) bool) *client.Project {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *client.Project
	for {
		p, err := s.admin.GetProject(t.Context(), name)
		if err == nil && cond(p) {
			return p
		}
		if err == nil {
			last = p
		}
		if time.Now().After(deadline) {
			st := any(nil)
			if last != nil {
				st = last.Status
			}
			t.Fatalf("project %s: %s: not within 30 s (last status %+v, %v)", name, what, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
