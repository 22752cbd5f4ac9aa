package eim

import (
	"context"
	"time"
)

// Power jobs (the oob module): each change of a host's power through its
// BMC is a job of steps (set a one-time boot, then power on; a graceful
// shutdown, then a forced one), carried out by one process at a time under
// a lease and recorded step by step, so that another process can take over
// a job whose process died and continue it from its recorded step. What a
// step means is the oob module's; the store keeps the steps as they are
// given.

// KindPowerJob prefixes power jobs' IDs ("bmcjob-" and 8 hex digits).
const KindPowerJob Kind = "bmcjob"

// PowerJobState is the state of a power job.
type PowerJobState string

const (
	PowerJobPending   PowerJobState = "PENDING"
	PowerJobRunning   PowerJobState = "RUNNING"
	PowerJobSucceeded PowerJobState = "SUCCEEDED"
	PowerJobFailed    PowerJobState = "FAILED"
	PowerJobCancelled PowerJobState = "CANCELLED"
)

// Ended reports whether s is a final state.
func (s PowerJobState) Ended() bool {
	return s == PowerJobSucceeded || s == PowerJobFailed || s == PowerJobCancelled
}

// Kinds of power job steps.
const (
	PowerStepSetBoot = "SET_BOOT" // set the boot override (Boot, Once)
	PowerStepPower   = "POWER"    // a power action (Action), confirmed by a read
)

