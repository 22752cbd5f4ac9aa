package inventory

import (
	"context"

	"github.com/eimhq/eim"
)

// The provisioning module's writes of workflows (see status.go). A
// workflow is the module's own record of an instance's provisioning,
// which it reads, changes and writes back whole as reports arrive.

// workflowFields are the fields of a workflow that change after its
// creation (SaveWorkflow); its instance never does.
var workflowFields = []string{"hostId", "attempt", "state", "message", "actions", "startedAt", "finishedAt", "log"}

// CreateWorkflow creates in tx the first attempt of an instance's
// workflow, validated (see SaveWorkflow); an instance has at most one,
// and a second is ECONFLICT.
func CreateWorkflow(ctx context.Context, tx eim.Tx, wf *eim.Workflow) error {
	if err := eim.CheckID(eim.KindInstance, "instanceId", wf.InstanceID); err != nil {
		return err
	}
	if err := checkWorkflow(wf); err != nil {
		return err
	}
	return tx.Create(ctx, wf)
}

// SaveWorkflow writes where a workflow stands: its attempt, state,
// message, actions, times, log and host, as the module changed them in
// wf, a workflow read in tx. The write is made only over the version
// read: reports of the same node handled at once (by two replicas) each
// append to what the other wrote, never over it.
func SaveWorkflow(ctx context.Context, tx eim.Tx, wf *eim.Workflow) error {
	if err := checkWorkflow(wf); err != nil {
		return err
	}
	var when []eim.Cond
	if v := wf.Timestamps.UpdatedAt; !v.IsZero() {
		when = []eim.Cond{{Field: "updatedAt", Value: v}}
	}
	return tx.UpdateFieldsIf(ctx, wf, when, workflowFields...)
}

// checkWorkflow validates what the provisioning module writes of a
// workflow.
func checkWorkflow(wf *eim.Workflow) error {
	if err := eim.CheckID(eim.KindHost, "hostId", wf.HostID); err != nil {
		return err
	}
	if wf.Attempt < 1 {
		return eim.Errorf(eim.EINVALID, "attempt: %d, want 1 or more", wf.Attempt)
	}
	switch wf.State {
	case eim.WorkflowPending, eim.WorkflowRunning, eim.WorkflowSucceeded, eim.WorkflowFailed:
	default:
		return eim.Errorf(eim.EINVALID, "state: %q is not a workflow state", wf.State)
	}
	if err := checkText("message", wf.Message, maxStatusText); err != nil {
		return err
	}
	for i, a := range wf.Actions {
		switch a.State {
		case eim.ActionPending, eim.ActionRunning, eim.ActionSucceeded, eim.ActionFailed:
		default:
			return eim.Errorf(eim.EINVALID, "actions[%d].state: %q is not an action state", i, a.State)
		}
		if a.Name == "" {
			return eim.Errorf(eim.EINVALID, "actions[%d].name: is required", i)
		}
	}
	if n := len(wf.Actions); n > maxWorkflowActions {
		return eim.Errorf(eim.EINVALID, "actions: %d, at most %d", n, maxWorkflowActions)
	}
	return nil
}

// maxWorkflowActions bounds a workflow's actions (rendered from an OS
// profile: a handful).
const maxWorkflowActions = 256

// InstanceWorkflow returns the provisioning workflow of instance id in
// project (its log is what the API shows of it), or nil when its node has
// not asked for one yet. ENOTFOUND when the instance does not exist.
func (s *Service) InstanceWorkflow(ctx context.Context, project, id string) (*eim.Workflow, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := checkKindID(eim.KindInstance, id); err != nil {
		return nil, err
	}
	var wf *eim.Workflow
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		wf = nil
		if _, err := tx.Get(ctx, eim.KindInstance, id); err != nil {
			return err
		}
		items, _, err := tx.List(ctx, eim.KindWorkflow, eim.Query{Where: []eim.Cond{{Field: "instanceId", Value: id}}, Limit: 1, NoTotal: true})
		if err != nil || len(items) == 0 {
			return err
		}
		wf = items[0].(*eim.Workflow)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return wf, nil
}
