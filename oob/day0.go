package oob

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
	"github.com/eimhq/eim/inventory"
)

// Day 0 through the BMC: a network-boot job starts a registered machine's
// onboarding and provisioning from EIM. Its steps:
//
//  1. SET_BOOT: a one-time network boot (PXE; UEFI HTTP boot from
//     Options.HTTPBootURL when one is set and the BMC lists HTTP boot),
//     read back;
//  2. BOOT_POWER: power on when the machine is off, reset it when it is
//     on (the choice is made when the step starts and recorded in its
//     Action, so that a worker taking the job over does not choose again);
//  3. CALL_HOME: wait until the node calls home (the micro-OS's
//     onboarding or provisioning moves the host's onboarding status or its
//     instance's provisioning status after the power action), for up to
//     Options.CallHomeTimeout: "the BMC says on" is not enough, a reset is
//     done when the node booted again;
//  4. CLEAR_BOOT: the override cleared and read back as none (some BMCs
//     keep a one-time override for every boot, "Continuous").
//
// A job failing after its override was set (no call-home in time, a power
// action not confirmed), or cancelled then, clears the override before it
// ends, as well as it can.
//
// Where such jobs come from: POST …/bmc/jobs {"boot":"NETWORK"} (the CLI's
// `eim host provision`); a registered host with an instance, not yet
// onboarded, whose desiredPowerState is ON (Day 0 starts by itself, once:
// a failed one is asked again explicitly); and a provisioning workflow
// retried (`eim instance reprovision`) of a host that asks to be on.

// Step kinds of network-boot jobs (SET_BOOT is eim.PowerStepSetBoot).
const (
	StepBootPower = "BOOT_POWER"
	StepCallHome  = "CALL_HOME"
	StepClearBoot = "CLEAR_BOOT"
)

// BootNetwork is the boot of a network-boot job in the API's POST.
const BootNetwork = "NETWORK"

// NetbootPlan returns the steps of a network-boot job booting from target
// (BootPXE or BootHTTP); callHome bounds the wait for the node.
func NetbootPlan(target BootTarget, callHome time.Duration) []eim.PowerStep {
	return []eim.PowerStep{
		{Kind: eim.PowerStepSetBoot, Boot: string(target), Once: true},
		{Kind: StepBootPower},
		{Kind: StepCallHome, TimeoutMs: callHome.Milliseconds()},
		{Kind: StepClearBoot, Boot: string(BootNone)},
	}
}

// IsNetboot reports whether j is a network-boot job.
func IsNetboot(j *eim.PowerJob) bool {
	return slices.ContainsFunc(j.Steps, func(s eim.PowerStep) bool { return s.Kind == StepCallHome })
}

// netbootTarget is how b's machine boots from the network: UEFI HTTP boot
// when EIM has an HTTP boot URL and the BMC lists HTTP boot, else PXE.
func (s *Service) netbootTarget(b *eim.BMC) BootTarget {
	if s.o.HTTPBootURL != "" && slices.Contains(b.Capabilities.BootTargets, string(BootHTTP)) {
		return BootHTTP
	}
	return BootPXE
}

// requestNetboot adds a network-boot job for h (whose BMC is b); the job
// is for desiredPowerState ON (the machine ends on).
func (s *Service) requestNetboot(ctx context.Context, h *eim.Host, b *eim.BMC, before func(eim.Tx) error) (*eim.PowerJob, error) {
	steps := NetbootPlan(s.netbootTarget(b), s.o.CallHomeTimeout)
	// The wait for the node comes on top of the power steps' time.
	return s.enqueue(ctx, h, eim.PowerStateOn, steps, s.o.JobTimeout+s.o.CallHomeTimeout, before, false)
}

