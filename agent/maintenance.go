package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"

	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/window"
)

// The node's maintenance: the heartbeat loop keeps its plan (windows and
// update policy) current, and a loop of its own, every MaintenanceCheck,
// decides from the plan alone — the server may be down — whether an OS
// update is due and a window for it open, carries it out with the
// Updaters, and reports how it goes. What it must not forget across a
// restart or the update's own reboot (the plan, the update under way, the
// reports not yet delivered, what was applied) is kept in
// StateDir/maintenance.json.

// maintenanceFile is the name of the maintenance state in StateDir.
const maintenanceFile = "maintenance.json"

// maxUpdateLog is the most of an update's log that is reported (the
// server keeps up to 100,000 bytes of JSON); the tail is kept.
const maxUpdateLog = 64 << 10

type status = maintenancev1.ReportUpdateStatusRequest_Status

// maintState is what the maintenance loop keeps in the state directory.
type maintState struct {
	// Plan is the last plan from the server (protojson), nil when none.
	Plan json.RawMessage `json:"plan,omitempty"`
	// Applied is the digest of the last mutable update applied.
	Applied string `json:"applied,omitempty"`
	// UpToDate is the plan version for which UP_TO_DATE (or UPDATED) was
	// reported: a completed update stays "Update completed" until the
	// plan changes.
	UpToDate string `json:"upToDate,omitempty"`
	// Failed is the plan version whose update failed, and until when
	// (Unix seconds: the window's end, or an hour) it is not tried again.
	Failed      string `json:"failed,omitempty"`
	FailedUntil int64  `json:"failedUntil,omitempty"`
	// Pending is the update under way, nil when none.
	Pending *pendingUpdate `json:"pending,omitempty"`
	// Reports are not yet delivered, oldest first.
	Reports []maintReport `json:"reports,omitempty"`
}

type pendingUpdate struct {
	ID       string `json:"id"`
	PolicyID string `json:"policyId"`
	// Immutable: the OS being installed and the slot written.
	TargetOSID string `json:"targetOsId,omitempty"`
	Slot       string `json:"slot,omitempty"`
	// Mutable: the digest of the update; Rebooting: it was applied and the
	// node reboots to finish it.
	Digest    string    `json:"digest,omitempty"`
	Rebooting bool      `json:"rebooting,omitempty"`
	BootID    string    `json:"bootId"`
	Started   time.Time `json:"started"`
	// Plan is the version of the plan the update applies; RetryAfter when
	// it may be tried again if it fails (Unix seconds).
	Plan       string `json:"plan,omitempty"`
	RetryAfter int64  `json:"retryAfter,omitempty"`
}

type maintReport struct {
	Status   int32  `json:"status"`
	UpdateID string `json:"updateId"`
	PolicyID string `json:"policyId,omitempty"`
	Message  string `json:"message,omitempty"`
	Log      string `json:"log,omitempty"`
	OSID     string `json:"osId,omitempty"`
}

// maintenance is a Node's maintenance state, shared by the heartbeat loop
// (which replaces the plan) and the maintenance loop.
type maintenance struct {
	mu       sync.Mutex
	path     string // "" keeps it in memory
	st       maintState
	plan     *maintenancev1.GetPlanResponse
	retry    retrier
	notUntil time.Time
	off      atomic.Bool   // the server has no maintenance service
	changed  chan struct{} // the plan changed: check at once
}

func loadMaintenance(dir string) (*maintenance, error) {
	m := &maintenance{changed: make(chan struct{}, 1)}
	if dir == "" {
		return m, nil
	}
	m.path = filepath.Join(dir, maintenanceFile)
	b, err := os.ReadFile(m.path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("maintenance state: %w", err)
	}
	if err := json.Unmarshal(b, &m.st); err != nil {
		// A damaged file loses the plan (fetched again) and what was
		// applied (applied again, which is harmless); keep going.
		m.st = maintState{}
		return m, nil
	}
	if len(m.st.Plan) > 0 {
		p := &maintenancev1.GetPlanResponse{}
		if protojson.Unmarshal(m.st.Plan, p) == nil {
			m.plan = p
		}
	}
	return m, nil
}

