package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/inventory"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/southbound"
)

// nodeState is what the workflow rules read about a node.
type nodeState struct {
	host     *eim.Host
	instance *eim.Instance // nil: none yet
	workflow *eim.Workflow // nil: none yet (or one of an older instance)
	// secureBoot is the node's Secure Boot state, as its GetWorkflow
	// reported it.
	secureBoot provisioningv1.SecureBootState
	// tpm says whether the node has a TPM 2.0, as its measured boot
	// reported it.
	tpm provisioningv1.MeasuredBoot_Tpm
	// attest is the check of the measured boot the node reported with
	// it; attested false when it reported none.
	attest   verdict
	attested bool
}

// load reads the node's instance and workflow in tx (scoped to the node's
// project), and its host unless the caller does without it (a report needs
// the host only at the last action: see hostOf).
func (s *Service) load(ctx context.Context, tx eim.Tx, n southbound.Node, withHost bool) (*nodeState, error) {
	st := &nodeState{}
	if withHost {
		if err := st.loadHost(ctx, tx, n); err != nil {
			return nil, err
		}
	}
	in, err := s.instanceOf(ctx, tx, n.HostID)
	if err != nil || in == nil {
		return st, err
	}
	st.instance = in
	// The workflow's ID is derived from the instance's: one primary-key
	// read on every call of every node.
	r, err := tx.Get(ctx, eim.KindWorkflow, workflowID(in.ResourceID))
	switch {
	case err == nil:
		st.workflow = r.(*eim.Workflow)
	case eim.ErrorCode(err) != eim.ENOTFOUND:
		return nil, fmt.Errorf("find workflow of %s: %w", in.ResourceID, err)
	}
	return st, nil
}

// loadHost reads the node's host into st.
func (st *nodeState) loadHost(ctx context.Context, tx eim.Tx, n southbound.Node) error {
	r, err := tx.Get(ctx, eim.KindHost, n.HostID)
	if err != nil {
		return err
	}
	h := r.(*eim.Host)
	if h.Project != n.Project {
		return eim.Errorf(eim.ENOTFOUND, "host %s not found", n.HostID)
	}
	st.host = h
	return nil
}