// enqueue adds a job of steps for desired to h: a host whose
// powerCommandPolicy is IMMEDIATE has the jobs still to end cancelled;
// otherwise (ORDERED) the new job waits behind them. before (nil: none) is
// the inventory's write that goes with the request: it, the cancels and
// the new job are one transaction (eim.PowerJobRequest). unlessLatest
// adds nothing (nil, nil) when the host's latest job already asks for d.
func (s *Service) enqueue(ctx context.Context, h *eim.Host, d eim.PowerState, steps []eim.PowerStep, timeout time.Duration, before func(eim.Tx) error, unlessLatest bool) (*eim.PowerJob, error) {
	j := &eim.PowerJob{Project: h.Project, HostID: h.ResourceID, Desired: d, Steps: steps, Deadline: eim.NewTime(time.Now().Add(timeout))}
	req := eim.PowerJobRequest{Job: j, Before: before, UnlessLatest: unlessLatest}
	if h.PowerCommandPolicy == eim.PowerCommandPolicyImmediate {
		req.CancelReason = "cancelled by a request for " + string(d) + " (powerCommandPolicy IMMEDIATE)"
	}
	if created, err := s.o.Store.RequestPowerJob(ctx, req); err != nil || !created {
		return nil, err
	}
	s.log.Info("power job created", "project", h.Project, "host", h.ResourceID, "job", j.ID, "desired", string(d), "netboot", IsNetboot(j))
	s.poke()
	return j, nil
}

// requestFor adds the job h's desired power state needs: a network boot
// when Day 0 is due (day0Due), else what request decides.
func (s *Service) requestFor(ctx context.Context, h *eim.Host, b *eim.BMC) (*eim.PowerJob, error) {
	due, err := s.day0Due(ctx, h)
	if err != nil {
		return nil, err
	}
	if due {
		return s.requestNetboot(ctx, h, b, nil)
	}
	return s.request(ctx, h, nil, false, nil)
}

// day0Due reports whether h's Day 0 starts through its BMC by itself: it
// is registered (not onboarded, not being deleted or invalidated), asks
// to be on, has an instance to provision, and has had no network-boot job
// yet (a failed one is asked again explicitly: POST …/bmc/jobs
// {"boot":"NETWORK"}).
func (s *Service) day0Due(ctx context.Context, h *eim.Host) (bool, error) {
	if h.DesiredPowerState != eim.PowerStateOn || h.CurrentState == eim.HostStateOnboarded ||
		h.CurrentState == eim.HostStateUntrusted || h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted {
		return false, nil
	}
	in, err := s.instanceOf(ctx, h.Project, h.ResourceID)
	if err != nil || in == nil {
		return false, err
	}
	recent, _, err := s.o.Store.ListPowerJobs(ctx, h.Project, h.ResourceID, 20, 0)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(recent, IsNetboot), nil
}

// instanceOf is the host's instance (nil when it has none).
func (s *Service) instanceOf(ctx context.Context, project, hostID string) (*eim.Instance, error) {
	var in *eim.Instance
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}, Limit: 1, NoTotal: true})
		if err != nil {
			return err
		}
		if len(items) > 0 {
			in = items[0].(*eim.Instance)
		}
		return nil
	})
	return in, err
}

// syncInstance: an instance changed (created for a registered host
// perhaps): its host's Day 0 may be due.
func (s *Service) syncInstance(ctx context.Context, project, id string) error {
	var hostID string
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindInstance, id)
		if err != nil {
			return err
		}
		hostID = r.(*eim.Instance).HostID
		return nil
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND || (err == nil && hostID == "") {
		return nil
	}
	if err != nil {
		return err
	}
	return s.followHost(ctx, project, hostID)
}