// save writes the state; m.mu is held.
func (m *maintenance) save() error {
	if m.path == "" {
		return nil
	}
	b, err := json.Marshal(&m.st)
	if err != nil {
		return err
	}
	return writeFileAtomic(m.path, b, 0o600, 0o700)
}

func (m *maintenance) version() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.plan.GetVersion()
}

// setPlan replaces the plan and wakes the maintenance loop.
func (m *maintenance) setPlan(p *maintenancev1.GetPlanResponse) error {
	b, err := protojson.Marshal(p)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.plan, m.st.Plan = p, b
	err = m.save()
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return err
}

// maintenancePlan fetches the plan when a heartbeat's answer names a
// version the node does not have. A failure is logged and retried with
// back-off; the heartbeat goes on.
func (n *Node) maintenancePlan(ctx context.Context, version string) {
	m := n.maint
	if m == nil || version == "" || m.off.Load() {
		return
	}
	now := n.now()
	if version == m.version() || now.Before(m.notUntil) {
		return
	}
	resp, err := n.mc.GetPlan(ctx, connect.NewRequest(&maintenancev1.GetPlanRequest{Version: m.version()}))
	if connect.CodeOf(err) == connect.CodeUnimplemented {
		m.off.Store(true)
		n.log().Info("the server has no maintenance service: no OS updates")
		return
	}
	if err == nil && !resp.Msg.Unchanged {
		err = m.setPlan(resp.Msg)
	}
	if err != nil {
		d := m.retry.next(err)
		m.notUntil = now.Add(d)
		n.log().Warn("maintenance plan not updated", "err", err, "retry_in", d)
		return
	}
	m.retry.reset()
	m.notUntil = time.Time{}
	if !resp.Msg.Unchanged {
		n.log().Info("maintenance plan updated", "version", resp.Msg.Version, "windows", len(resp.Msg.Windows),
			"policy", resp.Msg.GetPolicy().GetId())
	}
}

// runMaintenance is the maintenance loop: a check at start, then every
// MaintenanceCheck and whenever the plan changes, until ctx ends.
func (n *Node) runMaintenance(ctx context.Context) {
	every := n.MaintenanceCheck
	if every <= 0 {
		every = 20 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n.maintain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.maint.changed:
		}
	}
}

// maintain is one check: deliver what is pending, finish an update that
// spanned a reboot, start one that is due in an open window, or say the
// node is up to date.
func (n *Node) maintain(ctx context.Context) {
	m := n.maint
	if err := n.flushReports(ctx); err != nil {
		n.log().Warn("update reports not delivered; kept for the next check", "err", err)
	}
	m.mu.Lock()
	pending, plan := m.st.Pending, m.plan
	m.mu.Unlock()
	if pending != nil {
		n.resume(ctx, pending)
		return
	}
	if plan == nil || plan.Policy == nil {
		return
	}
	due, what, err := n.updateDue(plan)
	if err != nil {
		n.queueReport(ctx, maintReport{Status: int32(maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED),
			UpdateID: newUpdateID(n.now()), PolicyID: plan.Policy.Id, Message: truncate(err.Error(), 1000)})
		m.mu.Lock()
		m.st.UpToDate = plan.Version // do not report the same refusal at every check
		m.save()
		m.mu.Unlock()
		return
	}
	if !due {
		m.mu.Lock()
		done := m.st.UpToDate == plan.Version
		m.mu.Unlock()
		if !done {
			n.queueReport(ctx, maintReport{Status: int32(maintenancev1.ReportUpdateStatusRequest_STATUS_UP_TO_DATE),
				UpdateID: newUpdateID(n.now()), PolicyID: plan.Policy.Id, Message: what})
			m.mu.Lock()
			m.st.UpToDate = plan.Version
			m.save()
			m.mu.Unlock()
		}
		return
	}
	open, closes, id := updateWindow(plan.Windows, n.now())
	if !open {
		return
	}
	m.mu.Lock()
	failed := m.st.Failed == plan.Version && n.now().Unix() < m.st.FailedUntil
	m.mu.Unlock()
	if failed {
		return // once per window: a failing update is not retried at every check
	}
	n.log().Info("a maintenance window is open: updating", "schedule", id, "closes", closes, "update", what)
	n.update(ctx, plan, closes)
}