// PowerStep is a step of a power job: what to do, and how far it got.
type PowerStep struct {
	Kind string `json:"kind"`
	// Action is the oob module's power action (ON, GRACEFUL_OFF,
	// FORCE_OFF, RESET, POWER_CYCLE, SLEEP, HIBERNATE).
	Action string `json:"action,omitempty"`
	// Boot and Once: the override of a SET_BOOT step (PXE, HTTP, …).
	Boot string `json:"boot,omitempty"`
	Once bool   `json:"once,omitempty"`
	// Image is the URL of the CD image an INSERT_MEDIA step inserts
	// into the BMC's virtual media.
	Image string `json:"image,omitempty"`
	// Timeout bounds the wait for the step's confirmation (milliseconds;
	// 0: the module's default). A graceful shutdown that times out passes
	// on to the next step (the forced one).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`

	// Sends counts the times the action was sent; SentAt is the last.
	// A step is recorded as sent before it is sent, so that a process
	// taking the job over knows it may have gone out.
	Sends  int  `json:"sends,omitempty"`
	SentAt Time `json:"sentAt,omitzero"`
	// Done: confirmed from the BMC's state; Skipped: not needed (the
	// machine was already there) or given up for the next step.
	Done    bool   `json:"done,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
	Note    string `json:"note,omitempty"`
	// BootID is the boot the host's node reported before a RESET or
	// POWER_CYCLE step's action was sent ("" none known: the step is
	// confirmed by the BMC's state alone); another one reported after
	// the send confirms the step.
	BootID string `json:"bootId,omitempty"`
	// Queued says, while the step waits for a power-on slot of its site,
	// how many of the process's jobs wait ahead of it; "" otherwise.
	Queued string `json:"queued,omitempty"`
}

// PowerJob is a power change of one host through its BMC.
type PowerJob struct {
	ID      string
	Project string
	HostID  string
	// Desired is the host's desiredPowerState the job carries out.
	Desired PowerState
	// Reason says why the job was made when no user asked for it (the
	// power policy's restore: PowerRestoreReason); "" a user's request.
	Reason string
	State  PowerJobState
	Steps  []PowerStep
	// Step is the index of the step being carried out (len(Steps) once
	// they are all done).
	Step      int
	Attempts  int // times a process took the job up
	LastError string
	Deadline  Time
	// Holder and LeaseUntil: the process working on the job and until
	// when it holds it.
	Holder     string
	LeaseUntil Time
	CreatedAt  Time
	UpdatedAt  Time
	EndedAt    Time
	// Seq orders jobs by creation.
	Seq int64
	// QueuedFor is the site's power-on slots the job waits for (the oob
	// module's key; "" none), since QueuedSince: the site's waiting jobs
	// are counted across processes from them (CountQueuedPowerJobs).
	QueuedFor   string
	QueuedSince Time
}

// PowerJobStore keeps power jobs (see sqlstore), project-scoped for the
// API and claimed across projects by the module's workers.
//
// CreatePowerJob adds a PENDING job to an existing host of the project
// (ENOTFOUND otherwise), setting j's ID, Seq and times. RequestPowerJob
// does the same as part of a request, in one transaction (see
// PowerJobRequest). GetPowerJob returns one of the host's jobs, or with
// hostID "" the project's job of that ID (ENOTFOUND).
//
// A job's creation and its end (SUCCEEDED, FAILED, CANCELLED) are each an
// audit record (kind KindPowerJob, the job's ID; no credentials: a job
// holds none) and an event in the change feed, written in the
// transaction that writes the job. ListPowerJobs returns a
// page of the host's jobs, newest first, and their total.
// CancelPowerJob ends a job that has not ended as CANCELLED (ECONFLICT
// when it has), with the reason in LastError.
//
// ClaimPowerJob gives holder, for ttl, a job that no live lease holds:
// the oldest PENDING or RUNNING job of a host that has no older job still
// to end (one job in flight per host), marking it RUNNING and counting
// the attempt; nil when there is none. SavePowerJob records a job's
// progress (State, Steps, Step, LastError, Deadline, EndedAt) and renews its lease
// for ttl, only while holder still holds it and it has not ended:
// ECONFLICT otherwise (the lease was lost, or the job was cancelled); a
// job that ends, or is claimed again, is no longer queued. CountQueuedPowerJobs counts the
// project's RUNNING jobs under a live lease queued for key ahead of job
// id, queued since since: since earlier, or in the same millisecond with
// a smaller ID (id "": all queued before since). They are the jobs of
// every process that wait ahead of one.
type PowerJobStore interface {
	CreatePowerJob(ctx context.Context, j *PowerJob) error
	RequestPowerJob(ctx context.Context, r PowerJobRequest) (created bool, err error)
	GetPowerJob(ctx context.Context, project, hostID, id string) (*PowerJob, error)
	ListPowerJobs(ctx context.Context, project, hostID string, limit, offset int) ([]*PowerJob, int, error)
	CancelPowerJob(ctx context.Context, project, hostID, id, reason string) (*PowerJob, error)
	ClaimPowerJob(ctx context.Context, holder string, ttl time.Duration) (*PowerJob, error)
	SavePowerJob(ctx context.Context, j *PowerJob, ttl time.Duration) error
	CountQueuedPowerJobs(ctx context.Context, project, key string, since Time, id string) (int, error)
}

// PowerJobRequest is a power request written in one transaction by
// PowerJobStore.RequestPowerJob, so that a crash or an error leaves all
// of it or none: when CancelReason is not "", the host's jobs still to
// end are cancelled with that reason (powerCommandPolicy IMMEDIATE); then
// Before runs (the inventory's write of the host's desiredPowerState:
// modules never write rows themselves; its error undoes the rest), and
// Job is added. With
// UnlessLatest, nothing is written (created false) when the host's latest
// job is for Job.Desired already (a request seen twice is one request).
type PowerJobRequest struct {
	Job          *PowerJob
	Before       func(Tx) error
	CancelReason string
	UnlessLatest bool
}

// PowerJobView is a power job as the API answers it.
type PowerJobView struct {
	JobID      string      `json:"jobId"`
	HostID     string      `json:"hostId"`
	Desired    PowerState  `json:"desiredPowerState"`
	Reason     string      `json:"reason,omitempty"`
	State      string      `json:"state"`
	Steps      []PowerStep `json:"steps"`
	Step       int         `json:"step"`
	Attempts   int         `json:"attempts"`
	LastError  string      `json:"lastError,omitempty"`
	Deadline   Time        `json:"deadline"`
	EndedAt    Time        `json:"endedAt,omitzero"`
	Timestamps Timestamps  `json:"timestamps"`
}

// View is j as the API answers it (not who holds it).
func (j *PowerJob) View() *PowerJobView {
	steps := j.Steps
	if steps == nil {
		steps = []PowerStep{}
	}
	return &PowerJobView{JobID: j.ID, HostID: j.HostID, Desired: j.Desired, Reason: j.Reason, State: string(j.State), Steps: steps, Step: j.Step,
		Attempts: j.Attempts, LastError: j.LastError, Deadline: j.Deadline, EndedAt: j.EndedAt,
		Timestamps: Timestamps{CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}}
}

// PowerJobList is the answer of GET …/bmc/jobs.
type PowerJobList struct {
	Jobs          []*PowerJobView `json:"jobs"`
	TotalElements int             `json:"totalElements"`
	HasNext       bool            `json:"hasNext"`
}
