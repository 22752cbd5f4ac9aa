package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// The provisioning log of an instance (EIM's own endpoint; the original had
// none): every state transition of its workflow's actions and what the node
// printed, for `eim instance log` and for anyone debugging a failed node.

// maxLogWait bounds a long poll. The request of a long poll may take its
// wait plus logWaitSlack (timeoutOf), so the wait is not cut short by the
// timeout every other request has.
const (
	maxLogWait   = 30 * time.Second
	logWaitSlack = 5 * time.Second
)

// Reprovisioner starts a new attempt of an instance's FAILED provisioning
// workflow on behalf of subject (see provisioning.Service.Reprovision). A
// workflow in another state is EPRECONDITION.
type Reprovisioner interface {
	Reprovision(ctx context.Context, project, instanceID, subject string) (*eim.Workflow, error)
}

// RecoveryKeys reads the escrowed recovery key of an instance's encrypted
// disk, recording the read in the audit log by the context's actor (see
// provisioning.Service.RecoveryKey).
type RecoveryKeys interface {
	RecoveryKey(ctx context.Context, project, instanceID string) (*eim.RecoveryKey, error)
}

// timeoutOf returns how long request r may take: the request timeout, and
// for a provisioning-log long poll at least its wait plus logWaitSlack.
func (h *handler) timeoutOf(r *http.Request) time.Duration {
	if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/provisioning_log") {
		return h.timeout
	}
	// An invalid wait is refused by the handler, within the usual timeout.
	sec, err := queryInt(r.URL.Query().Get("wait"), "wait", int(maxLogWait/time.Second))
	if err != nil || sec == 0 {
		return h.timeout
	}
	return max(h.timeout, time.Duration(sec)*time.Second+logWaitSlack)
}

// provisioningLog is the wire shape of GET …/provisioning_log.
type provisioningLog struct {
	InstanceID string            `json:"instanceId"`
	WorkflowID string            `json:"workflowId"`
	Attempt    int               `json:"attempt"`
	State      eim.WorkflowState `json:"state"`
	// Message says why a FAILED workflow failed.
	Message string `json:"message,omitempty"`
	// TotalActions lets a reader print "[3/7 stream-image]".
	TotalActions int                    `json:"totalActions"`
	Entries      []eim.WorkflowLogEntry `json:"entries"`
	// Next is the seq to pass as ?after= to read on. A gap between the
	// seqs of consecutive entries is output dropped by the log's cap.
	Next int `json:"next"`
}

// finished reports whether no more entries will come.
func (l *provisioningLog) finished() bool {
	return l.State == eim.WorkflowSucceeded || l.State == eim.WorkflowFailed
}

// provisioningLogRoutes registers the log endpoint.
func (h *handler) provisioningLogRoutes() {
	h.handle("GET /compute/instances/{resourceId}/provisioning_log", h.provisioningLog)
	h.handle("POST /compute/instances/{resourceId}/reprovision", h.reprovision)
	h.handle("GET /compute/instances/{resourceId}/recoverykey", h.recoveryKey)
}

// recoveryKey is the wire shape of GET …/recoverykey.
type recoveryKey struct {
	InstanceID  string   `json:"instanceId"`
	HostID      string   `json:"hostId"`
	VolumeUUID  string   `json:"volumeUuid"`
	RecoveryKey string   `json:"recoveryKey"`
	EscrowedAt  eim.Time `json:"escrowedAt"`
}

// recoveryKey answers the recovery key of the instance's encrypted disk
// (EIM's own endpoint; the original had none), to administrators only
// (eim-admin): it opens the disk without its TPM. Every read is an audit
// record (kind recoverykey, action READ).
func (h *handler) recoveryKey(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindInstance)
	if err != nil {
		return err
	}
	if !c.p.IsAdmin() {
		return eim.Errorf(eim.EFORBIDDEN, "reading the recovery key of instance %s needs the %s role", id, eim.RoleAdmin)
	}
	if h.keys == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "provisioning is not running on this server")
	}
	k, err := h.keys.RecoveryKey(r.Context(), c.project, id)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	h.writeJSON(w, http.StatusOK, &recoveryKey{InstanceID: id, HostID: k.HostID, VolumeUUID: k.VolumeUUID, RecoveryKey: k.Key, EscrowedAt: k.EscrowedAt})
	return nil
}