// instanceOf returns the instance of the host, or nil. The service
// remembers each host's instance ID: a primary-key read confirms it (a
// host has at most one instance, so a remembered instance that still
// exists and names the host is the one), and only a miss lists by host.
func (s *Service) instanceOf(ctx context.Context, tx eim.Tx, hostID string) (*eim.Instance, error) {
	if id, ok := s.instances.Load(hostID); ok {
		r, err := tx.Get(ctx, eim.KindInstance, id.(string))
		switch {
		case err == nil && r.(*eim.Instance).HostID == hostID:
			return r.(*eim.Instance), nil
		case err != nil && eim.ErrorCode(err) != eim.ENOTFOUND:
			return nil, fmt.Errorf("find instance of %s: %w", hostID, err)
		}
		s.instances.Delete(hostID)
	}
	items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hostID}}, Limit: 1, NoTotal: true})
	if err != nil {
		return nil, fmt.Errorf("find instance of %s: %w", hostID, err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	in := items[0].(*eim.Instance)
	s.instances.Store(hostID, in.ResourceID)
	return in, nil
}

// workflowID is the ID of the workflow of the instance with the ID: the same
// hex digits, so that a node's workflow is found by its primary key.
func workflowID(instanceID string) string {
	return string(eim.KindWorkflow) + "-" + strings.TrimPrefix(instanceID, string(eim.KindInstance)+"-")
}

// parked reports whether the instance must not be provisioned now.
func parked(in *eim.Instance) bool { return parkedState(in.DesiredState) }

// parkedState reports whether an instance desired in state d must not be
// provisioned now.
func parkedState(d eim.InstanceState) bool {
	return d == eim.InstanceStateDeleted || d == eim.InstanceStateUntrusted
}

// GetWorkflow implements provisioningv1connect.ProvisioningServiceHandler.
func (s *Service) GetWorkflow(ctx context.Context, req *connect.Request[provisioningv1.GetWorkflowRequest]) (*connect.Response[provisioningv1.GetWorkflowResponse], error) {
	n, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	var st *nodeState
	// The node's Secure Boot state is recorded on its host (when it
	// changed, or the recorded one is getting old: inventory.SecureBootDue).
	sbState, sbAt := southbound.SecureBootState(req.Msg.GetSecureBoot()), uint64(s.now().Unix())
	if !s.direct {
		err = s.store.View(ctx, n.Project, func(tx eim.Tx) error {
			st, err = s.load(ctx, tx, n, true)
			return err
		})
		if err != nil {
			return nil, s.rpcError(ctx, "get workflow", err)
		}
		if resp := answer(st); resp != nil {
			if inventory.SecureBootDue(st.host, sbState, sbAt) {
				if err := s.batch.DoIn(ctx, n.Project, func(tx eim.Tx) error {
					var hs nodeState
					if err := hs.loadHost(ctx, tx, n); err != nil {
						return err
					}
					return inventory.RecordSecureBoot(ctx, tx, hs.host, sbState, sbAt)
				}); err != nil {
					return nil, s.rpcError(ctx, "record the secure boot state", err)
				}
			}
			resp.MeasuredBootLater = true
			return s.respond(n, req.Msg, resp), nil
		}
	}
	// The measured boot is checked outside the write transaction (the
	// first check after a boot artifact changed hashes it; the quote's
	// key is pinned, and its nonce used, in a transaction of its own).
	v, attested, reask, err := s.attestation(ctx, n, req.Msg)
	if err != nil {
		return nil, s.rpcError(ctx, "attest", err)
	}
	// No workflow yet (or, with concurrent writers, not looked for yet): render and
	// create it in the write transaction, which reads again and answers
	// with the workflow it finds, whether it was there or another call of
	// the same node won the race. With concurrent writers (PostgreSQL at
	// READ COMMITTED, two batch workers) both calls may find none and
	// the later insert conflicts: that call reads again, once, and
	// answers with the winner's workflow.
	// The agent withheld its measured boot (an earlier answer said the
	// server did not need it): asked for, before the workflow is created.
	withheld := req.Msg.GetMeasuredBootWithheld() && req.Msg.GetMeasuredBoot() == nil
	ask := false
	create := func(tx eim.Tx) error {
		var err error
		st, err = s.load(ctx, tx, n, true)
		if err != nil {
			return err
		}
		if err := inventory.RecordSecureBoot(ctx, tx, st.host, sbState, sbAt); err != nil {
			return err
		}
		if ask = false; answer(st) != nil {
			return nil
		}
		if withheld || reask {
			// Asked for the measured boot, or for it quoted over the
			// nonce of this answer.
			ask = true
			return nil
		}
		st.secureBoot = req.Msg.GetSecureBoot()
		st.tpm = req.Msg.GetMeasuredBoot().GetTpm()
		st.attest, st.attested = v, attested
		st.workflow, err = s.create(ctx, tx, st)
		return err
	}
	err = s.batch.DoIn(ctx, n.Project, create)
	if eim.ErrorCode(err) == eim.ECONFLICT {
		err = s.batch.DoIn(ctx, n.Project, create)
	}
	if err != nil {
		return nil, s.rpcError(ctx, "create workflow", err)
	}
	if ask {
		msg := "the workflow is created with the node's measured boot: send it"
		if !withheld {
			msg = "the workflow is created with the node's measured boot quoted by its TPM over the nonce of this answer: send it"
		}
		return s.respond(n, req.Msg, &provisioningv1.GetWorkflowResponse{
			Disposition:      provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT,
			PollAfterSeconds: 1,
			Message:          msg,
		}), nil
	}
	resp := answer(st)
	if resp == nil {
		return nil, s.rpcError(ctx, "create workflow", errors.New("workflow not created"))
	}
	resp.MeasuredBootLater = true
	return s.respond(n, req.Msg, resp), nil
}

// respond is the answer resp, with a fresh attestation nonce for an agent
// that quotes its measured boot, wrapped for its TPM's keys: it quotes
// over the nonce of the answer before the request that carries its
// measurements. Only an answer that asks for the measured boot (without
// measured_boot_later) has one: after the others the agent sends none, and
// a node waiting for its instance costs no key agreement per poll. Keys
// that are not a TPM's EK and AK get none (the attestation says so).
func (s *Service) respond(n southbound.Node, req *provisioningv1.GetWorkflowRequest, resp *provisioningv1.GetWorkflowResponse) *connect.Response[provisioningv1.GetWorkflowResponse] {
	if req.GetQuotes() && req.GetTpmKeys() != nil && !resp.MeasuredBootLater {
		keys := tpmKeys(req)
		if name := keysName(keys); name != "" {
			blob, enc, err := tpmquote.Challenge(keys, s.nonces.issue(n.Project, n.HostID, name))
			if err == nil {
				resp.AttestationChallenge = &provisioningv1.AttestationChallenge{CredentialBlob: blob, EncryptedSecret: enc}
			}
		}
	}
	return connect.NewResponse(resp)
}

// answer is the reply to GetWorkflow for st, or nil when a workflow must be
// created first.
func answer(st *nodeState) *provisioningv1.GetWorkflowResponse {
	in, wf := st.instance, st.workflow
	switch {
	case in == nil:
		return &provisioningv1.GetWorkflowResponse{
			Disposition:      provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT,
			PollAfterSeconds: waitPoll,
			Message:          "no instance on this host yet; waiting for one",
		}
	case parked(in):
		return &provisioningv1.GetWorkflowResponse{
			Disposition:      provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT,
			PollAfterSeconds: waitPoll,
			Message:          fmt.Sprintf("instance %s is %s", in.ResourceID, in.DesiredState),
		}
	case wf == nil && in.CurrentState == eim.InstanceStateRunning:
		return &provisioningv1.GetWorkflowResponse{
			Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE,
			Message:     fmt.Sprintf("instance %s is running", in.ResourceID),
		}
	case wf == nil:
		return nil
	}
	switch wf.State {
	case eim.WorkflowSucceeded:
		return &provisioningv1.GetWorkflowResponse{
			Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_DONE,
			Workflow:    toProto(wf),
			Message:     "provisioned",
		}
	case eim.WorkflowFailed:
		return &provisioningv1.GetWorkflowResponse{
			Disposition:      provisioningv1.GetWorkflowResponse_DISPOSITION_FAILED,
			Workflow:         toProto(wf),
			PollAfterSeconds: failedPoll,
			Message:          wf.Message,
		}
	}
	return &provisioningv1.GetWorkflowResponse{
		Disposition: provisioningv1.GetWorkflowResponse_DISPOSITION_RUN,
		Workflow:    toProto(wf),
	}
}

// create renders and stores attempt 1 of the instance's workflow, and sets
// the instance's provisioning status. An OS profile that cannot be
// installed gives a FAILED workflow that says why.
func (s *Service) create(ctx context.Context, tx eim.Tx, st *nodeState) (*eim.Workflow, error) {
	now := eim.NewTime(s.now())
	in := st.instance
	wf := &eim.Workflow{
		Meta:       eim.Meta{Project: in.Project, ResourceID: workflowID(in.ResourceID)},
		InstanceID: in.ResourceID,
		HostID:     st.host.ResourceID,
		Attempt:    1,
		State:      eim.WorkflowPending,
		StartedAt:  now,
	}
	input, err := s.renderInput(ctx, tx, st)
	if err == nil {
		wf.Actions, err = s.render(input)
	}
	refused := "" // the host's status when the node is refused
	if err == nil {
		if err = checkSecureBoot(in, st.secureBoot); err != nil {
			refused = SecureBootMismatch
		} else if err = checkTPM(in, st.tpm); err != nil {
			refused = NoTPMForFDE
		}
	}
	if st.attested {
		msg := "measured boot: " + st.attest.text
		if st.attest.verified && st.attest.compared != "" {
			msg += " (" + st.attest.compared + ")"
		}
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Action: -1, Message: msg})
	}
	if err != nil {
		if eim.ErrorCode(err) != eim.EINVALID && eim.ErrorCode(err) != eim.ENOTFOUND {
			return nil, err
		}
		wf.State, wf.FinishedAt = eim.WorkflowFailed, now
		wf.Message = eim.ErrorMessage(err)
		what := "cannot render the workflow: "
		if refused != "" {
			what = "refused: "
		}
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Action: -1, Message: what + wf.Message})
		setProvisioning(in, "Provisioning Failed: "+wf.Message, eim.StatusError, now)
	} else {
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Action: -1,
			Message: fmt.Sprintf("workflow created: %d actions, OS %s", len(wf.Actions), input.OS.ResourceID)})
		setProvisioning(in, inProgress(wf, 0), eim.StatusInProgress, now)
	}
	if err := inventory.CreateWorkflow(ctx, tx, wf); err != nil {
		return nil, fmt.Errorf("create workflow: %w", err)
	}
	if err := inventory.SetProvisioningStatus(ctx, tx, in, provisioningStatus(in)); err != nil {
		return nil, fmt.Errorf("update instance: %w", err)
	}
	if refused != "" {
		// As the original's onboarding: the host shows the mismatch too.
		if err := inventory.SetHostStatus(ctx, tx, st.host, inventory.StatusAt(refused, eim.StatusError, now.Time)); err != nil {
			return nil, fmt.Errorf("update host: %w", err)
		}
	}
	if st.attested {
		// The measurements of the boot that asked for the workflow. A
		// retried workflow (Reprovision) keeps them: not checked again.
		as := st.attest.status(in, now.Time)
		if err := inventory.SetAttestationStatus(ctx, tx, in, as); err != nil {
			return nil, fmt.Errorf("update instance: %w", err)
		}
		if as.Indicator == eim.StatusError {
			s.log.Warn("provisioning: measured boot not verified", "project", in.Project, "instance", in.ResourceID, "attestation", st.attest.text)
		}
	}
	if wf.State == eim.WorkflowFailed {
		s.log.Warn("provisioning: workflow failed", "project", in.Project, "instance", in.ResourceID, "reason", wf.Message)
	}
	return wf, nil
}

