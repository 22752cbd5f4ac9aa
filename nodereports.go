package eim

import (
	"context"
	"slices"
	"unicode/utf8"
)

// NodeReports are the provisioning module's typed operations on what a
// node's reports change: its host's status and name, its instance's
// current state, instance status and provisioning status, and its
// workflow. Each reads the few columns its decision needs (never a whole
// host or instance, and the workflow whole only for an action report),
// lets the module's decision say what changes, and writes only those
// fields, in a transaction of its own run by the TxRunner the store was
// asked for them with (a batch shared with other nodes' calls). The
// writes are recorded as any field write is: an event in the change feed
// and an audit record per row written.
type NodeReports interface {
	// NodeState reads host id's provisioning state in a read-only
	// transaction, its workflow's ID and state only (Workflow holds no
	// actions or log): the look a call takes before it asks the single
	// writer of a store without concurrent writers. ENOTFOUND when the
	// host does not exist in project.
	NodeState(ctx context.Context, project, id string) (NodeState, error)
	// ReportIn records a call of the installed OS on host id: it reads
	// the node's state as NodeState does, lets decide say what the call
	// changes (it may not change the workflow), and writes that, all in
	// one transaction. decide may run more than once (a transaction that
	// lost a race runs again) and must be pure. It returns the state as
	// written. EINVALID naming the field when the change is not a valid
	// one.
	ReportIn(ctx context.Context, project, id string, decide func(NodeState) NodeChange) (NodeState, error)
	// RecordActions records a node's reports of its workflow's actions:
	// it reads the node's state with its whole workflow, lets decide say
	// what the reports change (decide may change the workflow it is given
	// and return it in NodeChange.Workflow), and writes that, the
	// workflow over the version read. decide may run more than once and
	// must have no effect outside its result; an error from it is
	// returned, and nothing is written.
	RecordActions(ctx context.Context, project, id string, decide func(NodeState) (NodeChange, error)) error
}

// NodeState is what a node's provisioning reports decide on.
type NodeState struct {
	HostID, Project string
	HostStatus      StatusValue // hostStatus
	Hostname        string
	// Instance is the host's instance; nil when it has none.
	Instance *NodeInstance
	// Workflow is the instance's workflow; nil when there is none yet.
	Workflow *Workflow
}

// NodeInstance are the fields of a host's instance that its node's
// reports decide on.
type NodeInstance struct {
	ID                         string
	DesiredState, CurrentState InstanceState
	Status                     StatusValue // instanceStatus
	Provisioning               StatusValue // provisioningStatus
}

// NodeChange is what a decision writes of a node's host, instance and
// workflow: each part that is not nil. None: nothing is written.
type NodeChange struct {
	// Running makes the instance current RUNNING with this instance
	// status (only over the current state read).
	Running *StatusValue
	// HostStatus is written over the status read.
	HostStatus *StatusValue
	Hostname   *string
	// Provisioning is the instance's provisioning status.
	Provisioning *StatusValue
	// Workflow is written (attempt, state, message, actions, times,
	// log, host) over the version read.
	Workflow *Workflow
}

// Empty reports whether c writes nothing.
func (c NodeChange) Empty() bool {
	return c.Running == nil && c.HostStatus == nil && c.Hostname == nil && c.Provisioning == nil && c.Workflow == nil
}

// MaxHostname is the longest host name a node may report (DNS).
const MaxHostname = 253

// Check validates c against s, the state it changes, naming the field at
// fault.
func (c NodeChange) Check(s NodeState) error {
	if (c.Running != nil || c.Provisioning != nil) && s.Instance == nil {
		return Errorf(EINVALID, "instance: the host has none to write")
	}
	if c.Running != nil {
		if err := c.Running.check("instanceStatus"); err != nil {
			return err
		}
	}
	if c.HostStatus != nil {
		if err := c.HostStatus.check("hostStatus"); err != nil {
			return err
		}
	}
	if h := c.Hostname; h != nil {
		if !utf8.ValidString(*h) {
			return Errorf(EINVALID, "hostname: not valid UTF-8")
		}
		if n := utf8.RuneCountInString(*h); n > MaxHostname {
			return Errorf(EINVALID, "hostname: is %d characters long, at most %d allowed", n, MaxHostname)
		}
	}
	if c.Provisioning != nil {
		if err := c.Provisioning.check("provisioningStatus"); err != nil {
			return err
		}
	}
	if w := c.Workflow; w != nil {
		if s.Workflow == nil || w.ResourceID != s.Workflow.ResourceID {
			return Errorf(EINVALID, "workflow: not the workflow read")
		}
		if err := w.Check(); err != nil {
			return err
		}
	}
	return nil
}

// WorkflowProgress are the fields of a workflow that change after its
// creation, as its node reports (its instance never does).
var WorkflowProgress = []string{"hostId", "attempt", "state", "message", "actions", "startedAt", "finishedAt", "log"}

// MaxWorkflowActions bounds a workflow's actions (rendered from an OS
// profile: a handful).
const MaxWorkflowActions = 256

// Check validates what the provisioning module writes of a workflow,
// naming the field at fault.
func (wf *Workflow) Check() error {
	if err := CheckID(KindHost, "hostId", wf.HostID); err != nil {
		return err
	}
	if wf.Attempt < 1 {
		return Errorf(EINVALID, "attempt: %d, want 1 or more", wf.Attempt)
	}
	switch wf.State {
	case WorkflowPending, WorkflowRunning, WorkflowSucceeded, WorkflowFailed:
	default:
		return Errorf(EINVALID, "state: %q is not a workflow state", wf.State)
	}
	if !utf8.ValidString(wf.Message) {
		return Errorf(EINVALID, "message: not valid UTF-8")
	}
	if n := utf8.RuneCountInString(wf.Message); n > MaxStatusText {
		return Errorf(EINVALID, "message: is %d characters long, at most %d allowed", n, MaxStatusText)
	}
	states := []ActionState{ActionPending, ActionRunning, ActionSucceeded, ActionFailed}
	for i, a := range wf.Actions {
		if !slices.Contains(states, a.State) {
			return Errorf(EINVALID, "actions[%d].state: %q is not an action state", i, a.State)
		}
		if a.Name == "" {
			return Errorf(EINVALID, "actions[%d].name: is required", i)
		}
	}
	if n := len(wf.Actions); n > MaxWorkflowActions {
		return Errorf(EINVALID, "actions: %d, at most %d", n, MaxWorkflowActions)
	}
	return nil
}
