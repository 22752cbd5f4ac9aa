package oob_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/sqlstore"
)

// bmcReads is the module's store with the BMC reads counted by host: the
// follower reads a host's BMC in every sync of it, so a host it does not
// sync is one whose BMC it never reads.
type bmcReads struct {
	*sqlstore.Store
	mu    sync.Mutex
	hosts map[string]int
}

func (r *bmcReads) GetBMC(ctx context.Context, project, hostID string) (*eim.BMC, error) {
	r.mu.Lock()
	r.hosts[hostID]++
	r.mu.Unlock()
	return r.Store.GetBMC(ctx, project, hostID)
}

func (r *bmcReads) read() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.hosts))
	for h, n := range r.hosts {
		out[h] = n
	}
	return out
}

// bmcKindOf reads the host's bmcKind.
func (e *env) bmcKindOf(t *testing.T, project, host string) eim.BaremetalControllerKind {
	t.Helper()
	var k eim.BaremetalControllerKind
	if err := e.store.View(t.Context(), project, func(tx eim.Tx) error {
		r, err := tx.Get(t.Context(), eim.KindHost, host)
		if err == nil {
			k = r.(*eim.Host).BmcKind
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return k
}

// waitBMCKind waits (20 s at most) until the host's bmcKind is want.
func (e *env) waitBMCKind(t *testing.T, project, host string, want eim.BaremetalControllerKind) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := e.bmcKindOf(t, project, host)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s/%s: bmcKind %q, want %q", project, host, got, want)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace
	}
}

// TestFollowerKnowsWhichHostsHaveBMC: the follower syncs a host when its
// BMC is put or deleted by another process (straight in the store here,
// as another replica's API writes it: only the feed tells), and, resumed
// after a restart on a feed of hosts and instances without BMCs (a fleet
// onboarded meanwhile), catches up without reading any of them.
func TestFollowerKnowsWhichHostsHaveBMC(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		f := newFake(oob.PowerOn)
		j := newJobs(t, e, f, nil) // hostA has a BMC, put through this module's API
		stop := run(t, j.svc.Follow)
		ipmi := func(host, addr string) *eim.BMC {
			return &eim.BMC{Project: "a", HostID: host, Protocol: eim.BMCIPMI, Address: addr, Username: "admin", SealedPassword: "sealed"}
		}
		if err := e.store.PutBMC(t.Context(), ipmi(e.hostA2, "127.0.0.1:9624")); err != nil {
			t.Fatal(err)
		}
		e.waitBMCKind(t, "a", e.hostA2, eim.BaremetalControllerKindIPMI)
		stop()

		// While no follower runs: a fleet without BMCs onboarded in both
		// projects (hosts, their instances, an update each), and hostA2's
		// BMC deleted by another process.
		var fleet []string
		for i := range 20 {
			project := []string{"a", "b"}[i%2]
			h := &eim.Host{Name: fmt.Sprint("n", i)}
			if err := e.store.Update(t.Context(), project, func(tx eim.Tx) error {
				if err := tx.Create(t.Context(), h); err != nil {
					return err
				}
				return tx.Create(t.Context(), &eim.Instance{Name: "os-of-" + h.Name, Kind: eim.InstanceKindMetal, HostID: h.ResourceID})
			}); err != nil {
				t.Fatal(err)
			}
			if err := e.store.Update(t.Context(), project, func(tx eim.Tx) error {
				r, err := tx.Get(t.Context(), eim.KindHost, h.ResourceID)
				if err != nil {
					return err
				}
				r.(*eim.Host).Note = "onboarded"
				return tx.Update(t.Context(), r)
			}); err != nil {
				t.Fatal(err)
			}
			fleet = append(fleet, h.ResourceID)
		}
		if err := e.store.DeleteBMC(t.Context(), "a", e.hostA2); err != nil {
			t.Fatal(err)
		}

		// The restarted follower resumes; a BMC put on one of the fleet's
		// hosts of project b last marks where the catch-up ends.
		reads := &bmcReads{Store: e.store, hosts: map[string]int{}}
		o := fastOptions(e, f, "test-restarted")
		o.Store = reads
		svc, err := oob.New(o)
		if err != nil {
			t.Fatal(err)
		}
		marker := fleet[1]
		if err := e.store.PutBMC(t.Context(), &eim.BMC{Project: "b", HostID: marker, Protocol: eim.BMCIPMI, Address: "127.0.0.1:9625", Username: "admin", SealedPassword: "sealed"}); err != nil {
			t.Fatal(err)
		}
		run(t, svc.Follow)
		e.waitBMCKind(t, "b", marker, eim.BaremetalControllerKindIPMI)
		e.waitBMCKind(t, "a", e.hostA2, eim.BaremetalControllerKindUnspecified)
		got := reads.read()
		for _, h := range fleet {
			if h != marker && got[h] > 0 {
				t.Errorf("host %s without a BMC: its BMC read %d times, want none (reads: %v)", h, got[h], got)
			}
		}
		if got[marker] == 0 || got[e.hostA2] == 0 {
			t.Errorf("BMC reads %v: want the marker's and hostA2's (their BMC events)", got)
		}
	})
}
