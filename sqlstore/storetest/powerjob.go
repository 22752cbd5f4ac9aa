package storetest

import (
	"slices"
	"strings"
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

	// Progress is saved by the holder only, and with it a deadline the
	// module moved (a job's time queued for a site slot does not count).
	first.Step, first.Steps[0].Done, first.Steps[1].Sends = 1, true, 1
	moved := first.Deadline.UnixMilli() + time.Hour.Milliseconds()
	first.Deadline = eim.TimeFromUnixMilli(moved)
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
	if got := taken.Deadline.UnixMilli(); got != moved {
		t.Fatalf("take-over: deadline got %d, want the saved %d", got, moved)
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

// testPowerJobQueue checks the record of jobs waiting for a site's slots:
// saved and read back with the job, counted per key among the project's
// RUNNING jobs under a live lease queued before a time (ties broken by
// ID), and no longer
// queued once ended or claimed again.
func testPowerJobQueue(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	var jobs []*eim.PowerJob
	for _, name := range []string{"q1", "q2", "q3", "q4"} {
		h := create(t, s, p, &eim.Host{Name: name}).(*eim.Host).ResourceID
		j := newJob(p, h, eim.PowerStateOn)
		if err := s.CreatePowerJob(c, j); err != nil {
			t.Fatalf("CreatePowerJob: %v", err)
		}
		got, err := s.ClaimPowerJob(c, "w-"+name, time.Hour)
		if err != nil || got == nil || got.ID != j.ID {
			t.Fatalf("ClaimPowerJob: got %+v, %v; want %s", got, err, j.ID)
		}
		jobs = append(jobs, got)
	}
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	queue := func(j *eim.PowerJob, key string, since time.Time, ttl time.Duration) {
		t.Helper()
		j.QueuedFor, j.QueuedSince = key, eim.NewTime(since)
		if err := s.SavePowerJob(c, j, ttl); err != nil {
			t.Fatalf("SavePowerJob queued: %v", err)
		}
	}
	queue(jobs[0], "site-1", t0, time.Hour)
	queue(jobs[1], "site-1", t0.Add(time.Second), time.Hour)
	queue(jobs[2], "site-2", t0, time.Hour)
	count := func(key string, before time.Time, want int) {
		t.Helper()
		n, err := s.CountQueuedPowerJobs(c, p, key, eim.NewTime(before), "")
		if err != nil || n != want {
			t.Fatalf("CountQueuedPowerJobs(%s, before %s): got %d, %v; want %d", key, before.Sub(t0), n, err, want)
		}
	}
	queue(jobs[3], "site-1", t0.Add(time.Second), time.Hour) // in the same millisecond as jobs[1]
	count("site-1", t0, 0)
	count("site-1", t0.Add(time.Second), 1)
	count("site-1", t0.Add(2*time.Second), 3)
	count("site-2", time.Now(), 1)
	// Two jobs queued in one millisecond: the smaller ID is ahead.
	first, second := jobs[1], jobs[3]
	if second.ID < first.ID {
		first, second = second, first
	}
	for _, w := range []struct {
		j    *eim.PowerJob
		want int
	}{{first, 1}, {second, 2}} {
		if n, err := s.CountQueuedPowerJobs(c, p, "site-1", w.j.QueuedSince, w.j.ID); err != nil || n != w.want {
			t.Fatalf("CountQueuedPowerJobs ahead of %s: got %d, %v; want %d", w.j.ID, n, err, w.want)
		}
	}
	jobs[3].State, jobs[3].EndedAt = eim.PowerJobSucceeded, eim.NewTime(time.Now())
	if err := s.SavePowerJob(c, jobs[3], time.Hour); err != nil {
		t.Fatalf("SavePowerJob SUCCEEDED: %v", err)
	}
	count("site-1", t0.Add(2*time.Second), 2)
	if n, err := s.CountQueuedPowerJobs(c, "no-such-project", "site-1", eim.NewTime(time.Now()), ""); err != nil || n != 0 {
		t.Fatalf("another project's count: got %d, %v; want 0", n, err)
	}
	_, err := s.CountQueuedPowerJobs(c, p, "", eim.NewTime(time.Now()), "")
	wantCode(t, err, eim.EINVALID)
	got, err := s.GetPowerJob(c, p, "", jobs[1].ID)
	if err != nil || got.QueuedFor != "site-1" || got.QueuedSince.UnixMilli() != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("GetPowerJob: got %+v, %v; want queued for site-1 since t0+1s", got, err)
	}

	// Ended: no longer queued.
	jobs[0].State, jobs[0].EndedAt = eim.PowerJobSucceeded, eim.NewTime(time.Now())
	if err := s.SavePowerJob(c, jobs[0], time.Hour); err != nil {
		t.Fatalf("SavePowerJob SUCCEEDED: %v", err)
	}
	count("site-1", time.Now(), 1)
	// Its holder gone (the lease ran out): not counted; claimed again,
	// not queued until its new holder says so.
	queue(jobs[1], "site-1", t0.Add(time.Second), time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := s.CountQueuedPowerJobs(c, p, "site-1", eim.NewTime(time.Now()), "")
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a job whose lease ran out: still counted (%d)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	again, err := s.ClaimPowerJob(c, "w-again", time.Hour)
	if err != nil || again == nil || again.ID != jobs[1].ID || again.QueuedFor != "" || !again.QueuedSince.IsZero() {
		t.Fatalf("claimed again: got %+v, %v; want %s not queued", again, err, jobs[1].ID)
	}
}

// testPowerJobRequests checks RequestPowerJob: the cancels of
// IMMEDIATE, the host's write (Before) and the new job in one
// transaction (an error in Before leaves none of them), a request for
// the latest job's state not made twice, and every job's creation and
// end an audit record and a feed event, with no secret in them.
func testPowerJobRequests(t *testing.T, s eim.Store) {
	c := ctx(t)
	p := project(t, s)
	h := create(t, s, p, &eim.Host{Name: "h1"}).(*eim.Host).ResourceID
	const sealed = "SEALED-PASSWORD-NEVER-IN-AUDIT"
	if err := s.PutBMC(c, &eim.BMC{Project: p, HostID: h, Protocol: eim.BMCIPMI, Address: "127.0.0.1:623", Username: "admin", SealedPassword: sealed}); err != nil {
		t.Fatalf("PutBMC: %v", err)
	}
	rev, err := s.Revision(c)
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	setDesired := func(d eim.PowerState) func(eim.Tx) error {
		return func(tx eim.Tx) error {
			r, err := tx.Get(c, eim.KindHost, h)
			if err != nil {
				return err
			}
			hh := r.(*eim.Host)
			hh.DesiredPowerState = d
			return tx.UpdateFields(c, hh, "desiredPowerState")
		}
	}
	desired := func() eim.PowerState {
		var d eim.PowerState
		update(t, s, p, func(tx eim.Tx) error {
			r, err := tx.Get(c, eim.KindHost, h)
			if err == nil {
				d = r.(*eim.Host).DesiredPowerState
			}
			return err
		})
		return d
	}

	first := newJob(p, h, eim.PowerStateOn)
	first.Reason = "restored by power policy ALWAYS_ON: the BMC reported OFF"
	if ok, err := s.RequestPowerJob(c, eim.PowerJobRequest{Job: first, Before: setDesired(eim.PowerStateOn)}); err != nil || !ok {
		t.Fatalf("RequestPowerJob: got %v, %v, want created", ok, err)
	}
	if got, _ := s.GetPowerJob(c, p, "", first.ID); got == nil || got.Reason != first.Reason || got.HostID != h {
		t.Fatalf("GetPowerJob(host \"\"): got %+v, want the job with its reason", got)
	}
	if d := desired(); d != eim.PowerStateOn {
		t.Fatalf("desiredPowerState: got %q, want ON", d)
	}
	// The same state again, UnlessLatest: nothing.
	again := newJob(p, h, eim.PowerStateOn)
	if ok, err := s.RequestPowerJob(c, eim.PowerJobRequest{Job: again, UnlessLatest: true}); err != nil || ok {
		t.Fatalf("RequestPowerJob of the latest job's state: got %v, %v, want nothing written", ok, err)
	}

	// Before fails after the cancel: neither the cancel, nor the host's
	// write, nor the job.
	off := newJob(p, h, eim.PowerStateOff)
	boom := func(tx eim.Tx) error {
		if err := setDesired(eim.PowerStateOff)(tx); err != nil {
			return err
		}
		return eim.Errorf(eim.EINVALID, "desiredPowerState: refused")
	}
	_, err = s.RequestPowerJob(c, eim.PowerJobRequest{Job: off, Before: boom, CancelReason: "cancelled by a request for OFF"})
	wantCode(t, err, eim.EINVALID)
	if got, _ := s.GetPowerJob(c, p, h, first.ID); got == nil || got.State != eim.PowerJobPending {
		t.Fatalf("after a failed request: got %+v, want the first job still PENDING", got)
	}
	if d := desired(); d != eim.PowerStateOn {
		t.Fatalf("after a failed request: desiredPowerState %q, want ON", d)
	}
	if _, total, _ := s.ListPowerJobs(c, p, h, 10, 0); total != 1 {
		t.Fatalf("after a failed request: %d jobs, want 1", total)
	}

	// IMMEDIATE: the first job cancelled, the host's state and the new job.
	if ok, err := s.RequestPowerJob(c, eim.PowerJobRequest{Job: off, Before: setDesired(eim.PowerStateOff), CancelReason: "cancelled by a request for OFF"}); err != nil || !ok {
		t.Fatalf("RequestPowerJob IMMEDIATE: got %v, %v", ok, err)
	}
	if got, _ := s.GetPowerJob(c, p, h, first.ID); got == nil || got.State != eim.PowerJobCancelled || got.LastError != "cancelled by a request for OFF" {
		t.Fatalf("the job before an IMMEDIATE request: got %+v, want CANCELLED with the reason", got)
	}
	if d := desired(); d != eim.PowerStateOff {
		t.Fatalf("desiredPowerState: got %q, want OFF", d)
	}
	// The worker ends the new job.
	j, err := s.ClaimPowerJob(c, "w1", time.Hour)
	if err != nil || j == nil || j.ID != off.ID {
		t.Fatalf("ClaimPowerJob: got %+v, %v, want %s", j, err, off.ID)
	}
	j.Steps[0].Done = true
	if err := s.SavePowerJob(c, j, time.Hour); err != nil {
		t.Fatalf("SavePowerJob (progress): %v", err)
	}
	j.State, j.LastError, j.EndedAt = eim.PowerJobFailed, "the BMC did not answer", eim.NewTime(time.Now())
	if err := s.SavePowerJob(c, j, time.Hour); err != nil {
		t.Fatalf("SavePowerJob (end): %v", err)
	}
	wantCode(t, s.SavePowerJob(c, j, time.Hour), eim.ECONFLICT)

	// The records: two creations, two ends, nothing of the progress.
	recs, _ := audit(t, s, p, eim.AuditQuery{Filter: `kind="bmcjob"`})
	var got []string
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		got = append(got, r.Action+" "+r.ResourceID+" "+string(r.Changes["state"].New))
		for f, ch := range r.Changes {
			if strings.Contains(string(ch.Old)+string(ch.New), sealed) {
				t.Fatalf("audit record %d: field %s holds the BMC's sealed password", r.Seq, f)
			}
		}
	}
	want := []string{
		"CREATED " + first.ID + ` "PENDING"`,
		"UPDATED " + first.ID + ` "CANCELLED"`,
		"CREATED " + off.ID + ` "PENDING"`,
		"UPDATED " + off.ID + ` "FAILED"`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("power jobs' audit records: got %q, want %q", got, want)
	}
	if r := recs[len(recs)-1]; string(r.Changes["reason"].New) != `"`+first.Reason+`"` || string(r.Changes["hostId"].New) != `"`+h+`"` {
		t.Fatalf("creation record: got %v, want its host and reason", r.Changes)
	}
	if r := recs[0]; string(r.Changes["lastError"].New) != `"the BMC did not answer"` {
		t.Fatalf("end record: got %v, want its lastError", r.Changes)
	}
	// And the feed: an event per record, of kind bmcjob.
	evs, err := s.Events(c, rev, 1000, eim.KindPowerJob)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	var feed []string
	for _, ev := range evs {
		feed = append(feed, string(ev.Op)+" "+ev.ID)
	}
	wantFeed := []string{"CREATED " + first.ID, "UPDATED " + first.ID, "CREATED " + off.ID, "UPDATED " + off.ID}
	if !slices.Equal(feed, wantFeed) {
		t.Fatalf("power jobs' events: got %q, want %q", feed, wantFeed)
	}
}