// updateDue reports whether the plan's policy asks for an update the node
// has not had, and what it is.
func (n *Node) updateDue(plan *maintenancev1.GetPlanResponse) (bool, string, error) {
	p := plan.Policy
	if plan.GetCurrentOs().GetType() == maintenancev1.OperatingSystem_TYPE_IMMUTABLE {
		t := p.GetTargetOs()
		if t == nil || t.Id == plan.GetCurrentOs().GetId() {
			return false, "the node runs the policy's OS", nil
		}
		if n.Updaters.Immutable == nil {
			return false, "", errors.New("this node cannot install OS images (no A/B layout)")
		}
		return true, fmt.Sprintf("install %s %s", t.Name, t.Version), nil
	}
	if p.Kind != maintenancev1.UpdatePolicy_KIND_TARGET {
		return false, "", errors.New("a LATEST policy applies to image-based OSes only; this node's OS is package-based")
	}
	if n.Updaters.Mutable == nil {
		return false, "", errors.New("this node cannot apply package updates (no package manager)")
	}
	if _, err := mutableUpdate(p); err != nil {
		return false, "", err
	}
	n.maint.mu.Lock()
	applied := n.maint.st.Applied
	n.maint.mu.Unlock()
	if applied == mutableDigest(p) {
		return false, "the policy's packages are applied", nil
	}
	return true, "apply the policy's sources, packages and kernel command line", nil
}

// updateWindow reports whether an OS update window of ws is open at now,
// when it closes, and which schedule it is.
func updateWindow(ws []*maintenancev1.Window, now time.Time) (bool, time.Time, string) {
	t := now.Unix()
	for _, w := range ws {
		if w.Purpose != maintenancev1.Window_PURPOSE_OS_UPDATE {
			continue
		}
		var open bool
		var closes int64
		switch x := w.When.(type) {
		case *maintenancev1.Window_Single:
			open, closes = window.Single{Start: x.Single.StartSeconds, End: x.Single.EndSeconds}.OpenAt(t)
		case *maintenancev1.Window_Repeated:
			r := x.Repeated
			open, closes = window.Repeated{Duration: r.DurationSeconds, Minutes: r.Minutes, Hours: r.Hours,
				DayOfMonth: r.DayOfMonth, Month: r.Month, DayOfWeek: r.DayOfWeek}.OpenAt(t)
		}
		if open {
			var c time.Time
			if closes > 0 {
				c = time.Unix(closes, 0).UTC()
			}
			return true, c, w.ScheduleId
		}
	}
	return false, time.Time{}, ""
}

// mutableDigest identifies what a mutable update applies.
func mutableDigest(p *maintenancev1.UpdatePolicy) string {
	h := sha256.New()
	for _, s := range p.GetSources() {
		fmt.Fprintf(h, "s%d:%s\n", len(s), s)
	}
	fmt.Fprintf(h, "p%d:%s\nk%d:%s\n", len(p.GetPackages()), p.GetPackages(), len(p.GetKernelCommand()), p.GetKernelCommand())
	return hex.EncodeToString(h.Sum(nil))
}

func newUpdateID(now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("upd-%d-%x", now.Unix(), b)
}

