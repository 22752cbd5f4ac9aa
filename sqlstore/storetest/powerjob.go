package storetest

import (
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func newJob(project, host string, desired eim.PowerState) *eim.PowerJob {
	return &eim.PowerJob{Project: project, HostID: host, Desired: desired, Deadline: eim.NewTime(time.Now().Add(time.Hour)),
		Steps: []eim.PowerStep{{Kind: eim.PowerStepSetBoot, Boot: "PXE", Once: true}, {Kind: eim.PowerStepPower, Action: "ON"}}}
}

// testPowerJobs checks eim.PowerJobStore's API side: jobs created on a
// project's hosts only, listed newest first in pages, read per host and
// project, cancelled once.
func testPowerJobs(t *testing.T, s eim.Store) {
	c := ctx(t)
	p1, p2 := project(t, s), project(t, s)
	h1 := create(t, s, p1, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID

	wantCode(t, s.CreatePowerJob(c, newJob(p2, h1, eim.PowerStateOn)), eim.ENOTFOUND)
	wantCode(t, s.CreatePowerJob(c, newJob(p1, "host-00000000", eim.PowerStateOn)), eim.ENOTFOUND)
	var jobs []*eim.PowerJob
	for _, d := range []eim.PowerState{eim.PowerStateOn, eim.PowerStateOff, eim.PowerStateReset} {
		j := newJob(p1, h1, d)
		if err := s.CreatePowerJob(c, j); err != nil {
			t.Fatalf("CreatePowerJob: %v", err)
		}
		if !eim.ValidID(eim.KindPowerJob, j.ID) || j.State != eim.PowerJobPending || j.CreatedAt.IsZero() || j.Seq == 0 {
			t.Fatalf("created job: got %+v, want an ID, PENDING, a creation time and a seq", j)
		}
		jobs = append(jobs, j)
	}
	if err := s.CreatePowerJob(c, newJob(p1, h2, eim.PowerStateOn)); err != nil {
		t.Fatalf("CreatePowerJob h2: %v", err)
	}
	page, total, err := s.ListPowerJobs(c, p1, h1, 2, 0)
	if err != nil {
		t.Fatalf("ListPowerJobs: %v", err)
	}
	if total != 3 || len(page) != 2 || page[0].ID != jobs[2].ID || page[1].ID != jobs[1].ID {
		t.Fatalf("first page: got %d of %d, want the 2 newest of 3 (%s, %s)", len(page), total, jobs[2].ID, jobs[1].ID)
	}
	page, _, err = s.ListPowerJobs(c, p1, h1, 2, 2)
	if err != nil || len(page) != 1 || page[0].ID != jobs[0].ID {
		t.Fatalf("second page: got %v (%v), want %s", page, err, jobs[0].ID)
	}
	if page, total, _ := s.ListPowerJobs(c, p2, h1, 10, 0); len(page) != 0 || total != 0 {
		t.Fatalf("another project's list: got %d of %d, want none", len(page), total)
	}
	got, err := s.GetPowerJob(c, p1, h1, jobs[0].ID)
	if err != nil {
		t.Fatalf("GetPowerJob: %v", err)
	}
	if got.Desired != eim.PowerStateOn || len(got.Steps) != 2 || got.Steps[0].Boot != "PXE" || !got.Steps[0].Once || got.Steps[1].Action != "ON" ||
		!got.Deadline.Equal(jobs[0].Deadline.Time) {
		t.Fatalf("read job: got %+v, want it as created", got)
	}
	_, err = s.GetPowerJob(c, p2, h1, jobs[0].ID)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = s.GetPowerJob(c, p1, h2, jobs[0].ID)
	wantCode(t, err, eim.ENOTFOUND)

	_, err = s.CancelPowerJob(c, p2, h1, jobs[0].ID, "x")
	wantCode(t, err, eim.ENOTFOUND)
	cj, err := s.CancelPowerJob(c, p1, h1, jobs[0].ID, "cancelled by a user")
	if err != nil {
		t.Fatalf("CancelPowerJob: %v", err)
	}
	if cj.State != eim.PowerJobCancelled || cj.LastError != "cancelled by a user" || cj.EndedAt.IsZero() {
		t.Fatalf("cancelled job: got %+v, want CANCELLED with its reason and end", cj)
	}
	_, err = s.CancelPowerJob(c, p1, h1, jobs[0].ID, "again")
	wantCode(t, err, eim.ECONFLICT)

	// Jobs go with their host.
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(c, eim.KindHost, h2) })
	if page, total, _ := s.ListPowerJobs(c, p1, h2, 10, 0); len(page) != 0 || total != 0 {
		t.Fatalf("a deleted host's jobs: got %d, want none", total)
	}
}

