package main

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
)

// Edge workloads at fleet scale, simulated: the real server (Main, every
// module) and 200 simulated devices (Day 0 through the real agent code,
// then the hold, where each one follows its workloads as the agent does:
// GetWorkloads when the heartbeat's version moves, simulated pods, status
// reported when it changed). A workload selecting the devices by a label
// (the OS their instance runs) becomes Running on all of them, as the API's
// status and devices say; its revision 2, which crashes on a quarter of the
// devices (the simulator's per-revision share), shows those as degraded,
// their first container exited with code 3 and restarted, the others
// running revision 2.
func TestSimulatedWorkloadsSQLite(t *testing.T) {
	testSimulatedWorkloads(t, startDay0(t, "--heartbeat-interval", "1s", "--workloads-status-grace", "1s"))
}

func TestSimulatedWorkloadsPostgres(t *testing.T) {
	testSimulatedWorkloads(t, startDay0(t, "--heartbeat-interval", "1s", "--workloads-status-grace", "1s", "--database", freshPostgres(t)))
}

func testSimulatedWorkloads(t *testing.T, s *day0Server) {
	const devices = 200
	ctx := context.Background()
	project := eim.DefaultProject
	osID := s.createOS(t, project)
	ids := sim.Generate(devices, 27)
	hostIDs := register(t, s, project, osID, ids)

	faults := sim.WorkloadFaults{ByRevision: map[int64]float64{2: 0.25}}
	o := sim.Options{URL: s.agentURL, CA: s.ca(t), Identities: ids, Seed: 27, ActionTime: 5 * time.Millisecond,
		Backoff: agent.Backoff{Min: 200 * time.Millisecond, Max: 2 * time.Second}, Connections: 2,
		Hold: sim.HoldUntilCancelled, Workers: 256,
		WorkloadStart: 500 * time.Millisecond, WorkloadRestart: 300 * time.Millisecond, WorkloadFaults: faults}
	fctx, stop := context.WithTimeout(ctx, 4*time.Minute)
	defer stop()
	done := make(chan *sim.Report, 1)
	go func() {
		rep, err := sim.Run(fctx, o)
		if err != nil {
			t.Errorf("simulator: %v", err)
		}
		done <- rep
	}()

	const name = "camera"
	workload := func(fps string) *client.EdgeWorkloadInput {
		return &client.EdgeWorkloadInput{Name: name, Spec: eim.EdgeWorkloadSpec{
			DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"eim.io/os": "tiny-os"}},
			Pod: eim.PodTemplate{Spec: eim.PodSpec{RestartPolicy: "Always", Containers: []eim.Container{
				{Name: "reader", Image: "registry.example:5000/cam:1.0", Args: []string{"--fps", fps}},
				{Name: "shipper", Image: "registry.example:5000/ship:1.0"}}}},
		}}
	}
	began := time.Now()
	if _, err := s.admin.CreateEdgeWorkload(ctx, project, workload("10")); err != nil {
		t.Fatal(err)
	}
	status := func() (*eim.EdgeWorkloadStatusView, []eim.EdgeWorkloadDeviceView) {
		st, devs, err := s.admin.EdgeWorkloadStatus(ctx, project, name)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		return st, devs
	}
	waitLong(t, "revision 1 Running on every device", func() bool {
		st, _ := status()
		return st.Devices.Total == devices && st.Devices.Running == devices
	})
	t.Logf("revision 1 Running on %d devices %v after its creation", devices, time.Since(began).Round(time.Millisecond))
	st, devs := status()
	if len(st.ByRevision) != 1 || st.ByRevision[0].Revision != 1 || st.ByRevision[0].Running != devices || len(devs) != devices {
		t.Fatalf("status of revision 1: %+v, %d devices", st, len(devs))
	}
	want := map[string]bool{}
	for _, id := range hostIDs {
		want[id] = true
	}
	for _, d := range devs {
		if !want[d.HostID] || d.Phase != "Running" || d.Revision != 1 || len(d.Containers) != 2 || d.Containers[0].Name != "reader" || d.Containers[1].State != "running" {
			t.Fatalf("device %+v", d)
		}
	}

	// Revision 2 crashes on a quarter of the devices.
	if w, err := s.admin.ReplaceEdgeWorkload(ctx, project, workload("30")); err != nil || w.Revision != 2 {
		t.Fatalf("replace: %+v, %v", w, err)
	}
	crashing := 0
	for _, id := range hostIDs {
		if faults.Crashes(o.Seed, id, name, 2) {
			crashing++
		}
	}
	if crashing < devices/10 || crashing > devices/2 {
		t.Fatalf("%d of %d devices crash revision 2 with a share of 0.25", crashing, devices)
	}
	waitLong(t, "revision 2 settled on every device", func() bool {
		st, devs := status()
		if st.Devices.Running != devices-crashing || st.Devices.Degraded != crashing {
			return false
		}
		for _, d := range devs {
			if d.Phase == "Degraded" && d.Containers[0].Restarts < 1 {
				return false
			}
		}
		return true
	})
	st, devs = status()
	if st.Revision != 2 || len(st.ByRevision) != 1 || st.ByRevision[0].Revision != 2 || st.ByRevision[0].Degraded != crashing {
		t.Fatalf("status of revision 2: %+v", st)
	}
	for _, d := range devs {
		crash := faults.Crashes(o.Seed, d.HostID, name, 2)
		switch {
		case crash && d.Summary == "degraded" && d.Phase == "Degraded":
			if c := d.Containers[0]; c.State != "exited" || c.ExitCode != sim.SimulatedExitCode || c.Restarts < 1 || d.Containers[1].State != "running" {
				t.Errorf("crashed device %s: containers %+v", d.HostID, d.Containers)
			}
		case !crash && d.Summary == "running" && d.Revision == 2:
		default:
			t.Errorf("device %s (crash %v): %s %s at revision %d", d.HostID, crash, d.Summary, d.Phase, d.Revision)
		}
	}

	// The statuses are lost (a restore of the status table from an
	// older copy, done here in SQL): the devices that run steadily send
	// nothing by themselves, so the server must ask. After the grace its
	// targets loop marks them, heartbeats ask once, and every device's
	// full report brings the statuses back.
	lose(t, s, "DELETE FROM edge_workload_status", "UPDATE edge_devices SET status_version = 0")
	waitLong(t, "every status back after the server asked", func() bool {
		st, _ := status()
		return st.Devices.Running == devices-crashing && st.Devices.Degraded == crashing && st.Devices.Unknown == 0
	})

	stop()
	rep := <-done
	if rep == nil || rep.Hold == nil || rep.Hold.Workloads == nil {
		t.Fatalf("report without workloads: %+v", rep)
	}
	wl := rep.Hold.Workloads
	t.Logf("simulator: %d nodes, %d reports, ReportStatus p99 %.1f ms, GetWorkloads p99 %.1f ms", wl.Nodes, wl.Reports, wl.Status.P99, wl.Get.P99)
	if wl.Nodes != devices || wl.Get.Count < 2*devices || wl.Get.Errors != 0 || wl.Crashing != crashing {
		t.Fatalf("simulator's workloads: %+v", wl)
	}
}

// waitLong is waitFor with room for a fleet's work on a loaded machine.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// lose runs statements on the server's database behind its back.
func lose(t *testing.T, s *day0Server, stmts ...string) {
	t.Helper()
	driver, dsn := "sqlite", "file:"+filepath.Join(s.dataDir, "eim.db")+"?_pragma=busy_timeout(10000)"
	for i, a := range s.extra {
		if a == "--database" && i+1 < len(s.extra) {
			driver, dsn = "pgx", s.extra[i+1]
		}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