// reprovision retries the instance's failed provisioning: a new attempt of
// its workflow, rendered again from the current OS profile. It answers the
// log's head with the new attempt's entries (follow it from "next").
func (h *handler) reprovision(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindInstance)
	if err != nil {
		return err
	}
	if h.reprov == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "provisioning is not running on this server")
	}
	subject := ""
	if c.p != nil {
		subject = c.p.Subject
	}
	wf, err := h.reprov.Reprovision(r.Context(), c.project, id, subject)
	if err != nil {
		return err
	}
	out := &provisioningLog{InstanceID: id, WorkflowID: wf.ResourceID, Attempt: wf.Attempt, State: wf.State,
		Message: wf.Message, TotalActions: len(wf.Actions), Entries: []eim.WorkflowLogEntry{}}
	for _, e := range wf.Log {
		if e.Attempt == wf.Attempt {
			out.Entries = append(out.Entries, e)
		}
		out.Next = e.Seq
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

// provisioningLog answers the entries after ?after=SEQ; with ?wait=SECONDS
// (≤ 30) it waits, on the change feed, until there are some or the
// workflow ends.
func (h *handler) provisioningLog(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindInstance)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	after, err := queryInt(q.Get("after"), "after", 1<<31-1)
	if err != nil {
		return err
	}
	waitSec, err := queryInt(q.Get("wait"), "wait", int(maxLogWait/time.Second))
	if err != nil {
		return err
	}
	ctx := r.Context()
	// The revision is read before the log, so a change made between the
	// read and the watch is still seen by the watch.
	rev, err := h.inv.Revision(ctx)
	if err != nil {
		return err
	}
	out, err := h.readProvisioningLog(ctx, c.project, id, after)
	if err != nil {
		return err
	}
	wait := time.Duration(waitSec) * time.Second
	if dl, ok := ctx.Deadline(); ok {
		// Answer before the request's own timeout does.
		wait = min(wait, time.Until(dl)-time.Second)
	}
	if wait > 0 && len(out.Entries) == 0 && !out.finished() {
		out, err = h.waitProvisioningLog(ctx, rev, wait, c.project, id, after, out)
		if err != nil {
			return err
		}
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) waitProvisioningLog(ctx context.Context, rev int64, wait time.Duration, project, id string, after int, out *provisioningLog) (*provisioningLog, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for ev, err := range h.inv.Watch(wctx, rev, eim.KindWorkflow, eim.KindInstance) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break // waited long enough (or the feed failed): answer what we have
		}
		if ev.Project != project {
			continue
		}
		mine := (ev.Kind == eim.KindInstance && ev.ID == id) ||
			(ev.Kind == eim.KindWorkflow && (out.WorkflowID == "" || ev.ID == out.WorkflowID))
		if !mine {
			continue
		}
		next, err := h.readProvisioningLog(ctx, project, id, after)
		if err != nil {
			return nil, err
		}
		out = next
		if len(out.Entries) > 0 || out.finished() {
			break
		}
	}
	return out, nil
}

// readProvisioningLog reads the log of instance id after seq.
func (h *handler) readProvisioningLog(ctx context.Context, project, id string, after int) (*provisioningLog, error) {
	out := &provisioningLog{InstanceID: id, Entries: []eim.WorkflowLogEntry{}, Next: after}
	wf, err := h.inv.InstanceWorkflow(ctx, project, id)
	if err != nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil, eim.Errorf(eim.ENOTFOUND, "instance %s not found", id)
		}
		return nil, err
	}
	if wf == nil {
		return out, nil
	}
	out.WorkflowID, out.Attempt, out.State, out.Message = wf.ResourceID, wf.Attempt, wf.State, wf.Message
	out.TotalActions = len(wf.Actions)
	for _, e := range wf.Log {
		if e.Seq > after {
			out.Entries = append(out.Entries, e)
			out.Next = e.Seq
		}
	}
	return out, nil
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(s, name string, maxVal int) (int, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > maxVal {
		return 0, eim.Errorf(eim.EINVALID, "%s: must be an integer from 0 to %d", name, maxVal)
	}
	return v, nil
}