// syncWorkflow: a provisioning workflow changed. One retried (`eim
// instance reprovision`: a FAILED workflow made PENDING again, attempt 2
// or more) whose host has a BMC and asks to be on boots the host from the
// network again through it, with a reset when it is on: a node hung or
// switched off gets the new attempt too, and one still in the micro-OS
// discovers again and restarts the workflow (the provisioning module
// restarts an action whose node rebooted). Once per attempt: a
// network-boot job made since the attempt started is enough. A workflow
// its node took up already (RUNNING by the time it is read) needs none.
func (s *Service) syncWorkflow(ctx context.Context, project, id string) error {
	var wf *eim.Workflow
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindWorkflow, id)
		if err != nil {
			return err
		}
		wf = r.(*eim.Workflow)
		return nil
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if wf.State != eim.WorkflowPending || wf.Attempt < 2 || wf.HostID == "" {
		return nil
	}
	b, err := s.o.Store.GetBMC(ctx, project, wf.HostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	h, err := s.host(ctx, project, wf.HostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if h.DesiredPowerState != eim.PowerStateOn || h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted {
		return nil
	}
	recent, _, err := s.o.Store.ListPowerJobs(ctx, project, wf.HostID, 20, 0)
	if err != nil {
		return err
	}
	for _, j := range recent {
		if IsNetboot(j) && !j.CreatedAt.Before(wf.StartedAt.Time) {
			return nil
		}
	}
	j, err := s.requestNetboot(ctx, h, b, nil)
	if err == nil {
		s.log.Info("provisioning retried: the host boots from the network again through its BMC", "project", project, "host", wf.HostID,
			"workflow", wf.ResourceID, "attempt", wf.Attempt, "job", j.ID)
	}
	return err
}

// postNetboot answers POST …/bmc/jobs {"boot":"NETWORK"}: "provision this
// registered host" (or boot this one from the network again). The
// desiredPowerState, when given, must be ON; the host's becomes ON.
func (s *Service) postNetboot(w http.ResponseWriter, r *http.Request, c *call, in PowerRequest) error {
	if in.DesiredPowerState != "" && in.DesiredPowerState != eim.PowerStateOn {
		return eim.Errorf(eim.EINVALID, "desiredPowerState: a network boot leaves the machine on: %s or nothing, not %q", eim.PowerStateOn, in.DesiredPowerState)
	}
	if in.BootOnce {
		return eim.Errorf(eim.EINVALID, "bootOnce: a network boot is always for the next boot only; leave it out")
	}
	b, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	h, err := s.host(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	if h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted {
		return eim.Errorf(eim.EPRECONDITION, "host %s is %s: it is not booted for provisioning", c.hostID, h.DesiredState)
	}
	// The host's desiredPowerState (ON), the cancels of IMMEDIATE and the
	// job: one transaction.
	j, err := s.requestNetboot(r.Context(), h, b, func(tx eim.Tx) error {
		return inventory.SetDesiredPower(r.Context(), tx, &eim.Host{Meta: eim.Meta{ResourceID: c.hostID}}, eim.PowerStateOn)
	})
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, j.View())
	return nil
}

// isNetbootRequest reports whether a POST's boot asks for a network-boot job.
func isNetbootRequest(in PowerRequest) bool {
	return strings.EqualFold(strings.TrimSpace(in.Boot), BootNetwork)
}

// bootOf is the override a SET_BOOT or CLEAR_BOOT step sets: an HTTP boot
// takes EIM's URL (UEFI).
func (r *run) bootOf(st *eim.PowerStep) Boot {
	b := Boot{Target: BootTarget(st.Boot), Once: st.Once}
	if b.Target == BootHTTP {
		b.URL, b.UEFI = r.s.o.HTTPBootURL, true
	}
	return b
}

// netbootStep carries out the steps of network-boot jobs.
func (r *run) netbootStep(ctx context.Context, st *eim.PowerStep) error {
	var err error
	switch st.Kind {
	case StepBootPower:
		err = r.bootPower(ctx, st)
	case StepCallHome:
		err = r.callHome(ctx, st)
	case StepClearBoot:
		st.Boot, st.Once = string(BootNone), false
		return r.setBoot(ctx, st)
	default:
		return fail("step %d: unknown kind %q", r.j.Step, st.Kind)
	}
	return r.undoOnFailure(ctx, err)
}

// undoOnFailure clears what a network-boot (or virtual-media) job set
// when err ends it: a failure says how that went; a cancel logs it.
func (r *run) undoOnFailure(ctx context.Context, err error) error {
	var f *failure
	switch {
	case errors.As(err, &f):
		f.why += r.clearAfterFailure(ctx)
	case errors.Is(err, errLost):
		// Cancelled (not taken over by another worker, which carries on
		// with the override): the override goes too.
		if j, gerr := r.s.o.Store.GetPowerJob(context.WithoutCancel(ctx), r.j.Project, r.j.HostID, r.j.ID); gerr == nil && j.State == eim.PowerJobCancelled {
			r.log.Info("network-boot job cancelled"+r.clearAfterFailure(ctx), "job", r.j.ID)
		}
	}
	return err
}

// bootPower powers the machine on when it is off, resets it when it is on.
func (r *run) bootPower(ctx context.Context, st *eim.PowerStep) error {
	if st.Action == "" {
		var cur PowerState
		for {
			s, err := r.read(ctx)
			if err == nil {
				cur = s
				break
			}
			if permanent(err) {
				return fail("%v", err)
			}
			if err := r.late(); err != nil {
				return err
			}
			if err := r.renew(ctx); err != nil {
				return err
			}
			if err := r.wait(ctx, r.s.o.ConfirmEvery); err != nil {
				return err
			}
		}
		a := ActionReset
		if cur == PowerOff || cur == PowerPoweringOff {
			a = ActionOn
		}
		st.Action, st.Note = string(a), fmt.Sprintf("the BMC reported %s: %s", cur, strings.ToLower(string(a)))
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	return r.power(ctx, st)
}

// callHome waits until the node calls home after the power step's action
// (from when it was sent, so that a worker taking the job over does not
// wait afresh).
func (r *run) callHome(ctx context.Context, st *eim.PowerStep) error {
	base := r.j.CreatedAt.Time
	if r.j.Step > 0 {
		if prev := r.j.Steps[r.j.Step-1]; !prev.SentAt.IsZero() {
			base = prev.SentAt.Time
		}
	}
	timeout := r.s.o.CallHomeTimeout
	if st.TimeoutMs > 0 {
		timeout = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	until := base.Add(timeout)
	for {
		seen, what, err := r.s.calledHome(ctx, r.j.Project, r.j.HostID, base)
		if err != nil && eim.ErrorCode(err) == eim.ENOTFOUND {
			return fail("host: %v", err)
		}
		if err != nil {
			r.j.LastError = "looking for the node's call-home: " + err.Error()
		}
		if err == nil && seen {
			st.Done, st.Note = true, what
			r.log.Info("the node called home after the network boot", "job", r.j.ID, "seen", what, "after", time.Since(base).Round(time.Second))
			return nil
		}
		if err := r.renew(ctx); err != nil {
			return err
		}
		if err := r.late(); err != nil {
			return err
		}
		if !time.Now().Before(until) {
			return fail("the node did not call home within %s of the power action (does it boot from the network, and reach EIM's boot URL?)", timeout)
		}
		if err := r.wait(ctx, min(r.s.o.ConfirmEvery, time.Until(until))); err != nil {
			return err
		}
	}
}

// calledHome reports whether the host's node called home after base: its
// onboarding status (the micro-OS's device discovery) or its instance's
// provisioning status (the micro-OS's workflow, the installed OS's report)
// written since. Timestamps are in seconds: only a later second counts,
// so that a write made with the request (a reprovisioning's status) is
// not taken for the node.
func (s *Service) calledHome(ctx context.Context, project, hostID string, base time.Time) (bool, string, error) {
	after := uint64(base.Unix())
	h, err := s.host(ctx, project, hostID)
	if err != nil {
		return false, "", err
	}
	if h.OnboardingStatusTimestamp > after {
		return true, fmt.Sprintf("the node called home: onboarding status %q", h.OnboardingStatus), nil
	}
	in, err := s.instanceOf(ctx, project, hostID)
	if err != nil {
		return false, "", err
	}
	if in != nil && in.ProvisioningStatusTimestamp > after {
		return true, fmt.Sprintf("the node called home: provisioning status %q", in.ProvisioningStatus), nil
	}
	return false, "", nil
}

// clearAfterFailure clears a network-boot job's override when the job
// fails after setting it, and says how that went.
func (r *run) clearAfterFailure(ctx context.Context) string {
	if r.conn == nil {
		return ""
	}
	if IsMediaBoot(r.j) {
		return r.undoMedia(ctx) // vmedia.go: the image too
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return r.clearOverride(cctx)
}

// clearOverride clears the boot override, reads it back, and says how
// that went.
func (r *run) clearOverride(cctx context.Context) string {
	err := r.conn.SetBoot(cctx, Boot{Target: BootNone})
	if err == nil {
		var got Boot
		got, err = r.conn.Boot(cctx)
		if err == nil && got.Target != BootNone {
			err = fmt.Errorf("read back %s", got.Target)
		} else if KindOf(err) == Unsupported {
			err = nil
		}
	}
	if err != nil {
		return fmt.Sprintf("; the boot override was not cleared (%v)", err)
	}
	return "; the boot override was cleared"
}
