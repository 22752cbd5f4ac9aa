package oob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// Power jobs: a host's power change through its BMC, as steps recorded in
// the store (eim.PowerJob). A worker claims a job under a lease, and for
// each step from the recorded one acts, then reads the BMC's state until it
// is what was asked ("confirm, then resend"): an action the BMC dropped is
// sent again, at most MaxSends times; "already in that state" is a success
// once a read confirms it; every job ends by its deadline. A step is
// recorded as sent before it is sent, so that a worker taking over the
// job of a process that died confirms a reset or power cycle from the
// BMC's state rather than sending it a second time.

// Plan returns the steps that carry out desired; boot, when set, is a
// one-time (or persistent) boot override set first (only with ON, RESET
// or POWER_CYCLE: "set one-time boot to PXE, then power on" is how
// provisioning starts a registered machine).
func Plan(desired eim.PowerState, boot *Boot, graceful time.Duration) ([]eim.PowerStep, error) {
	var steps []eim.PowerStep
	power := func(a Action, timeout time.Duration) {
		steps = append(steps, eim.PowerStep{Kind: eim.PowerStepPower, Action: string(a), TimeoutMs: timeout.Milliseconds()})
	}
	if boot != nil && boot.Target != "" && boot.Target != BootNone {
		switch desired {
		case eim.PowerStateOn, eim.PowerStateReset, eim.PowerStateResetRepeat, eim.PowerStatePowerCycle:
		default:
			return nil, eim.Errorf(eim.EINVALID, "boot: a boot override goes with ON, RESET or POWER_CYCLE, not %s", desired)
		}
		steps = append(steps, eim.PowerStep{Kind: eim.PowerStepSetBoot, Boot: string(boot.Target), Once: boot.Once})
	}
	switch desired {
	case eim.PowerStateOn:
		power(ActionOn, 0)
	case eim.PowerStateOff:
		power(ActionGracefulOff, graceful)
		power(ActionForceOff, 0)
	case eim.PowerStateReset, eim.PowerStateResetRepeat:
		power(ActionReset, 0)
	case eim.PowerStatePowerCycle:
		power(ActionPowerCycle, 0)
	case eim.PowerStateSleep:
		power(ActionSleep, 0)
	case eim.PowerStateHibernate:
		power(ActionHibernate, 0)
	default:
		return nil, eim.Errorf(eim.EINVALID, "desiredPowerState: %q is not a power state a BMC can be asked for", desired)
	}
	return steps, nil
}

// target is the power state that confirms action a.
func target(a Action) PowerState {
	switch a {
	case ActionGracefulOff, ActionForceOff:
		return PowerOff
	case ActionSleep:
		return PowerSleep
	case ActionHibernate:
		return PowerHibernate
	}
	return PowerOn
}

// repeatable reports whether sending a twice does no more than once.
func repeatable(a Action) bool { return a != ActionReset && a != ActionPowerCycle }

// permanent reports whether a driver's failure will not change by trying
// again.
func permanent(err error) bool {
	switch KindOf(err) {
	case BadCredentials, BadCertificate, Unsupported, Ambiguous:
		return true
	}
	return false
}

// errLost: the job is no longer this worker's (its lease was taken over,
// or it was cancelled); the worker drops it.
var errLost = errors.New("power job lost")

// run is one worker's go at one job.
type run struct {
	s    *Service
	j    *eim.PowerJob
	conn Conn
	site string
	log  *slog.Logger
	// sent: this worker sent the current step's action.
	sent bool
}

// save records the job's progress and renews its lease.
func (r *run) save(ctx context.Context) error {
	err := r.s.o.Store.SavePowerJob(ctx, r.j, r.s.o.Lease)
	if eim.ErrorCode(err) == eim.ECONFLICT {
		return errLost
	}
	return err
}

// renew saves when half the lease has gone.
func (r *run) renew(ctx context.Context) error {
	if time.Until(r.j.LeaseUntil.Time) > r.s.o.Lease/2 {
		return nil
	}
	return r.save(ctx)
}

