package oob

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// Work runs the module's worker pool until ctx ends: Workers workers,
// each claiming one job at a time (eim.PowerJobStore.ClaimPowerJob) and
// carrying it to its end. Every process of the module runs one; the
// store's leases share the jobs among them.
func (s *Service) Work(ctx context.Context) error {
	var wg sync.WaitGroup
	for i := range s.o.Workers {
		holder := s.o.Holder + "/" + strconv.Itoa(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.worker(ctx, holder)
		}()
	}
	wg.Wait()
	return nil
}

func (s *Service) worker(ctx context.Context, holder string) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
		for ctx.Err() == nil {
			j, err := s.o.Store.ClaimPowerJob(ctx, holder, s.o.Lease)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("claim power job", "err", err)
				}
				break
			}
			if j == nil {
				break
			}
			s.work(ctx, j)
		}
		t.Reset(s.o.ClaimEvery)
	}
}

// poke wakes the workers of this process (a job was created here).
func (s *Service) poke() {
	for range s.o.Workers {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// reached records the BMC's Reachable condition after talking to it:
// REACHABLE after an answer (even an error the BMC gave), UNREACHABLE
// with the error after no answer, a refused login or an untrusted
// certificate. Only changes are written, and a refresh at most every
// ReachableEvery.
func (s *Service) reached(ctx context.Context, project, hostID string, err error) {
	r := eim.BMCReachable{Status: "REACHABLE", CheckedAt: eim.NewTime(time.Now())}
	if err != nil {
		switch KindOf(err) {
		case Unreachable, BadCredentials, BadCertificate, Ambiguous:
			r.Status, r.LastError = "UNREACHABLE", err.Error()
		}
	}
	key := project + "/" + hostID
	s.mu.Lock()
	prev, ok := s.reach[key]
	if ok && prev.Status == r.Status && prev.LastError == r.LastError && r.CheckedAt.Sub(prev.CheckedAt.Time) < s.o.ReachableEvery {
		s.mu.Unlock()
		return
	}
	s.reach[key] = r
	s.mu.Unlock()
	if werr := s.o.Store.RecordBMCFound(ctx, project, hostID, nil, r); werr != nil && eim.ErrorCode(werr) != eim.ENOTFOUND {
		s.log.Info("BMC's reachability not recorded", "host", hostID, "err", werr)
	}
}

// forget drops what reached remembers of a BMC (its settings changed).
func (s *Service) forget(project, hostID string) {
	s.mu.Lock()
	delete(s.reach, project+"/"+hostID)
	s.mu.Unlock()
}