// renderInput reads what the workflow of st's instance is rendered from.
// A missing OS, account or config is ENOTFOUND, which fails the workflow.
func (s *Service) renderInput(ctx context.Context, tx eim.Tx, st *nodeState) (renderInput, error) {
	in := st.instance
	ri := renderInput{Instance: in, Host: st.host}
	if in.OSID == "" {
		return ri, eim.Errorf(eim.EINVALID, "instance %s has no OS", in.ResourceID)
	}
	r, err := getIn(ctx, tx, in.Project, eim.KindOS, in.OSID)
	if err != nil {
		return ri, err
	}
	ri.OS = r.(*eim.OS)
	if in.LocalAccountID != "" {
		r, err := getIn(ctx, tx, in.Project, eim.KindLocalAccount, in.LocalAccountID)
		if err != nil {
			return ri, err
		}
		ri.Account = r.(*eim.LocalAccount)
	}
	if len(in.CustomConfigIDs) > 0 {
		items, err := tx.GetMany(ctx, eim.KindCustomConfig, in.CustomConfigIDs)
		if err != nil {
			return ri, fmt.Errorf("read custom configs: %w", err)
		}
		byID := map[string]*eim.CustomConfig{}
		for _, it := range items {
			if it.Base().Project == in.Project {
				byID[it.Base().ResourceID] = it.(*eim.CustomConfig)
			}
		}
		// In the instance's order: cloud-init merges parts in order.
		for _, id := range in.CustomConfigIDs {
			c, ok := byID[id]
			if !ok {
				return ri, eim.Errorf(eim.ENOTFOUND, "custom config %s of instance %s not found", id, in.ResourceID)
			}
			ri.CustomConfigs = append(ri.CustomConfigs, c)
		}
	}
	return ri, nil
}

