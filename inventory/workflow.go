package inventory

import (
	"context"

	"github.com/eimhq/eim"
)

// The provisioning module's writes of workflows (see status.go). A
// workflow is the module's own record of an instance's provisioning,
// which it reads, changes and writes back whole as reports arrive.

// CreateWorkflow creates in tx the first attempt of an instance's
// workflow, validated (Workflow.Check); an instance has at most one,
// and a second is ECONFLICT.
func CreateWorkflow(ctx context.Context, tx eim.Tx, wf *eim.Workflow) error {
	if err := eim.CheckID(eim.KindInstance, "instanceId", wf.InstanceID); err != nil {
		return err
	}
	if err := wf.Check(); err != nil {
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
	if err := wf.Check(); err != nil {
		return err
	}
	var when []eim.Cond
	if v := wf.Timestamps.UpdatedAt; !v.IsZero() {
		when = []eim.Cond{{Field: "updatedAt", Value: v}}
	}
	return tx.UpdateFieldsIf(ctx, wf, when, eim.WorkflowProgress...)
}

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
