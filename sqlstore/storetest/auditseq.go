package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testAuditSeqPerProject: a project's audit records are numbered 1, 2, 3…
// whatever other projects write at the same time, so its log shows no
// trace of their activity; a reader following a project's log by seq
// (everything after the last seq it saw) never finds a gap it would skip,
// even with concurrent writers in the project (PostgreSQL); pages by seq
// cursor cover the log; pruning does not reuse numbers, and a project
// created again under a deleted one's name starts at 1.
func testAuditSeqPerProject(t *testing.T, s eim.Store) {
	a, b := project(t, s), project(t, s)
	const writers, each = 4, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		for _, p := range []string{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					err := s.Update(ctx(t), p, func(tx eim.Tx) error {
						return tx.Create(ctx(t), &eim.Region{Name: fmt.Sprintf("r%d-%d", w, i)})
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// A follower of a's log by cursor meanwhile: what it finds after the
	// last seq it saw starts right after it, with no hole.
	var last int64
	follow := func() {
		t.Helper()
		recs, _ := audit(t, s, a, eim.AuditQuery{Filter: fmt.Sprintf("seq>%d", last), NoTotal: true})
		slices.Reverse(recs) // oldest first
		for _, r := range recs {
			if r.Seq != last+1 {
				t.Fatalf("following %s's log after seq %d: got %v, want it to continue at %d", a, last, seqs(recs), last+1)
			}
			last = r.Seq
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Millisecond):
		}
		follow()
	}
	close(errs)
	for err := range errs {
		t.Fatalf("write: %v", err)
	}
	follow()
	n := int64(1 + writers*each) // the project's creation and its regions
	if last != n {
		t.Errorf("follower of %s: last seq %d, want %d", a, last, n)
	}
	for _, p := range []string{a, b} {
		recs, total := audit(t, s, p, eim.AuditQuery{})
		want := make([]int64, n)
		for i := range want {
			want[i] = n - int64(i)
		}
		if total != int(n) || !slices.Equal(seqs(recs), want) {
			t.Errorf("%s's log: got seq %v (total %d), want %d…1", p, seqs(recs), total, n)
		}
	}

	// Pages by seq cursor, newest first: each page is the records below
	// the last one of the page before.
	var paged []int64
	for before := n + 1; ; {
		page, _ := audit(t, s, b, eim.AuditQuery{Filter: fmt.Sprintf("seq<%d", before), Limit: 7, NoTotal: true})
		if len(page) == 0 {
			break
		}
		paged = append(paged, seqs(page)...)
		before = page[len(page)-1].Seq
	}
	if len(paged) != int(n) || paged[0] != n || paged[len(paged)-1] != 1 {
		t.Errorf("%s's log by cursor pages of 7: got %v, want %d…1", b, paged, n)
	}

	// Pruned records do not free their numbers: a record after them goes
	// on from the last one (a follower's cursor stays valid).
	if _, err := s.PruneAudit(ctx(t), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx(t), a, func(tx eim.Tx) error { return tx.Create(ctx(t), &eim.Region{Name: "after"}) }); err != nil {
		t.Fatal(err)
	}
	if recs, _ := audit(t, s, a, eim.AuditQuery{}); len(recs) != 1 || recs[0].Seq != n+1 {
		t.Errorf("after pruning, %s's next record: got seq %v, want [%d]", a, seqs(recs), n+1)
	}

	// A project created again under a deleted one's name numbers from 1.
	if err := s.DeleteProject(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(ctx(t), &eim.Project{Name: b, ID: "00000000-0000-4000-8000-999999999998"}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := audit(t, s, b, eim.AuditQuery{}); len(recs) != 1 || recs[0].Seq != 1 {
		t.Errorf("%s created again: got seq %v, want [1]", b, seqs(recs))
	}
}
