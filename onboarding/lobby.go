package onboarding

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
)

// The enrollment lobby (docs/enrollment.md). An unknown device that calls
// with a project's enrollment token (or a TOKEN rule's) gets one
// enrollment request in that project, which its later calls update; it is
// answered PENDING until a person or a rule approves it (its host is then
// created, onboarded, and the same call goes on as a registered device's)
// or DENIED.
//
// What a waiting or denied device costs: its calls read (the token's
// project, the host lookup, its request) and write nothing while nothing
// it reports changed, except once per LobbyQuiet, when its attempts and
// last-seen time are saved (the calls in between are counted in memory
// and added then). A denied device is told to wait DeniedRetry (and the
// agent backs off further from there), so it calls a few times an hour.

// Lobby timings.
const (
	// LobbyQuiet is how often a waiting device's request is written.
	LobbyQuiet = time.Minute
	// deniedRetry bounds what a denied device is told to wait.
	deniedRetryMin = 10 * time.Minute
	deniedRetryMax = 20 * time.Minute
	// maxUnsaved bounds the requests whose unsaved calls are counted.
	maxUnsaved = 100_000
)

// unsavedCalls counts, per request, the calls not written yet.
type unsavedCalls struct {
	mu sync.Mutex
	n  map[string]int64
}

func (u *unsavedCalls) take(key string) int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n[key]
}

func (u *unsavedCalls) settle(key string, wrote bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.n == nil {
		u.n = map[string]int64{}
	}
	switch {
	case wrote:
		delete(u.n, key)
	case len(u.n) < maxUnsaved || u.n[key] > 0:
		u.n[key]++
	}
}

// requestOf is the enrollment request a Discover call describes.
func requestOf(id identity, req *onboardingv1.DiscoverRequest) (*eim.EnrollmentRequest, error) {
	r := &eim.EnrollmentRequest{UUID: id.uuid, SerialNumber: id.serial, Hostname: req.GetHostname(), Installed: req.GetInstalled(),
		MACs: []string{}, Labels: eim.Metadata{}}
	for _, nic := range req.GetInterfaces() {
		if mac := strings.ToLower(nic.GetMac()); mac != "" && len(r.MACs) < eim.MaxEnrollmentMACs {
			r.MACs = append(r.MACs, mac)
		}
	}
	if len(req.GetLabels()) > eim.MaxEnrollmentLabels {
		return nil, eim.Errorf(eim.EINVALID, "labels: at most %d", eim.MaxEnrollmentLabels)
	}
	for i, l := range req.GetLabels() {
		it := eim.MetadataItem{Key: l.GetKey(), Value: l.GetValue()}
		if err := eim.CheckMetadataItem(fmt.Sprintf("labels[%d]", i), it); err != nil {
			return nil, err
		}
		r.Labels = append(r.Labels, it)
	}
	if hw := req.GetHardware(); hw != nil {
		for _, s := range []string{hw.GetCpuModel(), hw.GetProductName(), hw.GetArchitecture(), hw.GetOs()} {
			if len(s) > maxFieldLen {
				return nil, eim.Errorf(eim.EINVALID, "hardware: a field is longer than %d bytes", maxFieldLen)
			}
		}
		r.Hardware = eim.EnrollmentHardware{CPUModel: hw.GetCpuModel(), CPUCores: hw.GetCpuCores(), MemoryBytes: hw.GetMemoryBytes(),
			ProductName: hw.GetProductName(), Architecture: hw.GetArchitecture(), OS: hw.GetOs()}
	}
	return r, nil
}