// getIn reads a resource of the project in a possibly unscoped tx.
func getIn(ctx context.Context, tx eim.Tx, project string, k eim.Kind, id string) (eim.Resource, error) {
	r, err := tx.Get(ctx, k, id)
	if err == nil && r.Base().Project != project {
		err = eim.Errorf(eim.ENOTFOUND, "%s not found", id)
	}
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, eim.Errorf(eim.ENOTFOUND, "%s %s not found", k, id)
	}
	return r, err
}

// resumeFrom is the index of the first action that has not succeeded.
func resumeFrom(wf *eim.Workflow) int {
	for i, a := range wf.Actions {
		if a.State != eim.ActionSucceeded {
			return i
		}
	}
	return len(wf.Actions)
}

// step names action i for statuses: "3/7 stream-image".
func step(wf *eim.Workflow, i int) string {
	return fmt.Sprintf("%d/%d %s", i+1, len(wf.Actions), wf.Actions[i].Name)
}

func inProgress(wf *eim.Workflow, i int) string {
	return "Provisioning In Progress: " + step(wf, i)
}

// setProvisioning sets the instance's provisioning status (in memory:
// the caller writes it with provisioningStatus).
func setProvisioning(in *eim.Instance, text string, ind eim.StatusIndication, now eim.Time) {
	in.ProvisioningStatus, in.ProvisioningStatusIndicator = text, ind
	in.ProvisioningStatusTimestamp = uint64(now.Unix())
}

