package eim

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Rollouts of edge workloads. A workload with a rollout policy
// (EdgeWorkloadSpec.RolloutPolicy) does not give a new revision to every
// selected device at once: the workloads module's rollout engine moves
// devices to it batch by batch, and a batch is done when enough of its
// devices run the revision (the success threshold) within the update
// timeout. The rollout's state and each device's place in it are stored
// (EdgeWorkloadRollout, EdgeWorkloadRolloutDevice), so another process
// continues it where it was.

// RolloutPolicy is how a workload's new revisions reach its devices.
// Changing it alone is no new revision: the workload's spec carries the
// current policy, which the running rollout follows from its next step.
type RolloutPolicy struct {
	// Batches are taken in order, each from the selected devices not in
	// an earlier batch; the devices left after the last are one more
	// batch. None: one batch of every device.
	Batches []RolloutBatch `json:"batches,omitempty"`
	// SuccessThreshold is the share of a batch that must run the
	// revision for the next batch to start ("90%", the default; or a
	// count of devices).
	SuccessThreshold IntOrPercent `json:"successThreshold,omitempty"`
	// UpdateTimeout is how long a device may take to run the revision
	// before it counts as failed (a Go duration, "30m"; default 1h).
	UpdateTimeout string `json:"updateTimeout,omitempty"`
	// DisruptionBudget bounds the devices updating (or unavailable) at
	// once in each group.
	DisruptionBudget *DisruptionBudget `json:"disruptionBudget,omitempty"`
	// HonorMaintenanceWindows starts a device's update only while one of
	// its maintenance schedules (its host's, its site's or its region's)
	// is open.
	HonorMaintenanceWindows bool `json:"honorMaintenanceWindows,omitempty"`
}

// RolloutBatch is one batch of a rollout.
type RolloutBatch struct {
	// Limit is how many devices the batch takes: a count ("10" or 10) or
	// a share of the devices selected when the rollout started ("10%").
	Limit IntOrPercent `json:"limit"`
	// Selector, when set, takes the batch only among the devices it
	// matches.
	Selector *LabelSelector `json:"selector,omitempty"`
	// SuccessThreshold and UpdateTimeout override the policy's.
	SuccessThreshold IntOrPercent `json:"successThreshold,omitempty"`
	UpdateTimeout    string       `json:"updateTimeout,omitempty"`
}

// DisruptionBudget is the most devices of a group that may be
// unavailable at once: updating, failed, or without a connection.
type DisruptionBudget struct {
	// GroupBy are label keys (eim.io/site, …): the devices with the same
	// values form a group. None: all devices are one group.
	GroupBy []string `json:"groupBy,omitempty"`
	// MaxUnavailable is a count or a share of the group ("25%", at least
	// one device).
	MaxUnavailable IntOrPercent `json:"maxUnavailable"`
}

// IntOrPercent is a count ("3", or the JSON number 3) or a percentage
// ("25%"). "" is unset.
type IntOrPercent string

// UnmarshalJSON takes a JSON number or string.
func (v *IntOrPercent) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*v = IntOrPercent(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// A type error, so that the decoder names the field.
		return &json.UnmarshalTypeError{Value: "neither a number nor a string", Type: reflect.TypeFor[IntOrPercent]()}
	}
	*v = IntOrPercent(s)
	return nil
}

// JSONTypes names what IntOrPercent takes, for a type error.
func (IntOrPercent) JSONTypes() string { return `a number or a percentage string (such as "10%")` }

// MarshalJSON writes a count as a number, a percentage as a string.
func (v IntOrPercent) MarshalJSON() ([]byte, error) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return []byte(strconv.FormatInt(n, 10)), nil
	}
	return json.Marshal(string(v))
}

// Parse returns the count or the percentage (percent true).
func (v IntOrPercent) Parse() (n int64, percent bool, err error) {
	s := strings.TrimSpace(string(v))
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f > 100 || math.IsNaN(f) {
			return 0, true, fmt.Errorf("%q: want a percentage above 0 and at most 100%%", string(v))
		}
		return int64(math.Round(f * 100)), true, nil // hundredths of a percent
	}
	n, err = strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("%q: want a count of 1 or more or a percentage (\"10%%\")", string(v))
	}
	return n, false, nil
}

// Of returns the number of devices v is of total: a count as is (at most
// total), a percentage rounded up and at least one (of a non-empty
// total).
func (v IntOrPercent) Of(total int) int {
	n, pct, err := v.Parse()
	if err != nil || total <= 0 {
		return 0
	}
	if !pct {
		return int(min(n, int64(total)))
	}
	out := int((int64(total)*n + 9999) / 10000)
	return max(1, min(out, total))
}

// Rollout defaults.
const (
	DefaultRolloutSuccessThreshold IntOrPercent = "90%"
	DefaultRolloutUpdateTimeout                 = time.Hour
)

// RolloutBatchPlan is one batch with the policy's defaults applied.
type RolloutBatchPlan struct {
	Limit            IntOrPercent // "" takes every remaining device (the last batch)
	Selector         *LabelSelector
	SuccessThreshold IntOrPercent
	UpdateTimeout    time.Duration
}

