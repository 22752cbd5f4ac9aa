package workloads

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The rollout's API: GET …/{name}/rollout, and POST …/{name}/rollout/
// pause, resume, abort and rollback (docs/workloads.md "Rollouts").

// RolloutView is the wire shape of a rollout.
type RolloutView = eim.EdgeWorkloadRolloutView

// maxFailedListed bounds the failed devices a rollout's view lists.
const maxFailedListed = 100

func (s *Service) rolloutView(r *http.Request, c *call) (*RolloutView, error) {
	ctx := r.Context()
	w, err := s.o.Store.FindEdgeWorkload(ctx, c.proj.Name, c.name)
	if err != nil {
		return nil, err
	}
	ro, err := s.o.Store.FindEdgeWorkloadRollout(ctx, c.proj.Name, c.name)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		if w.Spec.RolloutPolicy == nil {
			return nil, eim.Errorf(eim.ENOTFOUND, "edge workload %s has no rolloutPolicy: every selected device gets its latest revision at once", c.name)
		}
		return nil, eim.Errorf(eim.ENOTFOUND, "edge workload %s has no rollout yet: the targets loop starts it at its next step", c.name)
	}
	if err != nil {
		return nil, err
	}
	rows, err := s.o.Store.EdgeWorkloadRolloutDevices(ctx, c.proj.Name, c.name)
	if err != nil {
		return nil, err
	}
	v := &RolloutView{Name: c.name, ID: ro.ID, FromRevision: ro.FromRevision, ToRevision: ro.ToRevision, State: ro.State,
		Reason: ro.Reason, Since: ro.Since, Batch: ro.Batch + 1, BatchStarted: !ro.BatchStartedAt.IsZero(),
		CreatedAt: ro.CreatedAt, UpdatedAt: ro.UpdatedAt}
	v.Devices.Total = ro.Total
	if pol := w.Spec.RolloutPolicy; pol != nil {
		plan := pol.Plan()
		v.Batches = len(plan)
		b := plan[max(0, min(ro.Batch, len(plan)-1))]
		v.SuccessThreshold, v.UpdateTimeout = b.SuccessThreshold, b.UpdateTimeout.String()
	}
	for _, d := range rows {
		cur := d.Batch == ro.Batch
		if cur {
			v.CurrentBatch.Total++
		}
		for _, n := range []*eim.EdgeWorkloadRolloutCounts{&v.Devices, &v.CurrentBatch} {
			if n == &v.CurrentBatch && !cur {
				continue
			}
			switch d.State {
			case eim.RolloutDeviceWaiting:
				n.Waiting++
			case eim.RolloutDeviceUpdating:
				n.Updating++
			case eim.RolloutDeviceDone:
				n.Done++
			case eim.RolloutDeviceFailed:
				n.Failed++
			}
		}
		if d.State == eim.RolloutDeviceFailed && len(v.Failed) < maxFailedListed {
			v.Failed = append(v.Failed, eim.EdgeWorkloadRolloutDeviceView{HostID: d.HostID, Batch: d.Batch + 1, State: d.State, Since: d.Since, Reason: d.Reason})
		}
	}
	return v, nil
}

func (s *Service) rolloutStatus(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := s.rolloutView(r, c)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, v)
	return nil
}

// rolloutAction moves the rollout from one of the states from to state,
// with reason naming the caller (its %s).
func (s *Service) rolloutAction(from []string, state, reason string) func(http.ResponseWriter, *http.Request, *call) error {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		if err := emptyBody(r); err != nil {
			return err
		}
		if _, err := s.o.Store.SetEdgeWorkloadRolloutState(r.Context(), c.proj.Name, c.name, from, state, fmt.Sprintf(reason, eim.ActorOf(r.Context()))); err != nil {
			return err
		}
		return s.rolloutStatus(w, r, c)
	}
}

// emptyBody refuses a body other than nothing or {}.
func emptyBody(r *http.Request) error {
	var b bytes.Buffer
	if _, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 1024)); err != nil {
		return eim.Errorf(eim.EINVALID, "body: %v", err)
	}
	if body := bytes.TrimSpace(b.Bytes()); len(body) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil || len(m) > 0 {
			return eim.Errorf(eim.EINVALID, "body: this operation takes no fields")
		}
	}
	return nil
}

// rollback makes the rollout's previous revision the workload's next
// (its spec, with the current rollout policy): a new revision, rolled out
// as any other.
func (s *Service) rollback(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := emptyBody(r); err != nil {
		return err
	}
	ctx := r.Context()
	wl, err := s.o.Store.FindEdgeWorkload(ctx, c.proj.Name, c.name)
	if err != nil {
		return err
	}
	ro, err := s.o.Store.FindEdgeWorkloadRollout(ctx, c.proj.Name, c.name)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return eim.Errorf(eim.ECONFLICT, "edge workload %s has no rollout to roll back", c.name)
	}
	if err != nil {
		return err
	}
	switch {
	case ro.ToRevision != wl.Revision:
		return eim.Errorf(eim.ECONFLICT, "the rollout of revision %d has not started yet: try again in a moment", wl.Revision)
	case ro.FromRevision == 0:
		return eim.Errorf(eim.ECONFLICT, "the rollout of edge workload %s is of its first revision: there is no earlier revision to roll back to (delete the workload to remove it)", c.name)
	}
	revs, err := s.o.Store.EdgeWorkloadRevisions(ctx, c.proj.Name, c.name)
	if err != nil {
		return err
	}
	var spec *eim.EdgeWorkloadSpec
	for _, rv := range revs {
		if rv.Revision == ro.FromRevision {
			spec = &rv.Spec
		}
	}
	if spec == nil {
		return eim.Errorf(eim.ECONFLICT, "revision %d of edge workload %s is not kept", ro.FromRevision, c.name)
	}
	// The sealed values are bound to the project and workload, not to a
	// revision: the old revision's spec is stored as it is.
	spec.RolloutPolicy = wl.Spec.RolloutPolicy
	out, err := s.o.Store.ReviseEdgeWorkload(ctx, c.proj.Name, c.name, wl.Revision, *spec)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, viewOf(out))
	return nil
}