// provisioningStatus is the provisioning status in holds.
func provisioningStatus(in *eim.Instance) inventory.Status {
	return inventory.Status{Text: in.ProvisioningStatus, Indicator: in.ProvisioningStatusIndicator, Timestamp: in.ProvisioningStatusTimestamp}
}

// maxReports is the most reports one ReportActions call carries.
const maxReports = 32

// checkReport validates a report's fields before any is applied.
func checkReport(m *provisioningv1.ReportActionRequest) error {
	switch {
	case m == nil:
		return errors.New("missing")
	case len(m.GetOutput()) > maxOutput:
		return fmt.Errorf("output: %d bytes, at most %d per report", len(m.GetOutput()), maxOutput)
	case len(m.GetMessage()) > 4096:
		return errors.New("message: longer than 4096 bytes")
	case m.GetState() == provisioningv1.ActionState_ACTION_STATE_UNSPECIFIED:
		return errors.New("state: required")
	case m.GetState() > provisioningv1.ActionState_ACTION_STATE_FAILED:
		return fmt.Errorf("state: unknown value %d", m.GetState())
	case !eim.ValidID(eim.KindWorkflow, m.GetWorkflowId()):
		return fmt.Errorf("workflow_id: %q is not a workflow ID", m.GetWorkflowId())
	}
	return nil
}

// ReportAction implements provisioningv1connect.ProvisioningServiceHandler.
func (s *Service) ReportAction(ctx context.Context, req *connect.Request[provisioningv1.ReportActionRequest]) (*connect.Response[provisioningv1.ReportActionResponse], error) {
	cancel, err := s.report(ctx, []*provisioningv1.ReportActionRequest{req.Msg}, "")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&provisioningv1.ReportActionResponse{Cancel: cancel}), nil
}

// ReportActions implements provisioningv1connect.ProvisioningServiceHandler.
func (s *Service) ReportActions(ctx context.Context, req *connect.Request[provisioningv1.ReportActionsRequest]) (*connect.Response[provisioningv1.ReportActionsResponse], error) {
	ms := req.Msg.GetReports()
	switch {
	case len(ms) == 0:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("reports: at least one is required"))
	case len(ms) > maxReports:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("reports: %d, at most %d per call", len(ms), maxReports))
	}
	cancel, err := s.report(ctx, ms, "reports")
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&provisioningv1.ReportActionsResponse{Cancel: cancel}), nil
}

// report applies ms in order in one batched transaction, writing each
// changed row once, through the store's typed operation
// (eim.NodeReports.RecordActions: the host's status and the instance's
// states are read as a few columns, the workflow whole). field names the
// list in errors ("" for a lone report). cancel is true when a report
// found its attempt superseded; the reports after it are not applied.
func (s *Service) report(ctx context.Context, ms []*provisioningv1.ReportActionRequest, field string) (cancel bool, err error) {
	n, err := s.caller(ctx)
	if err != nil {
		return false, err
	}
	where := func(i int) string {
		if field == "" {
			return ""
		}
		return fmt.Sprintf("%s[%d]: ", field, i)
	}
	for i, m := range ms {
		if err := checkReport(m); err != nil {
			return false, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("%s%w", where(i), err))
		}
	}
	now := eim.NewTime(s.now())
	var failed *eim.Workflow
	err = s.reports.RecordActions(ctx, n.Project, n.HostID, func(st eim.NodeState) (eim.NodeChange, error) {
		cancel, failed = false, nil
		var ch eim.NodeChange
		for i, m := range ms {
			c, f, err := s.apply(st, n, m, &ch, now)
			if err != nil {
				if code := eim.ErrorCode(err); field != "" && code != eim.EINTERNAL {
					return ch, eim.Errorf(code, "%s%s", where(i), eim.ErrorMessage(err))
				}
				return ch, err
			}
			if f != nil {
				failed = f
			}
			if c {
				cancel = true
				break
			}
		}
		return ch, nil
	})
	if err != nil {
		return false, s.rpcError(ctx, "report action", err)
	}
	if failed != nil {
		s.log.Info("provisioning: workflow failed", "project", n.Project, "instance", failed.InstanceID, "reason", failed.Message)
	}
	return cancel, nil
}