// testPowerJobLeases checks the workers' side: one job in flight per host
// (the oldest first), a claimed job not claimed again while its lease
// lives, progress saved only by its holder, a cancelled job not saved,
// and a job whose holder stopped renewing taken over with its progress.
func testPowerJobLeases(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	h1 := create(t, s, p, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	h2 := create(t, s, p, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	a1, a2, b1 := newJob(p, h1, eim.PowerStateOn), newJob(p, h1, eim.PowerStateOff), newJob(p, h2, eim.PowerStateOn)
	for _, j := range []*eim.PowerJob{a1, a2, b1} {
		if err := s.CreatePowerJob(c, j); err != nil {
			t.Fatalf("CreatePowerJob: %v", err)
		}
	}
	claim := func(holder string, ttl time.Duration) *eim.PowerJob {
		t.Helper()
		j, err := s.ClaimPowerJob(c, holder, ttl)
		if err != nil {
			t.Fatalf("ClaimPowerJob(%s): %v", holder, err)
		}
		return j
	}
	first := claim("w1", time.Hour)
	if first == nil || first.ID != a1.ID || first.State != eim.PowerJobRunning || first.Holder != "w1" || first.Attempts != 1 {
		t.Fatalf("first claim: got %+v, want %s RUNNING held by w1, attempt 1", first, a1.ID)
	}
	second := claim("w2", time.Hour)
	if second == nil || second.ID != b1.ID {
		t.Fatalf("second claim: got %+v, want h2's job %s (h1 has one in flight)", second, b1.ID)
	}
	if j := claim("w3", time.Hour); j != nil {
		t.Fatalf("third claim: got %s, want none (h1's second job waits behind its first)", j.ID)
	}
	_, err := s.ClaimPowerJob(c, "", time.Hour)
	wantCode(t, err, eim.EINVALID)

	// Progress is saved by the holder only.
	first.Step, first.Steps[0].Done, first.Steps[1].Sends = 1, true, 1
	if err := s.SavePowerJob(c, first, time.Hour); err != nil {
		t.Fatalf("SavePowerJob by its holder: %v", err)
	}
	stranger := *first
	stranger.Holder = "w9"
	wantCode(t, s.SavePowerJob(c, &stranger, time.Hour), eim.ECONFLICT)

	// The holder stops renewing (ttl 1 ms): another takes the job over,
	// with its recorded progress, and the first can no longer save.
	if err := s.SavePowerJob(c, first, time.Millisecond); err != nil {
		t.Fatalf("SavePowerJob: %v", err)
	}
	var taken *eim.PowerJob
	deadline := time.Now().Add(10 * time.Second)
	for taken == nil && time.Now().Before(deadline) {
		taken = claim("w4", time.Hour)
	}
	if taken == nil || taken.ID != a1.ID || taken.Holder != "w4" || taken.Attempts != 2 || taken.Step != 1 || !taken.Steps[0].Done || taken.Steps[1].Sends != 1 {
		t.Fatalf("take-over: got %+v, want %s held by w4, attempt 2, from step 1 with its progress", taken, a1.ID)
	}
	wantCode(t, s.SavePowerJob(c, first, time.Hour), eim.ECONFLICT)

	// An ended job frees its host for the next.
	taken.State, taken.EndedAt = eim.PowerJobSucceeded, eim.NewTime(time.Now())
	if err := s.SavePowerJob(c, taken, time.Hour); err != nil {
		t.Fatalf("SavePowerJob SUCCEEDED: %v", err)
	}
	wantCode(t, s.SavePowerJob(c, taken, time.Hour), eim.ECONFLICT)
	next := claim("w5", time.Hour)
	if next == nil || next.ID != a2.ID {
		t.Fatalf("after h1's first job ended: got %+v, want %s", next, a2.ID)
	}
	// A cancelled job's holder cannot save it.
	if _, err := s.CancelPowerJob(c, p, h1, a2.ID, "cancelled"); err != nil {
		t.Fatalf("CancelPowerJob: %v", err)
	}
	wantCode(t, s.SavePowerJob(c, next, time.Hour), eim.ECONFLICT)
	if j := claim("w6", time.Hour); j != nil {
		t.Fatalf("after cancel: got %s, want none (h2's job is held)", j.ID)
	}
}