// wait pauses for d, or less when ctx ends or the deadline comes.
func (r *run) wait(ctx context.Context, d time.Duration) error {
	if left := time.Until(r.j.Deadline.Time); left < d {
		d = max(left, 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// failure ends a job as FAILED with why.
type failure struct{ why string }

func (f *failure) Error() string { return f.why }

func fail(format string, a ...any) error { return &failure{why: fmt.Sprintf(format, a...)} }

// late returns a failure once the job's deadline has passed.
func (r *run) late() error {
	if time.Now().Before(r.j.Deadline.Time) {
		return nil
	}
	why := "deadline passed"
	if r.j.LastError != "" {
		why += ": " + r.j.LastError
	}
	return &failure{why: why}
}

// read reads the power state, recording a failure as the job's last error.
func (r *run) read(ctx context.Context) (PowerState, error) {
	st, err := r.conn.PowerState(ctx)
	r.s.reached(ctx, r.j.Project, r.j.HostID, err)
	if err != nil {
		r.j.LastError = err.Error()
	}
	return st, err
}

// confirm reads the power state until it is want, for up to d. It
// returns what it read last and whether it was want; a failed read that
// will not change ends the job.
func (r *run) confirm(ctx context.Context, want PowerState, d time.Duration) (PowerState, bool, error) {
	until := time.Now().Add(d)
	var last PowerState
	for {
		st, err := r.read(ctx)
		if err == nil {
			last = st
			if st == want {
				return st, true, nil
			}
		} else if permanent(err) {
			return last, false, fail("%v", err)
		}
		if err := r.renew(ctx); err != nil {
			return last, false, err
		}
		if err := r.late(); err != nil {
			return last, false, err
		}
		if !time.Now().Before(until) {
			return last, false, nil
		}
		if err := r.wait(ctx, min(r.s.o.ConfirmEvery, time.Until(until))); err != nil {
			return last, false, err
		}
	}
}

// confirmCycle confirms a power cycle: the machine seen off, then on.
// A BMC whose off is too short to be seen between reads reports only on:
// at the end of the wait, on counts as done (noted on the step) rather
// than being cycled a second time.
func (r *run) confirmCycle(ctx context.Context, st *eim.PowerStep, d time.Duration) (PowerState, bool, error) {
	until := time.Now().Add(d)
	var last PowerState
	sawOff := false
	for {
		s, err := r.read(ctx)
		if err == nil {
			last = s
			if s == PowerOff {
				sawOff = true
			} else if s == PowerOn && sawOff {
				return s, true, nil
			}
		} else if permanent(err) {
			return last, false, fail("%v", err)
		}
		if err := r.renew(ctx); err != nil {
			return last, false, err
		}
		if err := r.late(); err != nil {
			return last, false, err
		}
		if !time.Now().Before(until) {
			if last == PowerOn {
				if st.Note != "" {
					st.Note += "; "
				}
				st.Note += "no off seen between reads: counted done on the BMC's on"
				return last, true, nil
			}
			return last, false, nil
		}
		if err := r.wait(ctx, min(r.s.o.ConfirmEvery, time.Until(until))); err != nil {
			return last, false, err
		}
	}
}

// power carries out a POWER step.
func (r *run) power(ctx context.Context, st *eim.PowerStep) error {
	a := Action(st.Action)
	want := target(a)
	timeout := r.s.o.ConfirmTimeout
	if st.TimeoutMs > 0 {
		timeout = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	// A repeatable action whose state is already there needs no sending.
	if repeatable(a) && st.Sends == 0 {
		if cur, err := r.read(ctx); err == nil && cur == want {
			st.Done, st.Note = true, fmt.Sprintf("already %s: nothing sent", want)
			return nil
		} else if err != nil && permanent(err) {
			return fail("%v", err)
		}
	}
	// A reset or power cycle of a host whose agent is connected is
	// confirmed by the agent reporting a new boot (a plain POWER step;
	// a network-boot job waits for the node calling home instead).
	byBoot := st.Kind == eim.PowerStepPower && !repeatable(a)
	if byBoot && st.Sends == 0 {
		st.BootID = r.s.bootOf(ctx, r.j.Project, r.j.HostID)
	}
	// An action recorded as sent by a worker that stopped may have gone
	// out: confirm it from the BMC's state first, and send it again only
	// when the state is not there by then (a reset or power cycle never
	// twice; a power-on not again, nor through another site slot).
	// A power cycle taken over finds the machine anywhere in the cycle:
	// off is its middle, not a cycle that failed. It is awaited (on, or
	// a new boot), and the machine powered on only when it stays off
	// past a confirmation wait: never cycled a second time.
	resumed := false
	if a == ActionPowerCycle && st.Sends > 0 && !r.sent {
		on, err := r.resumeCycle(ctx, st, timeout)
		if err != nil || on {
			st.Done = err == nil
			return err
		}
		a, st.Action, resumed = ActionOn, string(ActionOn), true
		st.Note = note(st.Note, fmt.Sprintf("power cycle recorded as sent before a take-over: the machine stayed off for %s: powered on", timeout))
	}
	if !resumed && byBoot && st.BootID != "" && st.Sends > 0 && !r.sent {
		if err := r.confirmBoot(ctx, st); err != nil {
			return err
		}
		st.Done = true
		return nil
	}
	if !resumed && st.Sends > 0 && !r.sent {
		if _, ok, err := r.confirm(ctx, want, timeout); err != nil {
			return err
		} else if ok {
			st.Done, st.Note = true, fmt.Sprintf("%s recorded as sent before a take-over: confirmed from the BMC's state (%s), not sent again", a, want)
			return nil
		}
	}
	for {
		if err := r.late(); err != nil {
			return err
		}
		if st.Sends >= r.s.o.MaxSends {
			return fail("%s not confirmed after %d sends: %s", a, st.Sends, r.j.LastError)
		}
		var sl *slot
		if a == ActionOn || a == ActionPowerCycle {
			var err error
			if sl, err = r.s.siteSlot(ctx, r, st.Sends); err != nil {
				return err
			}
		}
		st.Sends++
		st.SentAt = eim.NewTime(time.Now())
		if err := r.save(ctx); err != nil {
			return err
		}
		// The slot again, now, for a window: the save may have outlasted
		// it, and the window counts from the send.
		for {
			ok, err := r.s.holdSlot(ctx, sl)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if sl, err = r.s.siteSlot(ctx, r, st.Sends-1); err != nil {
				return err
			}
		}
		r.sent = true
		err := r.conn.Power(ctx, a)
		if _, herr := r.s.holdSlot(ctx, sl); herr != nil {
			r.log.Info("power-on slot not held after the send", "err", herr)
		}
		r.s.reached(ctx, r.j.Project, r.j.HostID, err)
		switch {
		case err == nil:
		case KindOf(err) == AlreadyInState:
			r.j.LastError = err.Error()
		case a == ActionGracefulOff && KindOf(err) == Unsupported:
			st.Skipped, st.Note = true, "graceful shutdown not supported: forcing off"
			return nil
		case a == ActionReset && KindOf(err) == Unsupported:
			// A BMC without a reset control (ipmi_sim driving a VM
			// process) resets by a power cycle: the step becomes one.
			a, st.Action = ActionPowerCycle, string(ActionPowerCycle)
			st.Note = "the BMC refused a reset (" + err.Error() + "): power cycled instead"
			r.j.LastError = err.Error()
			continue
		case permanent(err):
			return fail("%v", err)
		default:
			// Unreachable, busy, failed: maybe not sent; read, then resend.
			r.j.LastError = err.Error()
		}
		if byBoot && st.BootID != "" && (err == nil || KindOf(err) == AlreadyInState) {
			if err := r.confirmBoot(ctx, st); err != nil {
				return err
			}
			st.Done = true
			return nil
		}
		var last PowerState
		var ok bool
		var cerr error
		if a == ActionPowerCycle {
			last, ok, cerr = r.confirmCycle(ctx, st, timeout)
		} else {
			last, ok, cerr = r.confirm(ctx, want, timeout)
		}
		if cerr != nil {
			return cerr
		}
		if ok {
			st.Done = true
			if KindOf(err) == AlreadyInState {
				st.Note = fmt.Sprintf("the BMC answered already in that state; read back %s", want)
			}
			return nil
		}
		if a == ActionGracefulOff {
			st.Skipped, st.Note = true, fmt.Sprintf("not off within %s of a graceful shutdown: forcing off", timeout)
			return nil
		}
		if a == ActionPowerCycle && last == PowerOff {
			// The cycle's off happened and its on did not (a chassis
			// whose power-on failed): power on rather than cycle an off
			// machine again, which some BMCs ignore.
			a, st.Action = ActionOn, string(ActionOn)
			st.Note = note(st.Note, fmt.Sprintf("the power cycle left the machine off for %s: powered on", timeout))
			continue
		}
		if err == nil {
			r.j.LastError = fmt.Sprintf("%s sent, the BMC still reports %s after %s", a, orUnknown(last), timeout)
		}
		r.log.Info("power action not confirmed: sending it again", "job", r.j.ID, "action", string(a), "sends", st.Sends, "state", string(last))
	}
}

func orUnknown(s PowerState) string {
	if s == "" {
		return "nothing readable"
	}
	return string(s)
}

// setBoot carries out a SET_BOOT step: set, then read back.
func (r *run) setBoot(ctx context.Context, st *eim.PowerStep) error {
	want := r.bootOf(st)
	for {
		if err := r.late(); err != nil {
			return err
		}
		if st.Sends >= r.s.o.MaxSends {
			return fail("boot override %s not read back after %d sets: %s", want.Target, st.Sends, r.j.LastError)
		}
		st.Sends++
		st.SentAt = eim.NewTime(time.Now())
		if err := r.save(ctx); err != nil {
			return err
		}
		err := r.conn.SetBoot(ctx, want)
		r.s.reached(ctx, r.j.Project, r.j.HostID, err)
		if err != nil {
			if permanent(err) {
				return fail("%v", err)
			}
			r.j.LastError = err.Error()
			if err := r.wait(ctx, r.s.o.ConfirmEvery); err != nil {
				return err
			}
			continue
		}
		got, err := r.conn.Boot(ctx)
		switch {
		case KindOf(err) == Unsupported:
			st.Done, st.Note = true, "set; the BMC does not read the override back"
			return nil
		case err != nil:
			r.j.LastError = err.Error()
		case got.Target == want.Target:
			st.Done = true
			if want.Once && !got.Once {
				st.Note = "the BMC reads the override back as for every boot (Continuous), not once"
			}
			return nil
		default:
			r.j.LastError = fmt.Sprintf("boot override set to %s, read back %s", want.Target, got.Target)
		}
	}
}

// step carries out the job's current step.
func (r *run) step(ctx context.Context) error {
	st := &r.j.Steps[r.j.Step]
	r.sent = false
	switch st.Kind {
	case eim.PowerStepPower:
		return r.power(ctx, st)
	case eim.PowerStepSetBoot:
		if IsMediaBoot(r.j) {
			return r.mediaStep(ctx, st) // vmedia.go: undone on failure
		}
		return r.setBoot(ctx, st)
	case StepBootPower, StepCallHome, StepClearBoot:
		return r.netbootStep(ctx, st)
	case StepInsertMedia, StepEjectMedia:
		return r.mediaStep(ctx, st)
	}
	return fail("step %d: unknown kind %q", r.j.Step, st.Kind)
}

// work carries a claimed job to its end, or until it is lost or ctx ends
// (the job then stays RUNNING under a lease that runs out, for another
// worker to take over).
func (s *Service) work(ctx context.Context, j *eim.PowerJob) {
	log := s.log.With("job", j.ID, "project", j.Project, "host", j.HostID)
	r := &run{s: s, j: j, log: log}
	err := s.runJob(ctx, r)
	var f *failure
	switch {
	case err == nil:
		j.State, j.EndedAt = eim.PowerJobSucceeded, eim.NewTime(time.Now())
		j.LastError = ""
		log.Info("power job succeeded", "desired", string(j.Desired), "attempts", j.Attempts)
	case errors.As(err, &f):
		j.State, j.EndedAt, j.LastError = eim.PowerJobFailed, eim.NewTime(time.Now()), f.why
		log.Warn("power job failed", "desired", string(j.Desired), "reason", f.why)
	case errors.Is(err, errLost):
		log.Info("power job no longer ours (taken over or cancelled)")
		return
	default:
		if ctx.Err() == nil {
			log.Warn("power job interrupted", "err", err)
		}
		return
	}
	// The end is recorded on a context of its own: a stopping process
	// still records what it knows. The host first, so that a job seen
	// ended has its host showing it.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.recordEnd(ectx, r, err)
	if r.conn != nil {
		_ = r.conn.Close()
	}
	if err := r.save(ectx); err != nil {
		log.Info("power job's end not recorded", "err", err)
	}
}

// runJob opens the BMC and carries out the steps from the recorded one.
func (s *Service) runJob(ctx context.Context, r *run) error {
	j := r.j
	if j.Attempts == 1 {
		// The deadline counts from when a worker first takes the job
		// up, not from its creation: a job that waited behind others
		// (a site switched on at once, more jobs than workers) has its
		// whole time.
		j.Deadline = eim.NewTime(time.Now().Add(j.Deadline.Sub(j.CreatedAt.Time)))
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	if err := r.late(); err != nil {
		return err
	}
	h, err := s.host(ctx, j.Project, j.HostID)
	if err != nil {
		return fail("host: %v", err)
	}
	r.site = h.SiteID
	b, err := s.o.Store.GetBMC(ctx, j.Project, j.HostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return fail("the host has no BMC")
	} else if err != nil {
		return err
	}
	if err := s.recordStart(ctx, j); err != nil {
		return err
	}
	conn, err := s.open(ctx, b)
	if err != nil {
		if permanent(err) {
			return fail("%v", err)
		}
		// Unreachable: the job stays with this worker, which tries again
		// until the deadline.
		for err != nil {
			j.LastError = err.Error()
			if err := r.save(ctx); err != nil {
				return err
			}
			if err := r.wait(ctx, s.o.ConfirmEvery); err != nil {
				return err
			}
			if err := r.late(); err != nil {
				return err
			}
			conn, err = s.open(ctx, b)
			if err != nil && permanent(err) {
				return fail("%v", err)
			}
		}
	}
	r.conn = conn
	for j.Step < len(j.Steps) {
		if err := r.step(ctx); err != nil {
			return err
		}
		j.Step++
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// open opens a session with b's BMC.
func (s *Service) open(ctx context.Context, b *eim.BMC) (Conn, error) {
	d := s.o.Drivers[b.Protocol]
	if d == nil {
		return nil, &Error{Kind: Unsupported, Op: "open", Detail: fmt.Sprintf("no %s driver in this server", b.Protocol)}
	}
	pw, err := s.o.Key.OpenText(b.SealedPassword, eim.BMCPasswordPurpose(b.Project, b.HostID))
	if err != nil {
		return nil, &Error{Kind: BadCredentials, Op: "open", Detail: "the stored password does not open under this server's secrets key"}
	}
	system := b.SystemID
	if b.Protocol == eim.BMCAMT {
		// An MPS knows a device by its AMT GUID: the host's UUID, as the
		// original's device manager used it.
		h, err := s.host(ctx, b.Project, b.HostID)
		if err != nil {
			return nil, err
		}
		if h.UUID == "" {
			return nil, &Error{Kind: Failed, Op: "open", Detail: "an AMT device is found by its host's UUID, and the host has none"}
		}
		system = h.UUID
	}
	conn, err := d.Open(ctx, Target{Protocol: string(b.Protocol), Address: b.Address, SystemID: system,
		Username: b.Username, Password: pw, CABundle: []byte(b.CACert), Insecure: b.Insecure})
	s.reached(ctx, b.Project, b.HostID, err)
	return conn, err
}

// Power statuses, as the original's device manager writes them.
func progressText(d eim.PowerState) string {
	switch d {
	case eim.PowerStateOn:
		return "Powering on"
	case eim.PowerStateOff:
		return "Powering off"
	case eim.PowerStateReset, eim.PowerStateResetRepeat:
		return "Resetting"
	case eim.PowerStatePowerCycle:
		return "Power cycling"
	case eim.PowerStateSleep:
		return "Sleeping"
	case eim.PowerStateHibernate:
		return "Hibernating"
	}
	return "Changing power"
}

func doneText(d eim.PowerState) string {
	switch d {
	case eim.PowerStateOn:
		return "Powered on"
	case eim.PowerStateOff:
		return "Powered off"
	case eim.PowerStateReset, eim.PowerStateResetRepeat:
		return "Reset successful"
	case eim.PowerStatePowerCycle:
		return "Power cycle successful"
	case eim.PowerStateSleep:
		return "Sleeping"
	case eim.PowerStateHibernate:
		return "Hibernating"
	}
	return "Power changed"
}

// MismatchText is the power status of a host whose BMC reports a state
// other than the one desired.
const MismatchText = eim.PowerStatusMismatch

// observed is the host's power state for a state the BMC reports (""
// for a transition).
func observed(st PowerState) eim.PowerState {
	switch st {
	case PowerOn:
		return eim.PowerStateOn
	case PowerOff:
		return eim.PowerStateOff
	case PowerSleep:
		return eim.PowerStateSleep
	case PowerHibernate:
		return eim.PowerStateHibernate
	}
	return ""
}

// recordStart shows the job's progress on its host.
func (s *Service) recordStart(ctx context.Context, j *eim.PowerJob) error {
	return s.writePower(ctx, j.Project, j.HostID, func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool) {
		return h.CurrentPowerState, progressText(j.Desired), eim.StatusInProgress, false
	})
}

// recordEnd shows the job's end on its host: what the BMC reports, never
// what was asked unless the BMC confirmed it.
func (s *Service) recordEnd(ctx context.Context, r *run, jobErr error) {
	j := r.j
	var st PowerState
	var readErr error = errors.New("no session")
	if r.conn != nil {
		st, readErr = r.conn.PowerState(ctx)
	}
	err := s.writePower(ctx, j.Project, j.HostID, func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool) {
		cur := h.CurrentPowerState
		if readErr == nil && observed(st) != "" {
			cur = observed(st)
		}
		if jobErr == nil {
			// The BMC confirmed the job's state; a reset or a cycle shows
			// as the state asked, as in the original.
			if cur == eim.PowerStateOn && (j.Desired == eim.PowerStateReset || j.Desired == eim.PowerStateResetRepeat || j.Desired == eim.PowerStatePowerCycle) {
				cur = j.Desired
			}
			stamp := j.Desired == eim.PowerStateOn || j.Desired == eim.PowerStateReset || j.Desired == eim.PowerStateResetRepeat
			return cur, doneText(j.Desired), eim.StatusIdle, stamp
		}
		return cur, progressText(j.Desired) + " failed: " + j.LastError, eim.StatusError, false
	})
	if err != nil {
		s.log.Warn("power job's end not shown on its host", "job", j.ID, "err", err)
	}
}

// writePower writes a host's power fields as fn decides from the host.
func (s *Service) writePower(ctx context.Context, project, hostID string, fn func(h *eim.Host) (eim.PowerState, string, eim.StatusIndication, bool)) error {
	return s.o.Store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, hostID)
		if err != nil {
			return err
		}
		h := r.(*eim.Host)
		cur, text, ind, stampOn := fn(h)
		if cur == "" {
			cur = eim.PowerStateUnspecified
		}
		if len(text) > 1000 {
			text = text[:1000]
		}
		text = strings.ToValidUTF8(text, "?")
		if cur == h.CurrentPowerState && text == h.PowerStatus && ind == h.PowerStatusIndicator && !stampOn {
			return nil
		}
		now := uint64(time.Now().Unix())
		var on uint64
		if stampOn {
			on = now
		}
		return inventory.RecordPower(ctx, tx, h, cur, inventory.Status{Text: text, Indicator: ind, Timestamp: now}, on)
	})
}

// host reads a host.
func (s *Service) host(ctx context.Context, project, id string) (*eim.Host, error) {
	var h *eim.Host
	err := s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		h = r.(*eim.Host)
		return nil
	})
	return h, err
}

