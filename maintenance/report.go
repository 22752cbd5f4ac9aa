package maintenance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	"github.com/eimhq/eim/southbound"
)

type reportStatus = maintenancev1.ReportUpdateStatusRequest_Status

// What each report makes of the instance's update status (the original's
// texts) and whether it opens or closes a run.
var reportEffects = map[reportStatus]struct {
	text  string
	ind   eim.StatusIndication
	opens bool // opens a run when none is open for the update
	ends  bool // closes the update's run
}{
	maintenancev1.ReportUpdateStatusRequest_STATUS_UP_TO_DATE:  {text: eim.UpdateStatusUpToDate, ind: eim.StatusIdle},
	maintenancev1.ReportUpdateStatusRequest_STATUS_STARTED:     {text: eim.UpdateStatusUpdating, ind: eim.StatusInProgress, opens: true},
	maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADING: {text: "Downloading artifacts", ind: eim.StatusInProgress, opens: true},
	maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADED:  {text: "Download complete", ind: eim.StatusInProgress, opens: true},
	maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED:     {text: eim.UpdateStatusDone, ind: eim.StatusIdle, opens: true, ends: true},
	maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED:      {text: eim.UpdateStatusFailed, ind: eim.StatusError, opens: true, ends: true},
}

var reUpdateID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// checkReport validates a report: every field comes from the network.
func checkReport(m *maintenancev1.ReportUpdateStatusRequest) error {
	if _, ok := reportEffects[m.Status]; !ok {
		return fmt.Errorf("status: %v is not a status a node reports", m.Status)
	}
	if !reUpdateID.MatchString(m.UpdateId) {
		return errors.New("update_id: want 1 to 40 characters from A-Z a-z 0-9 . _ -")
	}
	if m.PolicyId != "" && !eim.ValidID(eim.KindOSUpdatePolicy, m.PolicyId) {
		return fmt.Errorf("policy_id: %q is not an OS update policy ID", m.PolicyId)
	}
	if m.OsId != "" && !eim.ValidID(eim.KindOS, m.OsId) {
		return fmt.Errorf("os_id: %q is not an OS resource ID", m.OsId)
	}
	if m.OsId != "" && m.Status != maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED && m.Status != maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED &&
		m.Status != maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADING && m.Status != maintenancev1.ReportUpdateStatusRequest_STATUS_DOWNLOADED {
		return errors.New("os_id: only an image update's reports name an OS")
	}
	if len(m.Message) > 1024 || !utf8.ValidString(m.Message) {
		return errors.New("message: want at most 1,024 bytes of UTF-8")
	}
	if len(m.LogJson) > eim.MaxRunStatusDetails {
		return fmt.Errorf("log_json: %d bytes, at most %d allowed", len(m.LogJson), eim.MaxRunStatusDetails)
	}
	if m.LogJson != "" && !json.Valid([]byte(m.LogJson)) {
		return errors.New("log_json: not valid JSON")
	}
	return nil
}

// ReportUpdateStatus implements MaintenanceServiceHandler: the instance's
// update status follows the report, written only when it changes; the
// update's run is opened by its first report and closed by UPDATED or
// FAILED; UPDATED of an image update switches the instance to the OS it
// now runs. A report repeated (its answer was lost) changes nothing.
func (s *Service) ReportUpdateStatus(ctx context.Context, req *connect.Request[maintenancev1.ReportUpdateStatusRequest]) (*connect.Response[maintenancev1.ReportUpdateStatusResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	if err := checkReport(m); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	var instID string
	var switched bool
	err = s.store.Update(ctx, n.Project, func(tx eim.Tx) error {
		var err error
		instID, switched, err = s.record(ctx, tx, n, m)
		return err
	})
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "maintenance: report update status", err)
	}
	if switched {
		// The plan names the current OS: the next heartbeat must carry
		// its new version even before the feed says so.
		s.mu.Lock()
		if h, ok := s.instHost[instID]; ok {
			s.dropHostLocked(h, false)
		}
		s.mu.Unlock()
	}
	return connect.NewResponse(&maintenancev1.ReportUpdateStatusResponse{}), nil
}

