package oob_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
)

// countingStore counts the site slots' lease statements.
type countingStore struct {
	oob.Store
	claims atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if strings.HasPrefix(name, "oob-power-on:") {
		c.claims.Add(1)
	}
	return c.Store.Claim(ctx, name, holder, ttl)
}

// site is n hosts of project a (no site: they share the project's
// limit), each with a BMC of a fleet of fakes (machines off; unless tweak sets another driver); the
// module is not running yet.
type site struct {
	e     *env
	svc   *oob.Service
	store *countingStore
	fleet *fleet
	hosts []string
	jobs  []string
}

func newSite(t *testing.T, e *env, n int, tweak func(*oob.Options)) *site {
	t.Helper()
	st := &site{e: e, store: &countingStore{Store: e.store}, fleet: &fleet{m: map[string]*fakeBMC{}}}
	o := fastOptions(e, nil, "site-"+t.Name())
	o.Store = st.store
	o.Drivers = map[eim.BMCProtocol]oob.Driver{eim.BMCIPMI: st.fleet}
	tweak(&o)
	svc, err := oob.New(o)
	if err != nil {
		t.Fatal(err)
	}
	st.svc = svc
	mux := http.NewServeMux()
	for p, h := range svc.Routes() {
		mux.Handle(p, h)
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	for i := range n {
		h := &eim.Host{Name: fmt.Sprint("s", i)}
		if err := e.store.Update(t.Context(), "a", func(tx eim.Tx) error { return tx.Create(t.Context(), h) }); err != nil {
			t.Fatal(err)
		}
		if code, out := e.do("admin", "PUT", bmcPath("a", h.ResourceID), map[string]any{"protocol": "IPMI", "address": fmt.Sprintf("127.0.0.%d", i+1),
			"username": "u", "password": "p"}); code != 200 {
			t.Fatalf("PUT bmc: %d %s", code, out)
		}
		st.hosts = append(st.hosts, h.ResourceID)
	}
	return st
}

// powerOn asks every host of the site to be ON.
func (st *site) powerOn(t *testing.T) {
	t.Helper()
	e := st.e
	for _, h := range st.hosts {
		code, out := e.do("admin", "POST", bmcPath("a", h)+"/jobs", map[string]any{"desiredPowerState": "POWER_STATE_ON"})
		if code != 200 {
			t.Fatalf("POST job: %d %s", code, out)
		}
		var v eim.PowerJobView
		decode(t, out, &v)
		st.jobs = append(st.jobs, v.JobID)
	}
}

// waitAll waits until every host's job has succeeded; fn, when set, sees
// the jobs at every poll.
func (st *site) waitAll(t *testing.T, within time.Duration, fn ...func(*eim.PowerJob)) []*eim.PowerJob {
	t.Helper()
	deadline := time.Now().Add(within)
	done := make([]*eim.PowerJob, len(st.hosts))
	for left := len(st.hosts); left > 0; {
		for i, h := range st.hosts {
			if done[i] != nil {
				continue
			}
			j, err := st.e.store.GetPowerJob(t.Context(), "a", h, st.jobs[i])
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fn {
				f(j)
			}
			switch {
			case j.State == eim.PowerJobSucceeded:
				done[i] = j
				left--
			case j.State.Ended():
				t.Fatalf("host %s: job %s %s (%s), want SUCCEEDED", h, j.ID, j.State, j.LastError)
			case time.Now().After(deadline):
				t.Fatalf("host %s: job %s still %s after %s (step %d: %+v)", h, j.ID, j.State, within, j.Step, j.Steps)
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a wait for an event
	}
	return done
}

// TestSiteSlotWaitIsCheap: jobs waiting for a site's slots do not each
// try every slot's lease over and over: the first of the process's queue
// tries a slot when the one it holds runs out. Eight power-ons at 2 per
// 300 ms cost a few lease statements each (a take, a hold before the
// send, a hold after it), where every waiting job trying both slots every
// window/20 made hundreds.
func TestSiteSlotWaitIsCheap(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		const n = 8
		st := newSite(t, e, n, func(o *oob.Options) { o.Workers, o.SiteLimit, o.SiteWindow = n, 2, 300*time.Millisecond })
		st.powerOn(t)
		run(t, st.svc.Work)
		st.waitAll(t, 30*time.Second)
		got := st.store.claims.Load()
		// 3 a power-on, and some slack for a slot tried as its lease
		// ran out by this process's clock but not yet by the database's.
		if want := int64(4 * n); got > want {
			t.Fatalf("site slot lease statements: got %d for %d power-ons, want at most %d", got, n, want)
		}
		st.fleet.mu.Lock()
		defer st.fleet.mu.Unlock()
		for i, h := range st.hosts {
			if f := st.fleet.m[fmt.Sprintf("127.0.0.%d", i+1)]; f.sent(oob.ActionOn) != 1 {
				t.Fatalf("host %s: got %d power-ons, want 1", h, f.sent(oob.ActionOn))
			}
		}
	})
}

// TestSiteSlotQueueKeepsDeadline: a job queued for its site's slot does
// not burn its deadline meanwhile, and says where it is in the queue. At
// 1 power-on per 400 ms, the fifth of five hosts starts 1.6 s after the
// first, beyond a job timeout of 1 s counted from the jobs' creation:
// every job still succeeds, the waiting ones showed "waiting for a site
// slot: N ahead", and their deadlines moved on by their wait.
func TestSiteSlotQueueKeepsDeadline(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		const n = 5
		const timeout = time.Second
		st := newSite(t, e, n, func(o *oob.Options) {
			o.Workers, o.SiteLimit, o.SiteWindow, o.JobTimeout = n, 1, 400*time.Millisecond, timeout
		})
		st.powerOn(t)
		run(t, st.svc.Work)
		queued := regexp.MustCompile(`^waiting for a site slot: ([0-9]+) ahead \(1 power-ons per 400ms at site \(none\)\)$`)
		most := -1
		jobs := st.waitAll(t, 30*time.Second, func(j *eim.PowerJob) {
			if q := j.Steps[0].Queued; q != "" {
				m := queued.FindStringSubmatch(q)
				if m == nil {
					t.Fatalf("job %s: queued %q, want it to match %s", j.ID, q, queued)
				}
				var ahead int
				fmt.Sscan(m[1], &ahead)
				most = max(most, ahead)
			}
		})
		if most < 1 {
			t.Fatalf("no job was seen queued behind another (most ahead %d)", most)
		}
		late := 0
		for _, j := range jobs {
			if j.Steps[0].Queued != "" {
				t.Fatalf("job %s ended still showing %q", j.ID, j.Steps[0].Queued)
			}
			if j.Deadline.Sub(j.CreatedAt.Time) > timeout+200*time.Millisecond {
				late++
			}
		}
		// At least the last three waited 400 ms or more.
		if late < 3 {
			t.Fatalf("jobs whose deadline moved on by their wait: got %d, want 3 or more", late)
		}
	})
}