// Plan returns the batches a rollout under p takes: its batches, then one
// of the devices left. The policy must have been checked.
func (p *RolloutPolicy) Plan() []RolloutBatchPlan {
	thr, tmo := p.SuccessThreshold, DefaultRolloutUpdateTimeout
	if thr == "" {
		thr = DefaultRolloutSuccessThreshold
	}
	if d, err := time.ParseDuration(p.UpdateTimeout); err == nil && d > 0 {
		tmo = d
	}
	var out []RolloutBatchPlan
	for _, b := range p.Batches {
		bp := RolloutBatchPlan{Limit: b.Limit, Selector: b.Selector, SuccessThreshold: thr, UpdateTimeout: tmo}
		if b.SuccessThreshold != "" {
			bp.SuccessThreshold = b.SuccessThreshold
		}
		if d, err := time.ParseDuration(b.UpdateTimeout); err == nil && d > 0 {
			bp.UpdateTimeout = d
		}
		out = append(out, bp)
	}
	return append(out, RolloutBatchPlan{SuccessThreshold: thr, UpdateTimeout: tmo})
}

// Met reports whether ok devices of a batch of n meet threshold t: a
// count (at most n) or a share. An empty batch meets any.
func (t IntOrPercent) Met(ok, n int) bool {
	if n == 0 {
		return true
	}
	v, pct, err := t.Parse()
	if err != nil {
		return false
	}
	if !pct {
		return int64(ok) >= min(v, int64(n))
	}
	return int64(ok)*10000 >= v*int64(n)
}

// States of a rollout.
const (
	// RolloutProgressing: batches are being rolled out (or, its batches
	// done, devices that join later are given the revision).
	RolloutProgressing = "PROGRESSING"
	// RolloutPaused: by a user, or by a batch that missed its success
	// threshold (Reason says which). No device is moved; resume goes on
	// with the next batch.
	RolloutPaused = "PAUSED"
	// RolloutDone: every batch met its threshold.
	RolloutDone = "DONE"
	// RolloutAborted: stopped by a user; the devices keep the revision
	// they have. A new revision (or a rollback) starts a new rollout.
	RolloutAborted = "ABORTED"
	// RolloutFailed: it cannot go on without a change to the policy or
	// the fleet (Reason says what: devices of the batch with no
	// maintenance window ever); resume tries again.
	RolloutFailed = "FAILED"
)

// States of a device in a rollout.
const (
	RolloutDeviceWaiting  = "waiting"  // in a batch, not given the revision yet (budget, window)
	RolloutDeviceUpdating = "updating" // given the revision, not running it yet
	RolloutDeviceDone     = "done"     // runs the revision
	RolloutDeviceFailed   = "failed"   // did not run it within the update timeout (or never can)
)

// EdgeWorkloadRollout is the rollout of one workload's revision: the
// workload's latest rollout, stored.
type EdgeWorkloadRollout struct {
	Project  string
	Workload string
	// ID counts the workload's rollouts (1, 2, …).
	ID           int64
	FromRevision int64 // 0: the workload's first revision
	ToRevision   int64
	State        string
	Reason       string
	// Since is when State or Reason last changed.
	Since Time
	// Batch is the current batch (0-based); Total the devices selected
	// when the rollout started (the base of the batches' percentages).
	Batch          int
	Total          int
	BatchStartedAt Time
	// ProgressAt is when a device of the current batch last started or
	// finished its update: a batch with nothing updating that made no
	// progress for its update timeout is judged as it is.
	ProgressAt Time
	CreatedAt  Time
	UpdatedAt  Time
	// Generation grows with every write: a write naming another than the
	// stored one is ECONFLICT (a user's pause is never overwritten).
	Generation int64
}

// EdgeWorkloadRolloutDevice is one device's place in a rollout.
type EdgeWorkloadRolloutDevice struct {
	HostID string
	Batch  int
	State  string
	// Since is when State last changed; Reason why it failed.
	Since  Time
	Reason string
}

// EdgeWorkloadRolloutStore keeps the rollouts (the workloads module's
// rollout engine). Every operation is scoped to a project; a workload's
// rollout goes with the workload, a device's row with its host.
type EdgeWorkloadRolloutStore interface {
	// SetEdgeWorkloadRolloutPolicy replaces the rollout policy of the
	// workload's latest revision (prev, ECONFLICT otherwise) without a
	// new revision.
	SetEdgeWorkloadRolloutPolicy(ctx context.Context, project, name string, prev int64, policy *RolloutPolicy) (*EdgeWorkload, error)
	// EdgeWorkloadRollouts lists a project's rollouts by workload.
	EdgeWorkloadRollouts(ctx context.Context, project string) ([]*EdgeWorkloadRollout, error)
	// FindEdgeWorkloadRollout reads a workload's rollout; ENOTFOUND when
	// it has none.
	FindEdgeWorkloadRollout(ctx context.Context, project, name string) (*EdgeWorkloadRollout, error)
	// EdgeWorkloadRolloutDevices lists the devices of a workload's
	// rollout by host ID.
	EdgeWorkloadRolloutDevices(ctx context.Context, project, name string) ([]EdgeWorkloadRolloutDevice, error)
	// SaveEdgeWorkloadRollout writes r, provided the stored rollout's
	// generation is still r.Generation (0: there is none, or fresh
	// replaces any), with the devices' rows given (upserted) and those of
	// removed deleted, in one transaction; fresh drops every device row
	// first (a new rollout). r.Generation, UpdatedAt are set.
	SaveEdgeWorkloadRollout(ctx context.Context, r *EdgeWorkloadRollout, fresh bool, devices []EdgeWorkloadRolloutDevice, removed []string) error
	// DeleteEdgeWorkloadRollout removes a workload's rollout (its policy
	// was removed); none is no error.
	DeleteEdgeWorkloadRollout(ctx context.Context, project, name string) error
	// SetEdgeWorkloadRolloutState moves a rollout from one of the states
	// from to state with reason (ECONFLICT naming its state otherwise),
	// and wakes the engine (an event of the workload).
	SetEdgeWorkloadRolloutState(ctx context.Context, project, name string, from []string, state, reason string) (*EdgeWorkloadRollout, error)
}
