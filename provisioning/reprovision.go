package provisioning

import (
	"context"
	"fmt"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// Reprovision starts a new attempt of the FAILED workflow of instance id
// in project, on behalf of subject (a user, for the log). The actions are
// rendered again from the instance's current OS profile, local account and
// custom configs, so a fixed image URL or checksum takes effect; every
// action is PENDING again, and the node, which polls its failed workflow,
// runs the new attempt from the first action. It returns the workflow as
// stored.
//
// A workflow that is not FAILED, an instance that is being deleted or
// invalidated, and an OS profile that still cannot be installed are
// EPRECONDITION errors that say why.
func (s *Service) Reprovision(ctx context.Context, project, id, subject string) (*eim.Workflow, error) {
	var wf *eim.Workflow
	err := s.store.Update(ctx, project, func(tx eim.Tx) error {
		wf = nil
		r, err := getIn(ctx, tx, project, eim.KindInstance, id)
		if err != nil {
			return err
		}
		in := r.(*eim.Instance)
		items, _, err := tx.List(ctx, eim.KindWorkflow, eim.Query{Where: []eim.Cond{{Field: "instanceId", Value: id}}, Limit: 1, NoTotal: true})
		if err != nil {
			return fmt.Errorf("find workflow of %s: %w", id, err)
		}
		if len(items) == 0 || items[0].Base().Project != project {
			return eim.Errorf(eim.EPRECONDITION, "instance %s has no provisioning workflow yet (its node has not asked for one); only a FAILED workflow can be retried", id)
		}
		w := items[0].(*eim.Workflow)
		if w.State != eim.WorkflowFailed {
			return eim.Errorf(eim.EPRECONDITION, "the workflow of instance %s is %s; only a %s workflow can be retried", id, w.State, eim.WorkflowFailed)
		}
		if parked(in) {
			return eim.Errorf(eim.EPRECONDITION, "instance %s is %s; it cannot be provisioned again", id, in.DesiredState)
		}
		r, err = getIn(ctx, tx, project, eim.KindHost, in.HostID)
		if err != nil {
			return err
		}
		st := &nodeState{host: r.(*eim.Host), instance: in, workflow: w}
		input, err := s.renderInput(ctx, tx, st)
		var actions []eim.WorkflowAction
		if err == nil {
			actions, err = s.render(input)
		}
		if err != nil {
			if c := eim.ErrorCode(err); c == eim.EINVALID || c == eim.ENOTFOUND {
				return eim.Errorf(eim.EPRECONDITION, "instance %s cannot be provisioned: %s", id, eim.ErrorMessage(err))
			}
			return err
		}
		now := eim.NewTime(s.now())
		w.Attempt++
		w.State, w.Message = eim.WorkflowPending, ""
		w.StartedAt, w.FinishedAt = now, eim.Time{}
		w.HostID = in.HostID
		w.Actions = actions
		if subject == "" {
			subject = "an unnamed user"
		}
		appendLog(w, s.logCap, eim.WorkflowLogEntry{Time: now, Attempt: w.Attempt, Action: -1,
			Message: fmt.Sprintf("retry requested by %s: attempt %d, %d actions, OS %s", subject, w.Attempt, len(actions), input.OS.ResourceID)})
		setProvisioning(in, inProgress(w, 0), eim.StatusInProgress, now)
		if err := inventory.SaveWorkflow(ctx, tx, w); err != nil {
			return fmt.Errorf("update workflow: %w", err)
		}
		if err := inventory.SetProvisioningStatus(ctx, tx, in, provisioningStatus(in)); err != nil {
			return fmt.Errorf("update instance: %w", err)
		}
		wf = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("provisioning: retry requested", "project", project, "instance", id, "workflow", wf.ResourceID, "attempt", wf.Attempt, "by", subject)
	return wf, nil
}