// bootOf is the boot the host's node last reported, when its agent is
// connected ("" otherwise, or when the host cannot be read: the BMC's
// state then confirms a reset).
func (s *Service) bootOf(ctx context.Context, project, id string) string {
	h, err := s.host(ctx, project, id)
	if err != nil || h.HostStatus == noConnection {
		return ""
	}
	return h.BootID
}

// confirmBoot confirms a reset or power cycle sent to a host whose agent
// reported boot st.BootID before it: done when the agent reports another
// boot, within CallHomeTimeout of the send (the machine has to boot its
// OS). Not seen by then, or by the job's deadline, the BMC's ON counts
// as done, noted on the step: a reset is never sent twice.
func (r *run) confirmBoot(ctx context.Context, st *eim.PowerStep) error {
	until := st.SentAt.Add(r.s.o.CallHomeTimeout)
	if d := r.j.Deadline.Time; d.Before(until) {
		until = d
	}
	for {
		if b := r.s.bootOf(ctx, r.j.Project, r.j.HostID); b != "" && b != st.BootID {
			st.Note = note(st.Note, "a new boot reported by the host's agent")
			return nil
		}
		if !time.Now().Before(until) {
			break
		}
		if err := r.renew(ctx); err != nil {
			return err
		}
		if err := r.wait(ctx, min(r.s.o.ConfirmEvery, time.Until(until))); err != nil {
			return err
		}
	}
	st2, err := r.read(ctx)
	if err != nil && permanent(err) {
		return fail("%v", err)
	}
	if err == nil && st2 == PowerOn {
		st.Note = note(st.Note, fmt.Sprintf("no new boot reported by the host's agent within %s of the send: counted done on the BMC's %s",
			until.Sub(st.SentAt.Time).Round(time.Second), PowerOn))
		return nil
	}
	return fail("%s sent: no new boot reported by the host's agent, and the BMC reports %s", st.Action, orUnknown(st2))
}