// apply records report m, made by node n, on st's workflow (read whole,
// changed in place) and sets in ch what to write: the workflow, the
// instance's provisioning status, the host's status at the end. It
// returns cancel when the report is of a superseded or finished run, and
// the workflow when this report failed it.
func (s *Service) apply(st eim.NodeState, n southbound.Node, m *provisioningv1.ReportActionRequest, ch *eim.NodeChange, now eim.Time) (cancel bool, failed *eim.Workflow, err error) {
	gen := n.Gen
	wf, in := st.Workflow, st.Instance
	if wf == nil || in == nil || wf.ResourceID != m.WorkflowId || int(m.Attempt) != wf.Attempt || parkedState(in.DesiredState) {
		return true, nil, nil
	}
	i := int(m.Index)
	if i >= len(wf.Actions) {
		return false, nil, eim.Errorf(eim.EINVALID, "index: %d is out of range (the workflow has %d actions)", i, len(wf.Actions))
	}
	next := resumeFrom(wf)
	a := &wf.Actions[i]
	if i < next { // already succeeded: a repeated or late report
		if m.State == provisioningv1.ActionState_ACTION_STATE_FAILED {
			return false, nil, eim.Errorf(eim.EINVALID, "action %s already succeeded", step(wf, i))
		}
		return false, nil, nil
	}
	if wf.State == eim.WorkflowFailed {
		return true, nil, nil
	}
	if i > next {
		return false, nil, eim.Errorf(eim.EINVALID, "action %s reported before %s succeeded", step(wf, i), step(wf, next))
	}
	provisioning := func(text string, ind eim.StatusIndication) {
		ch.Provisioning = &eim.StatusValue{Text: text, Indicator: ind, Timestamp: uint64(now.Unix())}
	}
	transition := func(to eim.ActionState, msg string) {
		a.State, a.Message = to, msg
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: wf.Attempt, Action: i, Name: a.Name, State: to, Message: msg})
	}
	// The node rebooted and runs the action again (it discovered again, so
	// its credentials are newer than those that started the action): the
	// timeout starts over, and so does the output's offset.
	restarted := m.State == provisioningv1.ActionState_ACTION_STATE_RUNNING && a.State == eim.ActionRunning &&
		a.StartGen != 0 && gen > a.StartGen
	if restarted {
		a.StartedAt, a.StartGen, a.OutputBytes = now, gen, 0
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: wf.Attempt, Action: i, Name: a.Name, State: eim.ActionRunning,
			Message: fmt.Sprintf("restarted by the node (it rebooted and discovered again); the %ds timeout starts over", a.TimeoutSeconds)})
	}
	if out := newOutput(a, m); len(out) > 0 {
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: wf.Attempt, Action: i, Name: a.Name, Output: string(out)})
	} else if m.State == provisioningv1.ActionState_ACTION_STATE_RUNNING && a.State == eim.ActionRunning && !restarted {
		return false, nil, nil // a repeated RUNNING, or output recorded already: nothing to record
	}
	switch m.State {
	case provisioningv1.ActionState_ACTION_STATE_RUNNING:
		if a.State != eim.ActionRunning {
			a.StartedAt, a.FinishedAt, a.StartGen = now, eim.Time{}, gen
			transition(eim.ActionRunning, m.Message)
			wf.State = eim.WorkflowRunning
			provisioning(inProgress(wf, i), eim.StatusInProgress)
		}
	case provisioningv1.ActionState_ACTION_STATE_SUCCEEDED:
		if a.StartedAt.IsZero() {
			a.StartedAt = now
		}
		a.FinishedAt, a.ExitCode = now, int(m.ExitCode)
		transition(eim.ActionSucceeded, m.Message)
		if i == len(wf.Actions)-1 {
			wf.State, wf.FinishedAt = eim.WorkflowSucceeded, now
			appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: wf.Attempt, Action: -1, Message: "workflow succeeded"})
			provisioning("Provisioned", eim.StatusIdle)
			ch.HostStatus = &eim.StatusValue{Text: "Rebooting", Indicator: eim.StatusInProgress, Timestamp: uint64(now.Unix())}
		} else {
			wf.State = eim.WorkflowRunning
			provisioning(inProgress(wf, i+1), eim.StatusInProgress)
		}
	case provisioningv1.ActionState_ACTION_STATE_FAILED:
		msg := m.Message
		if msg == "" {
			msg = fmt.Sprintf("failed with exit code %d", m.ExitCode)
		}
		if a.StartedAt.IsZero() {
			a.StartedAt = now
		}
		a.FinishedAt, a.ExitCode = now, int(m.ExitCode)
		transition(eim.ActionFailed, msg)
		provisioning(s.failWorkflow(wf, i, msg, now), eim.StatusError)
		failed = wf
	}
	ch.Workflow = wf
	return false, failed, nil
}