// update carries out the plan's update.
func (n *Node) update(ctx context.Context, plan *maintenancev1.GetPlanResponse, closes time.Time) {
	m := n.maint
	p := plan.Policy
	pu := &pendingUpdate{ID: newUpdateID(n.now()), PolicyID: p.Id, BootID: n.BootID, Started: n.now().UTC(), Plan: plan.Version}
	if closes.IsZero() {
		pu.RetryAfter = n.now().Add(time.Hour).Unix()
	} else {
		pu.RetryAfter = closes.Unix()
	}
	immutable := plan.GetCurrentOs().GetType() == maintenancev1.OperatingSystem_TYPE_IMMUTABLE
	if immutable {
		pu.TargetOSID = p.GetTargetOs().GetId()
	} else {
		pu.Digest = mutableDigest(p)
	}
	m.mu.Lock()
	m.st.Pending = pu
	err := m.save()
	m.mu.Unlock()
	if err != nil {
		n.log().Error("cannot record the update; not starting it", "err", err)
		return
	}
	var log bytes.Buffer
	report := func(s status, msg string) {
		n.queueReport(ctx, maintReport{Status: int32(s), UpdateID: pu.ID, PolicyID: pu.PolicyID, Message: msg,
			Log: updateLog(pu, log.String()), OSID: pu.TargetOSID})
	}
	if immutable {
		t := p.GetTargetOs()
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADING, "Downloading "+t.Name+" "+t.Version)
		slot, err := n.Updaters.Immutable.Install(ctx, Image{URL: t.ImageUrl, Sha256: t.ImageSha256, CACertPEM: n.Config.CACertPEM}, &log)
		if err != nil {
			n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "Update failed: "+truncate(err.Error(), 900), log.String(), "")
			return
		}
		m.mu.Lock()
		pu.Slot = slot
		m.save()
		m.mu.Unlock()
		report(maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADED, "Image written to slot "+slot+"; rebooting into it")
		n.flushReports(ctx)
		n.rebootForUpdate(ctx, pu, &log)
		return
	}
	report(maintenancev1.ReportUpdateStatusRequest_STATUS_STARTED, "Applying the update policy")
	n.flushReports(ctx)
	u, _ := mutableUpdate(p) // checked by updateDue
	reboot, err := n.Updaters.Mutable.Apply(ctx, u, &log)
	if err != nil {
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "Update failed: "+truncate(err.Error(), 900), log.String(), "")
		return
	}
	if !reboot {
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, "Update completed", log.String(), "")
		return
	}
	m.mu.Lock()
	pu.Rebooting = true
	m.save()
	m.mu.Unlock()
	n.rebootForUpdate(ctx, pu, &log)
}

// rebootForUpdate reboots the node to finish an update; the check after
// the reboot reports the outcome.
func (n *Node) rebootForUpdate(ctx context.Context, pu *pendingUpdate, log *bytes.Buffer) {
	if n.Actions == nil {
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED,
			"Update failed: it needs a reboot and this agent cannot reboot the node", log.String(), "")
		return
	}
	n.log().Info("rebooting to finish an OS update", "update", pu.ID)
	if err := n.Actions.Reboot(ctx); err != nil {
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "Update failed: reboot: "+truncate(err.Error(), 900), log.String(), "")
	}
}

// resume finishes an update found under way: after the reboot that
// completes it, or after the agent stopped in the middle of it.
func (n *Node) resume(ctx context.Context, pu *pendingUpdate) {
	rebooted := pu.BootID != n.BootID
	switch {
	case pu.TargetOSID != "" && pu.Slot != "":
		if !rebooted {
			// The reboot did not happen (yet): ask again.
			n.rebootForUpdate(ctx, pu, &bytes.Buffer{})
			return
		}
		booted, err := n.Updaters.Immutable.Booted()
		switch {
		case err != nil:
			n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "Update failed: "+truncate(err.Error(), 900), "", "")
		case booted != pu.Slot:
			n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED,
				fmt.Sprintf("Update failed: the new image in slot %s did not boot; the node runs slot %s, its previous OS", pu.Slot, booted), "", "")
		default:
			if err := n.Updaters.Immutable.Commit(ctx, booted); err != nil {
				n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED, "Update failed: "+truncate(err.Error(), 900), "", "")
				return
			}
			n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, "Update completed: running slot "+booted, "", pu.TargetOSID)
		}
	case pu.Rebooting && rebooted:
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED, "Update completed", "", "")
	case pu.Rebooting:
		n.rebootForUpdate(ctx, pu, &bytes.Buffer{})
	default:
		n.finish(ctx, pu, maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED,
			"Update failed: the agent stopped while it ran; it runs again in the next window", "", "")
	}
}

