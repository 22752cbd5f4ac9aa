package oob

import (
	"context"
	"fmt"
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

// slot is a power-on slot of a site that a job holds: the store's lease
// name, held by holder.
type slot struct{ name, holder string }

// siteSlot waits for one of the SiteLimit power-on slots of the host's
// site (nil when there is no limit): a slot is a lease of the store's,
// taken for SiteWindow, so that at most SiteLimit power-ons start per
// site per window across every process. The job holds it again just
// before it sends (holdSlot) and then until SiteWindow after the BMC
// answered, so that two power-ons of one slot reach the BMCs at least a
// window apart, however long the save before the send took.
func (s *Service) siteSlot(ctx context.Context, r *run, send int) (*slot, error) {
	if s.o.SiteLimit <= 0 {
		return nil, nil
	}
	site := r.site
	if site == "" {
		site = "no-site:" + r.j.Project
	} else {
		site = r.j.Project + ":" + site
	}
	holder := fmt.Sprintf("%s#%d", r.j.ID, send)
	waited := false
	for {
		for i := range s.o.SiteLimit {
			name := fmt.Sprintf("oob-power-on:%s:%d", site, i)
			ok, err := s.o.Store.Claim(ctx, name, holder, s.o.SiteWindow)
			if err != nil {
				return nil, err
			}
			if ok {
				if waited {
					r.log.Info("power-on slot of the site free", "site", r.site)
				}
				return &slot{name: name, holder: holder}, nil
			}
		}
		if !waited {
			r.log.Info("waiting for a power-on slot of the site", "site", r.site, "limit", s.o.SiteLimit, "window", s.o.SiteWindow)
			waited = true
		}
		if err := r.renew(ctx); err != nil {
			return nil, err
		}
		if err := r.late(); err != nil {
			return nil, err
		}
		if err := r.wait(ctx, s.o.SiteWindow/20); err != nil {
			return nil, err
		}
	}
}

// holdSlot holds sl for SiteWindow from now; it reports false when the
// slot's lease ran out and another job took it.
func (s *Service) holdSlot(ctx context.Context, sl *slot) (bool, error) {
	if sl == nil {
		return true, nil
	}
	return s.o.Store.Claim(ctx, sl.name, sl.holder, s.o.SiteWindow)
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
