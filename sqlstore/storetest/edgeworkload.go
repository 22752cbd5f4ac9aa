package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testEdgeWorkloads checks eim.EdgeWorkloadStore: workloads and their
// revisions (a revision only on top of the latest), targets and the
// devices' versions (growing with every change of a device's set, not
// with a change that changes nothing), a device's set in one read,
// statuses replaced per device, uploads, log requests, isolation between
// projects, and the cascades of a workload's, a host's and a project's
// deletion.
func testEdgeWorkloads(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	h1 := create(t, s, p1, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	other := create(t, s, p2, &eim.Host{Name: "o"}).(*eim.Host).ResourceID

	secret := "sealed:x"
	spec := func(image string) eim.EdgeWorkloadSpec {
		return eim.EdgeWorkloadSpec{DeviceSelector: &eim.LabelSelector{MatchLabels: map[string]string{"line": "1"}},
			Pod:     eim.PodTemplate{Spec: eim.PodSpec{Containers: []eim.Container{{Name: "c", Image: image}}}},
			Secrets: []eim.EdgeSecret{{Name: "s", Items: []eim.EdgeSecretItem{{Key: "k", Value: &secret}}}}}
	}
	w := &eim.EdgeWorkload{Project: p1, Name: "cam", Spec: spec("reg/cam:1")}
	if err := s.CreateEdgeWorkload(ctx(t), w); err != nil {
		t.Fatal(err)
	}
	if w.Revision != 1 || w.CreatedAt.IsZero() {
		t.Fatalf("create: got revision %d, created %v; want 1 and a time", w.Revision, w.CreatedAt)
	}
	wantCode(t, s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p1, Name: "cam", Spec: spec("x:1")}), eim.ECONFLICT)
	if err := s.CreateEdgeWorkload(ctx(t), &eim.EdgeWorkload{Project: p2, Name: "cam", Spec: spec("other:1")}); err != nil {
		t.Fatalf("the same name in another project: %v", err)
	}
	got, err := s.FindEdgeWorkload(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Pod.Spec.Containers[0].Image != "reg/cam:1" || *got.Spec.Secrets[0].Items[0].Value != secret || got.Spec.DeviceSelector.MatchLabels["line"] != "1" {
		t.Fatalf("find: got %+v", got.Spec)
	}
	_, err = s.FindEdgeWorkload(ctx(t), p1, "nope")
	wantCode(t, err, eim.ENOTFOUND)

	// Revisions: only on top of the latest.
	w2, err := s.ReviseEdgeWorkload(ctx(t), p1, "cam", 1, spec("reg/cam:2"))
	if err != nil {
		t.Fatal(err)
	}
	if w2.Revision != 2 || w2.Spec.Pod.Spec.Containers[0].Image != "reg/cam:2" {
		t.Fatalf("revise: got revision %d image %s, want 2 reg/cam:2", w2.Revision, w2.Spec.Pod.Spec.Containers[0].Image)
	}
	_, err = s.ReviseEdgeWorkload(ctx(t), p1, "cam", 1, spec("reg/cam:3"))
	wantCode(t, err, eim.ECONFLICT)
	_, err = s.ReviseEdgeWorkload(ctx(t), p1, "nope", 1, spec("reg/cam:3"))
	wantCode(t, err, eim.ENOTFOUND)
	revs, err := s.EdgeWorkloadRevisions(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 2 || revs[0].Revision != 1 || revs[1].Revision != 2 || revs[0].Spec.Pod.Spec.Containers[0].Image != "reg/cam:1" {
		t.Fatalf("revisions: got %d, want revisions 1 and 2 with their specs", len(revs))
	}
	if list, _ := s.ListEdgeWorkloads(ctx(t), p1); len(list) != 1 || list[0].Name != "cam" {
		t.Fatalf("list: got %d, want cam alone", len(list))
	}
	if all, _ := s.ListEdgeWorkloads(ctx(t), ""); len(all) < 2 {
		t.Fatalf("list of every project: got %d, want at least 2", len(all))
	}

	// Every write is audited, by revision.
	recs, _, err := s.Audit(ctx(t), p1, eim.AuditQuery{Filter: `kind = "edgeworkload" AND resourceId = "cam"`, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("audit records of cam: got %d, want 2 (create, revise)", len(recs))
	}

	// Targets and versions.
	version := func(p, h string) int64 {
		t.Helper()
		dw, err := s.DeviceWorkloads(ctx(t), p, h)
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.DeviceWorkloadVersions(ctx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if vs[p][h].Version != dw.Version {
			t.Fatalf("version of %s: %d from DeviceWorkloadVersions, %d from DeviceWorkloads", h, vs[p][h].Version, dw.Version)
		}
		return dw.Version
	}
	if v := version(p1, h1); v != 0 {
		t.Fatalf("version of a device with nothing: got %d, want 0", v)
	}
	if err := s.SetEdgeWorkloadTargets(ctx(t), p1, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h1, Revision: 1}, {Workload: "cam", HostID: h2, Revision: 2},
		{Workload: "cam", HostID: "host-0000dead", Revision: 1}, {Workload: "cam", HostID: h1, Revision: 9}, {Workload: "gone", HostID: h1, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	v1, v2 := version(p1, h1), version(p1, h2)
	if v1 == 0 || v2 == 0 {
		t.Fatalf("versions after targets: %d %d, want > 0", v1, v2)
	}
	dw, err := s.DeviceWorkloads(ctx(t), p1, h1)
	if err != nil {
		t.Fatal(err)
	}
	if len(dw.Targets) != 1 || dw.Targets[0].Name != "cam" || dw.Targets[0].Revision != 1 || dw.Targets[0].Spec.Pod.Spec.Containers[0].Image != "reg/cam:1" {
		t.Fatalf("device set: got %+v, want cam at revision 1 with its spec", dw.Targets)
	}
	// The same targets again change nothing.
	if err := s.SetEdgeWorkloadTargets(ctx(t), p1, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h1, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	if v := version(p1, h1); v != v1 {
		t.Fatalf("version after an unchanged target: got %d, want %d", v, v1)
	}
	if err := s.SetEdgeWorkloadTargets(ctx(t), p1, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h1, Revision: 2}}); err != nil {
		t.Fatal(err)
	}
	if v := version(p1, h1); v <= v1 {
		t.Fatalf("version after a new target revision: got %d, want > %d", v, v1)
	}
	if ts, _ := s.EdgeWorkloadTargets(ctx(t), p1, ""); len(ts) != 2 {
		t.Fatalf("targets: got %+v, want 2", ts)
	}
	if ts, _ := s.EdgeWorkloadTargets(ctx(t), p1, h2); len(ts) != 1 || ts[0].Revision != 2 {
		t.Fatalf("targets of h2: got %+v", ts)
	}
	// Another project sees none of it.
	if ts, _ := s.EdgeWorkloadTargets(ctx(t), p2, ""); len(ts) != 0 {
		t.Fatalf("targets of another project: got %+v", ts)
	}
	if err := s.SetEdgeWorkloadTargets(ctx(t), p2, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: h1, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	if ts, _ := s.EdgeWorkloadTargets(ctx(t), p2, ""); len(ts) != 0 {
		t.Fatalf("a target of another project's host was set: %+v", ts)
	}

	// Statuses, replaced per device.
	now := eim.NewTime(time.Now().Truncate(time.Millisecond))
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h1, 0, []eim.EdgeWorkloadStatus{
		{Workload: "cam", Revision: 2, Phase: eim.PhaseRunning, TransitionTime: now, Containers: []eim.ContainerState{{Name: "c", State: "running", Restarts: 1}}},
		{Workload: "unknown", Phase: eim.PhaseRunning}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h2, 0, []eim.EdgeWorkloadStatus{{Workload: "cam", Revision: 1, Phase: eim.PhaseError, LastError: "pull"}}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.RecordEdgeWorkloadStatus(ctx(t), p1, other, 0, nil), eim.ENOTFOUND)
	sts, err := s.EdgeWorkloadStatuses(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 2 || sts[0].Revision == 0 || len(sts[0].Containers)+len(sts[1].Containers) != 1 {
		t.Fatalf("statuses: got %+v", sts)
	}
	for _, st := range sts {
		if st.HostID == h1 && (st.Phase != eim.PhaseRunning || !st.TransitionTime.Equal(now.Time) || st.ReportedAt.IsZero()) {
			t.Fatalf("status of h1: got %+v", st)
		}
	}
	if err := s.RecordEdgeWorkloadUploads(ctx(t), p1, h1, "cam", now.Time, []string{"a.txt: 403"}); err != nil {
		t.Fatal(err)
	}
	// Downloads are recorded beside uploads, neither touching the other;
	// a round with nothing done keeps the last time.
	later := now.Time.Add(time.Second)
	if err := s.RecordEdgeWorkloadDownloads(ctx(t), p1, h1, "cam", later, []string{"m.bin: 404", "n.bin: 500"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEdgeWorkloadDownloads(ctx(t), p1, h1, "cam", time.Time{}, []string{"m.bin: 404"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEdgeWorkloadDownloads(ctx(t), p1, h1, "gone", later, nil); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("downloads of a workload that does not exist: got %v, want ENOTFOUND", err)
	}
	// A device reporting no pod of the workload: its status goes.
	if err := s.RecordEdgeWorkloadStatus(ctx(t), p1, h2, 0, nil); err != nil {
		t.Fatal(err)
	}
	sts, _ = s.EdgeWorkloadStatuses(ctx(t), p1, "cam")
	if len(sts) != 1 || sts[0].HostID != h1 || !sts[0].LastDataUpload.Equal(now.Time) || len(sts[0].UploadErrors) != 1 ||
		!sts[0].LastDataDownload.Equal(later) || len(sts[0].DownloadErrors) != 1 || sts[0].DownloadErrors[0] != "m.bin: 404" {
		t.Fatalf("statuses after h2 reported none: got %+v, want h1's with its upload and download", sts)
	}

	// Counts, for the exporter: h1 runs revision 2, h2 reported nothing.
	counts, err := s.EdgeWorkloadDeviceCounts(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var mine []eim.EdgeWorkloadDeviceCount
	for _, c := range counts {
		if c.Project == p1 {
			mine = append(mine, c)
		}
	}
	slices.SortFunc(mine, func(a, b eim.EdgeWorkloadDeviceCount) int { return int(a.Revision - b.Revision) })
	if len(mine) != 2 || mine[0] != (eim.EdgeWorkloadDeviceCount{Project: p1, Workload: "cam", Target: 2, Devices: 1}) ||
		mine[1] != (eim.EdgeWorkloadDeviceCount{Project: p1, Workload: "cam", Target: 2, Revision: 2, Phase: eim.PhaseRunning, Devices: 1}) {
		t.Fatalf("counts: got %+v", mine)
	}
	// The same counts of one workload (the API's status), and none of
	// another project's.
	of, err := s.EdgeWorkloadDeviceCountsOf(ctx(t), p1, "cam")
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(of, func(a, b eim.EdgeWorkloadDeviceCount) int { return int(a.Revision - b.Revision) })
	if !slices.Equal(of, mine) {
		t.Fatalf("counts of cam: got %+v, want %+v", of, mine)
	}
	if of, err := s.EdgeWorkloadDeviceCountsOf(ctx(t), p2, "cam"); err != nil || len(of) != 0 {
		t.Fatalf("counts of cam in another project: got %+v, %v", of, err)
	}

	// Log requests.
	before := version(p1, h1)
	lr := &eim.EdgeWorkloadLogRequest{Project: p1, ID: "log-1", Workload: "cam", HostID: h1, Container: "c", Tail: 10}
	if err := s.CreateEdgeWorkloadLogRequest(ctx(t), lr); err != nil {
		t.Fatal(err)
	}
	if v := version(p1, h1); v <= before {
		t.Fatalf("version after a log request: got %d, want > %d", v, before)
	}
	if dw, _ := s.DeviceWorkloads(ctx(t), p1, h1); len(dw.Logs) != 1 || dw.Logs[0].ID != "log-1" || dw.Logs[0].Tail != 10 {
		t.Fatalf("device set's log requests: got %+v", dw.Logs)
	}
	wantCode(t, s.AnswerEdgeWorkloadLogRequest(ctx(t), p1, h2, "log-1", nil, ""), eim.ENOTFOUND)
	if err := s.AnswerEdgeWorkloadLogRequest(ctx(t), p1, h1, "log-1", []eim.ContainerLog{{Container: "c", Text: "hello\n"}}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.AnswerEdgeWorkloadLogRequest(ctx(t), p1, h1, "log-1", nil, "late"); err != nil {
		t.Fatalf("a repeated answer: %v", err)
	}
	got2, err := s.FindEdgeWorkloadLogRequest(ctx(t), p1, "log-1")
	if err != nil {
		t.Fatal(err)
	}
	if !got2.Answered || len(got2.Logs) != 1 || got2.Logs[0].Text != "hello\n" {
		t.Fatalf("answered request: got %+v", got2)
	}
	if dw, _ := s.DeviceWorkloads(ctx(t), p1, h1); len(dw.Logs) != 0 {
		t.Fatalf("an answered request is still asked: %+v", dw.Logs)
	}
	_, err = s.FindEdgeWorkloadLogRequest(ctx(t), p2, "log-1")
	wantCode(t, err, eim.ENOTFOUND)

	// Deleting the workload removes it from its devices, with new versions.
	b1, b2 := version(p1, h1), version(p1, h2)
	if err := s.DeleteEdgeWorkload(ctx(t), p1, "cam"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.DeleteEdgeWorkload(ctx(t), p1, "cam"), eim.ENOTFOUND)
	if v := version(p1, h1); v <= b1 {
		t.Fatalf("h1's version after the delete: got %d, want > %d", v, b1)
	}
	if v := version(p1, h2); v <= b2 {
		t.Fatalf("h2's version after the delete: got %d, want > %d", v, b2)
	}
	if dw, _ := s.DeviceWorkloads(ctx(t), p1, h1); len(dw.Targets) != 0 {
		t.Fatalf("targets after the delete: %+v", dw.Targets)
	}
	if _, err := s.FindEdgeWorkload(ctx(t), p2, "cam"); err != nil {
		t.Fatalf("the other project's workload went too: %v", err)
	}

	// A project's deletion takes its workloads.
	if err := s.DeleteProject(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.ListEdgeWorkloads(ctx(t), ""); len(all) != 0 {
		for _, w := range all {
			if w.Project == p2 {
				t.Fatalf("a deleted project's workload remains: %+v", w)
			}
		}
	}
}