// finish ends the update under way with its last report.
func (n *Node) finish(ctx context.Context, pu *pendingUpdate, s status, msg, log, osID string) {
	m := n.maint
	m.mu.Lock()
	if s == maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED && pu.Digest != "" {
		m.st.Applied = pu.Digest
	}
	m.st.Pending = nil
	m.st.UpToDate = ""
	switch s {
	case maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED:
		m.st.UpToDate = pu.Plan
	case maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED:
		m.st.Failed, m.st.FailedUntil = pu.Plan, pu.RetryAfter
	}
	r := maintReport{Status: int32(s), UpdateID: pu.ID, PolicyID: pu.PolicyID, Message: msg, OSID: osID}
	if log != "" {
		// After a reboot there is no output: the run keeps the log the
		// earlier reports carried.
		r.Log = updateLog(pu, log)
	}
	m.st.Reports = append(m.st.Reports, r)
	if err := m.save(); err != nil {
		n.log().Error("cannot record the end of an update", "err", err)
	}
	m.mu.Unlock()
	n.log().Info("OS update ended", "update", pu.ID, "status", s.String(), "message", msg)
	n.flushReports(ctx)
}

// updateLog is the JSON log of an update: its identity and the tail of
// its output.
func updateLog(pu *pendingUpdate, out string) string {
	if len(out) > maxUpdateLog {
		out = "…" + strings.ToValidUTF8(out[len(out)-maxUpdateLog:], "")
	}
	b, _ := json.Marshal(struct {
		UpdateID string `json:"updateId"`
		Started  string `json:"started"`
		Output   string `json:"output,omitempty"`
	}{pu.ID, pu.Started.Format(time.RFC3339), out})
	return string(b)
}

// queueReport keeps a report and tries to deliver what is queued.
func (n *Node) queueReport(ctx context.Context, r maintReport) {
	m := n.maint
	m.mu.Lock()
	m.st.Reports = append(m.st.Reports, r)
	if err := m.save(); err != nil {
		n.log().Warn("cannot keep an update report", "err", err)
	}
	m.mu.Unlock()
	if err := n.flushReports(ctx); err != nil {
		n.log().Warn("update report not delivered; kept for the next check", "err", err)
	}
}

// flushReports delivers the queued reports in order.
func (n *Node) flushReports(ctx context.Context) error {
	m := n.maint
	for {
		m.mu.Lock()
		if len(m.st.Reports) == 0 || m.off.Load() {
			m.mu.Unlock()
			return nil
		}
		r := m.st.Reports[0]
		m.mu.Unlock()
		_, err := n.mc.ReportUpdateStatus(ctx, connect.NewRequest(&maintenancev1.ReportUpdateStatusRequest{
			Status: status(r.Status), UpdateId: r.UpdateID, PolicyId: r.PolicyID, Message: r.Message, LogJson: r.Log, OsId: r.OSID,
		}))
		if code := connect.CodeOf(err); err != nil && code != connect.CodeInvalidArgument && code != connect.CodeFailedPrecondition && code != connect.CodeNotFound {
			return err
		} else if err != nil {
			// Refused for good (e.g. the policy was removed meanwhile):
			// retrying cannot help.
			n.log().Warn("update report refused; dropped", "status", status(r.Status).String(), "err", err)
		}
		m.mu.Lock()
		if len(m.st.Reports) > 0 && m.st.Reports[0] == r {
			m.st.Reports = m.st.Reports[1:]
		}
		m.save()
		m.mu.Unlock()
	}
}
