package eim

// The wire shapes of the edge workloads' API (the workloads module's; the
// Go client and the CLI share them).

// EdgeWorkloadView is the wire shape of a workload (secret values and registry
// passwords left out).
type EdgeWorkloadView struct {
	Name      string           `json:"name"`
	Revision  int64            `json:"revision"`
	Spec      EdgeWorkloadSpec `json:"spec"`
	CreatedAt Time             `json:"createdAt"`
	UpdatedAt Time             `json:"updatedAt"`
	Warnings  []string         `json:"warnings,omitempty"`
}

// EdgeWorkloadInput is the body of a create (name and spec) and of a replace (spec;
// a name, if given, must be the path's).
type EdgeWorkloadInput struct {
	Name string           `json:"name"`
	Spec EdgeWorkloadSpec `json:"spec"`
}

// EdgeWorkloadDeviceView is one device's state of a workload.
type EdgeWorkloadDeviceView struct {
	HostID string `json:"hostId"`
	// TargetRevision is the revision the device must run (0: it must run
	// none: the workload is being removed from it).
	TargetRevision int64 `json:"targetRevision"`
	// Revision, Phase, … are what the device last reported.
	Revision       int64            `json:"revision"`
	Phase          string           `json:"phase"`
	Summary        string           `json:"summary"`
	LastError      string           `json:"lastError,omitempty"`
	TransitionTime Time             `json:"lastTransitionTime"`
	ReportedAt     Time             `json:"reportedAt"`
	Containers     []ContainerState `json:"containers"`
	LastDataUpload Time             `json:"lastDataUpload"`
	UploadErrors   []string         `json:"uploadErrors,omitempty"`
	// LastDataDownload is when a file of an ingress data path was last
	// downloaded (or removed) on the device; DownloadErrors the last
	// pass's failures.
	LastDataDownload Time     `json:"lastDataDownload"`
	DownloadErrors   []string `json:"downloadErrors,omitempty"`
}

// EdgeWorkloadCounts are the devices of a workload by summary.
type EdgeWorkloadCounts struct {
	Total    int `json:"total"`
	Running  int `json:"running"`
	Degraded int `json:"degraded"`
	Failed   int `json:"failed"`
	Updating int `json:"updating"`
	Unknown  int `json:"unknown"`
	Removing int `json:"removing"`
}

// EdgeWorkloadStatusView is a workload's status: its devices counted by summary, in
// all and by the revision they report running.
type EdgeWorkloadStatusView struct {
	Name       string                       `json:"name"`
	Revision   int64                        `json:"revision"`
	Devices    EdgeWorkloadCounts           `json:"devices"`
	ByRevision []EdgeWorkloadRevisionCounts `json:"byRevision"`
	// Rollout is its rollout's state, with a rollout policy (the whole
	// at GET …/rollout).
	Rollout *EdgeWorkloadRolloutSummary `json:"rollout,omitempty"`
}

// EdgeWorkloadRolloutSummary is a rollout in short.
type EdgeWorkloadRolloutSummary struct {
	FromRevision int64  `json:"fromRevision"`
	ToRevision   int64  `json:"toRevision"`
	State        string `json:"state"`
	Reason       string `json:"reason,omitempty"`
	Since        Time   `json:"since"`
	Batch        int    `json:"batch"`
}

// EdgeWorkloadRevisionCounts are the devices that report running one revision.
type EdgeWorkloadRevisionCounts struct {
	Revision int64 `json:"revision"`
	EdgeWorkloadCounts
}

// EdgeWorkloadLogView is a log request and, once answered, its logs.
type EdgeWorkloadLogView struct {
	ID        string         `json:"id"`
	HostID    string         `json:"hostId"`
	Container string         `json:"container,omitempty"`
	Tail      uint32         `json:"tail"`
	State     string         `json:"state"` // pending, answered
	Logs      []ContainerLog `json:"logs"`
	Error     string         `json:"error,omitempty"`
	CreatedAt Time           `json:"createdAt"`
}

// EdgeWorkloadRolloutView is a workload's rollout (GET …/{name}/rollout).
type EdgeWorkloadRolloutView struct {
	Name         string `json:"name"`
	ID           int64  `json:"id"`
	FromRevision int64  `json:"fromRevision"`
	ToRevision   int64  `json:"toRevision"`
	// State is PROGRESSING, PAUSED, DONE, ABORTED or FAILED; Reason says
	// what it waits for or why it stopped, since Since.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Since  Time   `json:"since"`
	// Batch is the current batch (from 1), or the next to start when
	// BatchStarted is false (after a pause at a missed threshold).
	Batch        int  `json:"batch"`
	Batches      int  `json:"batches"`
	BatchStarted bool `json:"batchStarted"`
	// SuccessThreshold and UpdateTimeout are the current batch's.
	SuccessThreshold IntOrPercent `json:"successThreshold"`
	UpdateTimeout    string       `json:"updateTimeout"`
	// Devices counts the devices in batches so far; Total those selected
	// when the rollout started.
	Devices      EdgeWorkloadRolloutCounts `json:"devices"`
	CurrentBatch EdgeWorkloadRolloutCounts `json:"currentBatch"`
	// Failed lists failed devices (at most 100), with why.
	Failed    []EdgeWorkloadRolloutDeviceView `json:"failed,omitempty"`
	CreatedAt Time                            `json:"createdAt"`
	UpdatedAt Time                            `json:"updatedAt"`
}

// EdgeWorkloadRolloutCounts are devices of a rollout by their state in it.
type EdgeWorkloadRolloutCounts struct {
	Total    int `json:"total"`
	Waiting  int `json:"waiting"`
	Updating int `json:"updating"`
	Done     int `json:"done"`
	Failed   int `json:"failed"`
}

// EdgeWorkloadRolloutDeviceView is one device of a rollout.
type EdgeWorkloadRolloutDeviceView struct {
	HostID string `json:"hostId"`
	Batch  int    `json:"batch"`
	State  string `json:"state"`
	Since  Time   `json:"since"`
	Reason string `json:"reason,omitempty"`
}