// TestSiteSlotQueueAcrossReplicas: with two processes on one store, a
// waiting job's "N ahead" counts the other process's jobs too. Eight
// power-ons at 1 per second, four jobs in each process at once (each has
// four workers), seven of them waiting: a process alone sees at most 3 of
// its own ahead of a job, the deployment has up to 6, however the two
// processes' jobs began waiting.
func TestSiteSlotQueueAcrossReplicas(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		const n = 8
		var o oob.Options
		st := newSite(t, e, n, func(opt *oob.Options) {
			opt.Workers, opt.SiteLimit, opt.SiteWindow = n/2, 1, time.Second
			o = *opt
		})
		o.Holder = "replica-b"
		b, err := oob.New(o)
		if err != nil {
			t.Fatal(err)
		}
		st.powerOn(t)
		run(t, st.svc.Work)
		run(t, b.Work)
		queued := regexp.MustCompile(`^waiting for a site slot: ([0-9]+) ahead \(1 power-ons per 1s at site \(none\)\)$`)
		most := -1
		st.waitAll(t, 60*time.Second, func(j *eim.PowerJob) {
			if q := j.Steps[0].Queued; q != "" {
				m := queued.FindStringSubmatch(q)
				if m == nil {
					t.Fatalf("job %s: queued %q, want it to match %s", j.ID, q, queued)
				}
				var ahead int
				fmt.Sscan(m[1], &ahead)
				most = max(most, ahead)
			}
		})
		t.Logf("most jobs seen ahead of one: %d", most)
		if most < n/2 {
			t.Fatalf("most jobs seen ahead of one: got %d, want %d or more (the other process's counted)", most, n/2)
		}
		st.fleet.mu.Lock()
		defer st.fleet.mu.Unlock()
		for i, h := range st.hosts {
			if f := st.fleet.m[fmt.Sprintf("127.0.0.%d", i+1)]; f.sent(oob.ActionOn) != 1 {
				t.Fatalf("host %s: got %d power-ons, want 1", h, f.sent(oob.ActionOn))
			}
		}
	})
}