// newOutput returns the part of m's output that action a has not recorded
// yet, and moves a.OutputBytes to the end of m's output in the agent's
// count. A report retried after its answer was lost starts at an offset
// below what was recorded: that prefix is dropped. Offset 0 is recorded
// whole, as before offsets existed: it is every report of an agent that
// does not count, and the first output of one that does.
func newOutput(a *eim.WorkflowAction, m *provisioningv1.ReportActionRequest) []byte {
	out, off := m.Output, m.OutputOffset
	if off > 0 && off < a.OutputBytes {
		out = out[min(a.OutputBytes-off, uint64(len(out))):]
	}
	a.OutputBytes = max(a.OutputBytes, off+uint64(len(m.Output)))
	return out
}

// fail ends wf with action i's failure msg and sets the instance's status.
func (s *Service) fail(wf *eim.Workflow, in *eim.Instance, i int, msg string, now eim.Time) {
	setProvisioning(in, s.failWorkflow(wf, i, msg, now), eim.StatusError, now)
}

// failWorkflow ends wf with action i's failure msg and returns the
// instance's provisioning status text that says so.
func (s *Service) failWorkflow(wf *eim.Workflow, i int, msg string, now eim.Time) string {
	wf.State, wf.FinishedAt = eim.WorkflowFailed, now
	wf.Message = wf.Actions[i].Name + ": " + msg
	appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: wf.Attempt, Action: -1, Message: "workflow failed: " + wf.Message})
	return "Provisioning Failed: " + step(wf, i) + ": " + msg
}

// toProto converts a stored workflow to the southbound message.
func toProto(wf *eim.Workflow) *provisioningv1.Workflow {
	out := &provisioningv1.Workflow{
		Id:         wf.ResourceID,
		Attempt:    uint32(wf.Attempt),
		ResumeFrom: uint32(resumeFrom(wf)),
		Actions:    make([]*provisioningv1.Action, len(wf.Actions)),
	}
	for i, a := range wf.Actions {
		pa := &provisioningv1.Action{Index: uint32(i), Name: a.Name, TimeoutSeconds: uint32(a.TimeoutSeconds)}
		p := a.Params
		switch a.Type {
		case eim.ActionEraseDisk:
			pa.Spec = &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{Device: p["device"]}}
		case eim.ActionStreamImage:
			pa.Spec = &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{
				Url: p["url"], Sha256: p["sha256"], Device: p["device"], Compression: p["compression"], CaCertPem: p["caCertPem"],
			}}
		case eim.ActionWriteFile:
			pa.Spec = &provisioningv1.Action_WriteFile{WriteFile: &provisioningv1.WriteFile{
				Device: p["device"], Partition: parseUint(p["partition"], 10), Path: p["path"],
				Content: []byte(p["content"]), Mode: parseUint(p["mode"], 8),
			}}
		case eim.ActionWriteAgentConfig:
			pa.Spec = &provisioningv1.Action_WriteAgentConfig{WriteAgentConfig: &provisioningv1.WriteAgentConfig{
				Device: p["device"], Partition: parseUint(p["partition"], 10), Path: p["path"],
			}}
		case eim.ActionEncryptRoot:
			pa.Spec = &provisioningv1.Action_EncryptRoot{EncryptRoot: &provisioningv1.EncryptRoot{
				Device: p["device"], Partition: parseUint(p["partition"], 10), Pcrs: parseUints(p["pcrs"]), Label: p["label"],
			}}
		case eim.ActionSetBootOrder:
			pa.Spec = &provisioningv1.Action_SetBootOrder{SetBootOrder: &provisioningv1.SetBootOrder{Device: p["device"], Label: p["label"]}}
		case eim.ActionReboot:
			pa.Spec = &provisioningv1.Action_Reboot{Reboot: &provisioningv1.Reboot{}}
		}
		out.Actions[i] = pa
	}
	return out
}

// parseUint parses a stored numeric parameter ("" is 0).
func parseUint(s string, base int) uint32 {
	v, _ := strconv.ParseUint(s, base, 32)
	return uint32(v)
}

// parseUints parses a stored list of numbers ("7,11").
func parseUints(s string) []uint32 {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, parseUint(f, 10))
		}
	}
	return out
}
