package storetest

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testEdgeDeviceStatusWanted checks the state behind the heartbeats'
// workloads_status_wanted: a device whose version moved long enough ago
// without a stored report naming it is marked once (one event for its
// project), as is one marked by hand; a report clears the mark (an event
// only then); an ordinary report writes no event; a host that is gone is
// skipped; the mark is the project's alone.
func testEdgeDeviceStatusWanted(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	h1 := create(t, s, p1, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	other := create(t, s, p2, &eim.Host{Name: "o"}).(*eim.Host).ResourceID
	spec := eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}},
		Pod: eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: "reg/cam:1"}}}}}
	for _, p := range []string{p1, p2} {
		if err := s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p, Name: "cam", Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetEdgeWorkloadTargets(ctx(t), p1, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h1, Revision: 1}, {Workload: "cam", HostID: h2, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEdgeWorkloadTargets(ctx(t), p2, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: other, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	device := func(p, h string) *eim.DeviceWorkloads {
		t.Helper()
		dw, err := s.DeviceWorkloads(ctx(t), p, h)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.DeviceWorkloadVersions(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if got := vs[p][h]; got.Version != dw.Version || got.StatusWanted != dw.StatusWanted {
			t.Fatalf("device %s: %+v from DeviceWorkloadVersions, version %d wanted %v from DeviceWorkloads", h, got, dw.Version, dw.StatusWanted)
		}
		if one, err := s.DeviceWorkloadVersion(ctx(t), p, h); err != nil || one != vs[p][h] {
			t.Fatalf("device %s: %+v, %v from DeviceWorkloadVersion, %+v from DeviceWorkloadVersions", h, one, err, vs[p][h])
		}
		return dw
	}
	// deviceEvents counts the KindEdgeDevices and KindEdgeDeviceStatus
	// events of p after rev.
	deviceEvents := func(p string, rev int64) int {
		t.Helper()
		evs, err := s.Events(ctx(t), rev, 10000, eim.KindEdgeDevices, eim.KindEdgeDeviceStatus)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Project == p {
				n++
			}
		}
		return n
	}
	revision := func() int64 {
		t.Helper()
		r, err := s.Revision(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	v := device(p1, h1).Version
	if dw := device(p1, h1); dw.StatusWanted || dw.StatusVersion != 0 {
		t.Fatalf("a device just given its set: %+v, want no status version and nothing wanted", dw)
	}
	// h1 reports the version it was given; h2 does not.
	rev := revision()
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h1, v, []eim.EdgeWorkloadStatus{{Workload: "cam", Revision: 1, Phase: eim.PhaseRunning}}); err != nil {
		t.Fatal(err)
	}
	if dw := device(p1, h1); dw.StatusVersion != v || dw.StatusWanted {
		t.Fatalf("after a report of version %d: %+v", v, dw)
	}
	if n := deviceEvents(p1, rev); n != 0 {
		t.Fatalf("an ordinary report wrote %d device events, want none", n)
	}
	// A version that moved after the cut-off is not stale yet.
	if _, err := s.WantStaleEdgeDeviceStatus(ctx(t), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if device(p1, h2).StatusWanted {
		t.Fatal("a device given its version a moment ago is wanted before the cut-off")
	}
	rev = revision()
	n, err := s.WantStaleEdgeDeviceStatus(ctx(t), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("stale devices marked: %d, want at least h2 and the other project's", n)
	}
	if dw := device(p1, h2); !dw.StatusWanted {
		t.Fatalf("h2, which never reported: %+v, want its status wanted", dw)
	}
	if dw := device(p1, h1); dw.StatusWanted {
		t.Fatalf("h1, which reported its version: %+v, want nothing wanted", dw)
	}
	if !device(p2, other).StatusWanted {
		t.Fatal("the other project's device was not marked")
	}
	if n := deviceEvents(p1, rev); n != 1 {
		t.Fatalf("device events of p1 after marking: %d, want 1", n)
	}
	// Marked once: a second sweep changes nothing and writes no event.
	rev = revision()
	if _, err := s.WantStaleEdgeDeviceStatus(ctx(t), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := deviceEvents(p1, rev); n != 0 {
		t.Fatalf("a second sweep wrote %d device events of p1, want none", n)
	}
	// The report clears the mark, with an event; the other project's
	// stays.
	rev = revision()
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h2, v, nil); err != nil {
		t.Fatal(err)
	}
	if dw := device(p1, h2); dw.StatusWanted || dw.StatusVersion != v {
		t.Fatalf("h2 after its report: %+v, want status version %d and nothing wanted", dw, v)
	}
	if n := deviceEvents(p1, rev); n != 1 {
		t.Fatalf("device events after a report that was wanted: %d, want 1", n)
	}
	if !device(p2, other).StatusWanted {
		t.Fatal("p1's report cleared p2's device")
	}

	// Marked by hand (the server lost what the device says it has): once.
	rev = revision()
	for range 2 {
		if err := s.WantEdgeDeviceStatus(ctx(t), p1, h1); err != nil {
			t.Fatal(err)
		}
	}
	if !device(p1, h1).StatusWanted {
		t.Fatal("h1 marked by hand is not wanted")
	}
	if n := deviceEvents(p1, rev); n != 1 {
		t.Fatalf("device events of two marks by hand: %d, want 1", n)
	}
	// A device with no row yet gets one at version 0.
	h3 := create(t, s, p1, &eim.Host{Name: "h3"}).(*eim.Host).ResourceID
	if err := s.WantEdgeDeviceStatus(ctx(t), p1, h3); err != nil {
		t.Fatal(err)
	}
	if dw := device(p1, h3); dw.Version != 0 || !dw.StatusWanted {
		t.Fatalf("h3 marked without a version: %+v, want version 0, wanted", dw)
	}
	// Another project's host, or one that does not exist, is skipped.
	for _, h := range []string{other, "host-0000dead"} {
		if err := s.WantEdgeDeviceStatus(ctx(t), p1, h); err != nil {
			t.Fatalf("mark %s in p1: %v", h, err)
		}
	}
	if vs, _ := s.DeviceWorkloadVersions(ctx(t), p1); len(vs[p1]) != 3 {
		t.Fatalf("devices of p1: %+v, want h1, h2 and h3 alone", vs[p1])
	}
	// A new version makes a reported device stale again, after the cut-off.
	if err := s.SetEdgeWorkloadTargets(ctx(t), p1, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h2, Revision: 0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WantStaleEdgeDeviceStatus(ctx(t), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if dw := device(p1, h2); !dw.StatusWanted || dw.Version <= dw.StatusVersion {
		t.Fatalf("h2 after a new version it did not report: %+v, want its status wanted", dw)
	}
	// A report naming no version is taken as of the current one: cleared,
	// and not stale at the next sweep.
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h2, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WantStaleEdgeDeviceStatus(ctx(t), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if dw := device(p1, h2); dw.StatusWanted || dw.StatusVersion != dw.Version {
		t.Fatalf("h2 after a report without a version: %+v, want its current version's status held", dw)
	}
}