func (s *Service) record(ctx context.Context, tx eim.Tx, n southbound.Node, m *maintenancev1.ReportUpdateStatusRequest) (instID string, switched bool, err error) {
	in, err := instanceOf(ctx, tx, n.HostID)
	if err != nil {
		return "", false, err
	}
	if in == nil {
		return "", false, eim.Errorf(eim.EPRECONDITION, "host %s has no instance to update", n.HostID)
	}
	now := uint64(s.now().Unix())
	eff := reportEffects[m.Status]
	text := eff.text
	if m.Status == maintenancev1.ReportUpdateStatusRequest_STATUS_FAILED && m.Message != "" {
		text = truncate(m.Message, 1024)
	}

	// The run of this update.
	if eff.opens {
		policy := m.PolicyId
		if policy == "" {
			policy = in.OSUpdatePolicyID
		}
		if policy != "" {
			if _, err := tx.Get(ctx, eim.KindOSUpdatePolicy, policy); eim.ErrorCode(err) == eim.ENOTFOUND {
				policy = "" // removed meanwhile: the run still records the update
			} else if err != nil {
				return "", false, err
			}
		}
		if err := s.recordRun(ctx, tx, in, m, policy, text, eff.ind, eff.ends, now); err != nil {
			return "", false, err
		}
	}

	// The instance. A repeated "still updating" is written too: its
	// timestamp says the node is alive (the host module holds its
	// liveness from it).
	if in.UpdateStatus != text || in.UpdateStatusIndicator != eff.ind || (eff.ind == eim.StatusInProgress && in.UpdateStatusTimestamp < now) {
		if err := inventory.SetUpdateStatus(ctx, tx, in, inventory.Status{Text: text, Indicator: eff.ind, Timestamp: now}); err != nil {
			return "", false, err
		}
	}
	if m.Status == maintenancev1.ReportUpdateStatusRequest_STATUS_UPDATED && m.OsId != "" && in.OSID != m.OsId {
		r, err := tx.Get(ctx, eim.KindOS, m.OsId)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return "", false, eim.Errorf(eim.EPRECONDITION, "os_id: OS %s is not in project %s", m.OsId, n.Project)
		}
		if err != nil {
			return "", false, err
		}
		if err := inventory.SwitchInstanceOS(ctx, tx, in, r.Base().ResourceID); err != nil {
			return "", false, err
		}
		switched = true
	}
	return in.ResourceID, switched, nil
}

// recordRun opens the update's run, or moves it on, or closes it.
func (s *Service) recordRun(ctx context.Context, tx eim.Tx, in *eim.Instance, m *maintenancev1.ReportUpdateStatusRequest, policy, text string, ind eim.StatusIndication, ends bool, now uint64) error {
	items, _, err := tx.List(ctx, eim.KindOSUpdateRun, eim.Query{
		Where: []eim.Cond{{Field: "instance_id", Value: in.ResourceID}, {Field: "name", Value: m.UpdateId}}, Limit: 1, NoTotal: true})
	if err != nil {
		return err
	}
	details := m.LogJson
	if len(items) == 0 {
		run := &eim.OSUpdateRun{Name: m.UpdateId, InstanceID: in.ResourceID, AppliedPolicyID: policy,
			Description: "OS update of " + in.ResourceID + " reported by its node",
			Status:      text, StatusIndicator: ind, StatusDetails: details, StatusTimestamp: now, StartTime: now}
		if ends {
			run.EndTime = now
		}
		return inventory.CreateOSUpdateRun(ctx, tx, run, s.now())
	}
	run := items[0].(*eim.OSUpdateRun)
	if !run.Open() {
		return nil // a repeated last report
	}
	run.Status, run.StatusIndicator, run.StatusTimestamp = text, ind, now
	if details != "" {
		run.StatusDetails = details
	}
	if ends {
		run.EndTime = now
	}
	return inventory.UpdateOSUpdateRun(ctx, tx, run)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
