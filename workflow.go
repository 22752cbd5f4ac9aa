package eim

// Workflow is the provisioning of one instance: the ordered actions rendered
// from its OS profile that the agent in the micro-OS runs, their states, and
// the log of everything the node reported. There is one per instance; a retry
// starts a new Attempt on the same row. It is internal (the API shows it
// through the instance's provisioningStatus and the provisioning log).
type Workflow struct {
	Meta

	InstanceID string        `json:"instanceId" eim:"edge=instance:inst"`
	HostID     string        `json:"hostId" eim:"edge=host:host"`
	Attempt    int           `json:"attempt"`
	State      WorkflowState `json:"state"`
	// Message is the reason of a FAILED state ("stream-image: sha256 mismatch").
	Message    string           `json:"message"`
	Actions    []WorkflowAction `json:"actions"`
	StartedAt  Time             `json:"startedAt"`
	FinishedAt Time             `json:"finishedAt"`
	// Log is every state transition and output chunk, oldest first, capped
	// by the provisioning module (older output is elided, transitions kept).
	Log []WorkflowLogEntry `json:"log"`
}

// ResourceKind implements Resource.
func (*Workflow) ResourceKind() Kind { return KindWorkflow }

// WorkflowState is the state of a workflow attempt.
type WorkflowState string

const (
	WorkflowPending   WorkflowState = "WORKFLOW_STATE_PENDING"
	WorkflowRunning   WorkflowState = "WORKFLOW_STATE_RUNNING"
	WorkflowSucceeded WorkflowState = "WORKFLOW_STATE_SUCCEEDED"
	WorkflowFailed    WorkflowState = "WORKFLOW_STATE_FAILED"
)

// ActionState is the state of one action of a workflow.
type ActionState string

const (
	ActionPending   ActionState = "ACTION_STATE_PENDING"
	ActionRunning   ActionState = "ACTION_STATE_RUNNING"
	ActionSucceeded ActionState = "ACTION_STATE_SUCCEEDED"
	ActionFailed    ActionState = "ACTION_STATE_FAILED"
)

// Action types the agent implements (see proto/eim/provisioning/v1).
const (
	ActionEraseDisk        = "erase-disk"
	ActionStreamImage      = "stream-image"
	ActionWriteFile        = "write-file"
	ActionSetBootOrder     = "set-boot-order"
	ActionReboot           = "reboot"
	ActionWriteAgentConfig = "write-agent-config"
	ActionEncryptRoot      = "encrypt-root"
)

// WorkflowAction is one step of a workflow.
type WorkflowAction struct {
	// Name is shown in statuses ("3/6 stream-image").
	Name string `json:"name"`
	// Type is one of the Action* constants.
	Type string `json:"type"`
	// Params are the type's parameters (url, sha256, device, path, content…).
	Params         map[string]string `json:"params,omitempty"`
	TimeoutSeconds int               `json:"timeoutSeconds"`
	State          ActionState       `json:"state"`
	Message        string            `json:"message,omitempty"`
	ExitCode       int               `json:"exitCode,omitempty"`
	StartedAt      Time              `json:"startedAt"`
	FinishedAt     Time              `json:"finishedAt"`
	// OutputBytes is how much output of the action's current run was
	// reported: the offset a report's output continues at. The server drops
	// the part of a retried report it recorded already.
	OutputBytes uint64 `json:"outputBytes,omitempty"`
	// StartGen is the node credential generation that reported the action
	// RUNNING. RUNNING again under a newer generation is the action run again
	// after the node rebooted and discovered again.
	StartGen int64 `json:"startGen,omitempty"`
}

// WorkflowLogEntry is one line of a provisioning log.
type WorkflowLogEntry struct {
	// Seq numbers entries from 1 within a workflow; followers resume after it.
	Seq     int  `json:"seq"`
	Time    Time `json:"time"`
	Attempt int  `json:"attempt"`
	// Action is the index of the action, or -1 for the workflow itself.
	Action int         `json:"action"`
	Name   string      `json:"name,omitempty"`
	State  ActionState `json:"state,omitempty"`
	// Message is a transition's reason; Output a chunk the node printed.
	Message string `json:"message,omitempty"`
	Output  string `json:"output,omitempty"`
}