// lobby answers an unknown device that proved project p (through the
// project's token, or the TOKEN rule tokenRule's). again is false on the
// call's first pass: an approval by a rule then runs the call again, as
// a registered device's.
func (s *Service) lobby(ctx context.Context, p *eim.Project, tokenRule *eim.EnrollmentRule, id identity, req *onboardingv1.DiscoverRequest, again bool) (*onboardingv1.DiscoverResponse, error) {
	in, err := requestOf(id, req)
	if err != nil {
		return nil, err
	}
	key := p.Name + "\x00" + in.Key()
	r, wrote, err := s.store.RecordEnrollmentCall(ctx, p.Name, eim.EnrollmentCall{Request: in, Now: s.now(), Quiet: s.lobbyQuiet, Unsaved: s.unsaved.take(key)})
	if err != nil {
		return nil, err
	}
	s.unsaved.settle(key, wrote)
	if r.State == eim.EnrollmentApproved {
		// No host matched the device, so the host of its approval is
		// gone (deleted) or no longer the device's: it enrolls afresh.
		var gone bool
		err := s.store.View(ctx, p.Name, func(tx eim.Tx) error {
			_, err := tx.Get(ctx, eim.KindHost, r.HostID)
			gone = eim.ErrorCode(err) == eim.ENOTFOUND
			if gone {
				return nil
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if !gone {
			return nil, eim.Errorf(eim.EPRECONDITION, "this device's enrollment was approved as host %s, which no longer matches its UUID and serial number; correct the host or delete it", r.HostID)
		}
		reason := fmt.Sprintf("its host %s was deleted", r.HostID)
		if _, err := s.store.ReopenEnrollment(ctx, p.Name, r.ID, r.HostID, reason); err != nil {
			return nil, err
		}
		r.State, r.HostID, r.Reason = eim.EnrollmentPending, "", reason
	}
	switch r.State {
	case eim.EnrollmentDenied:
		msg := fmt.Sprintf("enrollment denied by project %s", p.Name)
		if r.Reason != "" {
			msg += ": " + r.Reason
		}
		return &onboardingv1.DiscoverResponse{Status: onboardingv1.DiscoverResponse_STATUS_DENIED, Project: p.Name, EnrollmentId: r.ID,
			Message: msg, RetryAfterSeconds: deniedRetry()}, nil
	case eim.EnrollmentPending:
	default:
		return nil, fmt.Errorf("enrollment request %s: state %q", r.ID, r.State)
	}
	if !again {
		// Rules match what the device reports now (what is stored may
		// be up to LobbyQuiet old).
		now := *r
		now.Labels, now.SerialNumber = in.Labels, in.SerialNumber
		rule, err := s.matchRule(ctx, p.Name, tokenRule, &now)
		if err != nil {
			return nil, err
		}
		if rule != nil {
			if _, err := s.approve(ctx, p.Name, r.ID, rule.ID, "rule:"+rule.ID+" ("+rule.Name+")",
				eim.EnrollmentApproval{SiteID: rule.SiteID, Metadata: rule.Metadata}); err != nil {
				return nil, err
			}
			s.log.Info("enrollment approved by rule", "project", p.Name, "request", r.ID, "rule", rule.Name)
			return s.discoverAgain(ctx, req)
		}
	}
	return &onboardingv1.DiscoverResponse{Status: onboardingv1.DiscoverResponse_STATUS_PENDING, Project: p.Name, EnrollmentId: r.ID,
		Message:           fmt.Sprintf("waiting for approval in project %s (enrollment request %s)", p.Name, r.ID),
		RetryAfterSeconds: retryAfter()}, nil
}

// matchRule returns the project's rule that approves r: the TOKEN rule
// whose token the device carried, else the first SERIAL, LABELS or ANY
// rule that matches, oldest first.
func (s *Service) matchRule(ctx context.Context, project string, tokenRule *eim.EnrollmentRule, r *eim.EnrollmentRequest) (*eim.EnrollmentRule, error) {
	if tokenRule != nil {
		return tokenRule, nil
	}
	rules, err := s.store.ListEnrollmentRules(ctx, project)
	if err != nil {
		return nil, err
	}
	for _, rule := range rules {
		if rule.Matches(r) {
			return rule, nil
		}
	}
	return nil, nil
}

// approve approves the request (inventory.ApproveEnrollment).
func (s *Service) approve(ctx context.Context, project, id, ruleID, by string, a eim.EnrollmentApproval) (*eim.EnrollmentRequest, error) {
	return inventory.ApproveEnrollment(ctx, s.store, project, id, by, ruleID, a, s.now())
}

// deniedRetry is how long a denied device is told to wait (spread).
func deniedRetry() uint32 {
	lo, hi := int(deniedRetryMin/time.Second), int(deniedRetryMax/time.Second)
	return uint32(lo + rand.IntN(hi-lo+1))
}

// tokenHash is how enrollment tokens are stored.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
