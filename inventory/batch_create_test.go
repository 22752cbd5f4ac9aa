package inventory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// Creates through a batcher keep the rules of lone creates: a conflict fails
// only its own call, every other create commits, and calls of two projects
// never share a transaction (a site of one project is not found from the
// other).
func TestBatchedCreates(t *testing.T) {
	for name, open := range engines(t) {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/workers=%d", name, workers), func(t *testing.T) {
				testBatchedCreates(t, open(t), workers)
			})
		}
	}
}

func testBatchedCreates(t *testing.T, st eim.Store, workers int) {
	{
		{
			bt := inventory.NewBatcher(st, inventory.BatcherOptions{MaxBatch: 16, Workers: workers})
			t.Cleanup(bt.Close)
			svc := inventory.New(st, inventory.Options{Batcher: bt})
			e := &env{t: t, ctx: context.Background(), store: st, svc: svc}
			p1, p2 := e.newProject(), e.newProject()
			reg := ok(svc.Create(e.ctx, p1, &eim.Region{Name: "r"})).get(t).(*eim.Region)
			site := ok(svc.Create(e.ctx, p1, &eim.Site{Name: "s", RegionID: reg.ResourceID})).get(t).(*eim.Site)

			const n = 64
			// UUIDs are unique across projects: fresh ones for each run.
			var rnd [4]byte
			rand.Read(rnd[:])
			prefix := hex.EncodeToString(rnd[:])
			dupUUID := prefix + "-0000-4000-8000-00000000dead"
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				conflicts int
				notFound  int
				created   = map[string]int{}
			)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					proj, h := p1, &eim.Host{Name: fmt.Sprintf("h%d", i), SiteID: site.ResourceID,
						UUID: fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i)}
					switch {
					case i%8 == 1:
						h.UUID = dupUUID // one of these wins
					case i%8 == 2:
						proj = p2 // the site is p1's: not found from p2
					}
					_, err := svc.Create(e.ctx, proj, h)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						created[proj]++
					case eim.ErrorCode(err) == eim.ECONFLICT:
						if i%8 != 1 {
							t.Errorf("create h%d: %v", i, err)
						}
						conflicts++
					case eim.ErrorCode(err) == eim.ENOTFOUND:
						notFound++
					default:
						t.Errorf("create h%d in %s: %v", i, proj, err)
					}
				}()
			}
			wg.Wait()
			if want := n/8 - 1; conflicts != want {
				t.Errorf("conflicts: got %d, want %d", conflicts, want)
			}
			if want := n / 8; notFound != want {
				t.Errorf("not found: got %d, want %d", notFound, want)
			}
			if want := n - n/8 - (n/8 - 1); created[p1] != want || created[p2] != 0 {
				t.Errorf("created: got %v, want %d in %s and none in %s", created, want, p1, p2)
			}
			page := ok(svc.List(e.ctx, p1, eim.KindHost, inventory.ListQuery{})).get(t)
			if page.Total != created[p1] {
				t.Errorf("stored hosts: got %d, want %d", page.Total, created[p1])
			}
		}
	}
}