// resumeCycle follows a power cycle that a worker which stopped recorded
// as sent: it reports true when the cycle is seen through (the host's
// agent reports a new boot, or, without one, the BMC reports the machine
// on), false when the machine stays off for off from now (its power-on
// is then due). Neither by the job's deadline: a failure. A machine
// reported on while a new boot is awaited is left to confirmBoot.
func (r *run) resumeCycle(ctx context.Context, st *eim.PowerStep, off time.Duration) (bool, error) {
	until := time.Now().Add(off)
	for {
		if st.BootID != "" {
			if b := r.s.bootOf(ctx, r.j.Project, r.j.HostID); b != "" && b != st.BootID {
				st.Note = note(st.Note, "power cycle recorded as sent before a take-over: a new boot reported by the host's agent")
				return true, nil
			}
		}
		s, err := r.read(ctx)
		switch {
		case err != nil && permanent(err):
			return false, fail("%v", err)
		case err == nil && s == PowerOn && st.BootID != "":
			if err := r.confirmBoot(ctx, st); err != nil {
				return false, err
			}
			return true, nil
		case err == nil && s == PowerOn:
			st.Note = note(st.Note, "power cycle recorded as sent before a take-over: confirmed from the BMC's state (on), not sent again")
			return true, nil
		case err == nil && s == PowerOff && !time.Now().Before(until):
			return false, nil
		case err == nil && s != PowerOff:
			until = time.Now().Add(off) // asleep, or in transition: not off yet
		}
		if err := r.renew(ctx); err != nil {
			return false, err
		}
		if err := r.late(); err != nil {
			return false, err
		}
		if err := r.wait(ctx, r.s.o.ConfirmEvery); err != nil {
			return false, err
		}
	}
}

func note(prev, n string) string {
	if prev == "" {
		return n
	}
	return prev + "; " + n
}
