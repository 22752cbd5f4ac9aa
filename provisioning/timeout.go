package provisioning

import (
	"context"
	"fmt"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
	"github.com/eimhq/eim/inventory"
)

// Run fails timed-out workflows until ctx is done, then returns nil. It
// re-lists the unfinished workflows every ScanInterval: timeouts are
// minutes long, so a scan lag of seconds is immaterial, and a level-based
// scan cannot miss a workflow after a restart (deadlines are derived from
// the stored workflow, not remembered).
//
// A scan that fails (the store away) is logged and made again after a
// back-off, sooner than the next interval.
func (s *Service) Run(ctx context.Context) error {
	return feed.New(feed.Options{Store: s.store, Name: "provisioning timeouts", Logger: s.log, Metrics: s.metrics,
		Relist: s.CheckTimeouts, RelistEvery: s.scan}).Run(ctx)
}

// deadline returns when wf's current action times out, and its index; ok
// is false for a finished workflow. A RUNNING action has its timeout from
// its start; an action not started yet has it from the workflow's last
// report (the last log entry, or the start of the attempt): a node that
// stops reporting fails too.
func deadline(wf *eim.Workflow) (at time.Time, i int, ok bool) {
	if wf.State != eim.WorkflowPending && wf.State != eim.WorkflowRunning {
		return time.Time{}, 0, false
	}
	i = resumeFrom(wf)
	if i >= len(wf.Actions) {
		return time.Time{}, 0, false
	}
	a := wf.Actions[i]
	from := wf.StartedAt.Time
	if n := len(wf.Log); n > 0 && wf.Log[n-1].Time.After(from) {
		from = wf.Log[n-1].Time.Time
	}
	if a.State == eim.ActionRunning && !a.StartedAt.IsZero() {
		from = a.StartedAt.Time
	}
	return from.Add(time.Duration(a.TimeoutSeconds) * time.Second), i, true
}

// CheckTimeouts fails every workflow whose current action is past its
// timeout: the workflow FAILED, the instance's provisioning status ERROR
// "Provisioning Failed: 3/7 stream-image: timed out after 9800s".
func (s *Service) CheckTimeouts(ctx context.Context) error {
	q := eim.Query{
		Where: []eim.Cond{{Field: "state", Value: []string{string(eim.WorkflowPending), string(eim.WorkflowRunning)}}},
		Limit: scanPage,
	}
	// Pages keep each read transaction short. Workflows that finish during
	// the scan shift the pages, so one may be skipped; the next scan sees it.
	for {
		var items []eim.Resource
		err := s.store.View(ctx, "", func(tx eim.Tx) error {
			var err error
			items, _, err = tx.List(ctx, eim.KindWorkflow, q)
			return err
		})
		if err != nil {
			return fmt.Errorf("list workflows: %w", err)
		}
		now := s.now()
		for _, it := range items {
			wf := it.(*eim.Workflow)
			if at, _, ok := deadline(wf); !ok || now.Before(at) {
				continue
			}
			if err := s.expire(ctx, wf.Project, wf.ResourceID); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("provisioning: fail timed-out workflow", "workflow", wf.ResourceID, "err", err)
			}
		}
		if len(items) < scanPage {
			return nil
		}
		q.Offset += scanPage
	}
}

// scanPage is how many workflows one read of the timeout scan loads.
const scanPage = 500

// expire fails workflow id if it is still past its deadline (it is read
// again in the write transaction: a report may have arrived meanwhile).
func (s *Service) expire(ctx context.Context, project, id string) error {
	var msg, inst string
	err := s.batch.DoIn(ctx, project, func(tx eim.Tx) error {
		msg = ""
		r, err := getIn(ctx, tx, project, eim.KindWorkflow, id)
		if err != nil {
			return err
		}
		wf := r.(*eim.Workflow)
		at, i, ok := deadline(wf)
		now := s.now()
		if !ok || now.Before(at) {
			return nil
		}
		r, err = getIn(ctx, tx, project, eim.KindInstance, wf.InstanceID)
		if err != nil {
			return err
		}
		in := r.(*eim.Instance)
		a := &wf.Actions[i]
		t := eim.NewTime(now)
		msg = fmt.Sprintf("timed out after %ds", a.TimeoutSeconds)
		if a.StartedAt.IsZero() {
			a.StartedAt = t
		}
		a.State, a.Message, a.FinishedAt = eim.ActionFailed, msg, t
		appendLog(wf, s.logCap, eim.WorkflowLogEntry{Time: t, Attempt: wf.Attempt, Action: i, Name: a.Name, State: eim.ActionFailed, Message: msg})
		s.fail(wf, in, i, msg, t)
		msg, inst = wf.Message, in.ResourceID
		if err := inventory.SaveWorkflow(ctx, tx, wf); err != nil {
			return err
		}
		return inventory.SetProvisioningStatus(ctx, tx, in, provisioningStatus(in))
	})
	if err == nil && msg != "" {
		s.log.Warn("provisioning: workflow timed out", "project", project, "instance", inst, "workflow", id, "reason", msg)
	}
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil // deleted with its instance meanwhile
	}
	return err
}
