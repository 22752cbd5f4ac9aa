package eim

import (
	"context"
	"strings"
	"time"
)

// Edge workloads (the workloads module, package workloads): containers run
// on devices — EIM hosts running eim-agent on their installed OS — as
// podman pods. A workload selects its devices by their labels (or names
// one host), and every change of its spec is a new revision, stored.
// Which revision each selected device must run is its target, stored per
// (workload, host): the workload's latest revision, or, under a rollout
// policy, the one the rollout engine lets it have (edgeworkloadrollout.go). A device's set of targets
// has a version (DeviceWorkloads.Version) that only grows: the heartbeat
// answers carry it, and the device fetches its set when it moved.
//
// (The original API's Workload, workload.go, is a cluster's member set:
// unrelated.)

// Kinds of the workloads module's change events. Their IDs: a workload's
// name (KindEdgeWorkload), the project's name (KindEdgeDevices, a
// change of devices' targets or log requests, hence of their versions, or
// of many devices' status marks) and a host's ID (KindEdgeDeviceStatus:
// whether the server wants that one device's full status changed, so that
// the heartbeats' caches read one row, not the project's).
const (
	KindEdgeWorkload     Kind = "edgeworkload"
	KindEdgeDevices      Kind = "edgedevices"
	KindEdgeDeviceStatus Kind = "edgedevicestatus"
)

// DeviceLabelPrefix is the prefix of the labels EIM derives from what it
// knows of a device (eim.io/arch, eim.io/hostname, …): read-only to users,
// whose metadata may not use it.
const DeviceLabelPrefix = "eim.io/"

// EdgeWorkload is a workload at its latest revision.
type EdgeWorkload struct {
	Project  string
	Name     string
	Revision int64
	// Spec's secret and registry passwords are sealed
	// (EdgeWorkloadSecretPurpose).
	Spec      EdgeWorkloadSpec
	CreatedAt Time
	UpdatedAt Time
}

// EdgeWorkloadRevision is one stored revision of a workload's spec.
type EdgeWorkloadRevision struct {
	Project   string
	Name      string
	Revision  int64
	Spec      EdgeWorkloadSpec
	CreatedAt Time
}

// EdgeWorkloadSpec is what a workload is; field names follow Flotta's
// EdgeWorkload where it has them (deviceSelector, device, type, pod,
// data, imageRegistries) and Kubernetes' PodSpec below pod.spec.
type EdgeWorkloadSpec struct {
	// DeviceSelector selects the devices by label; Device names one host
	// by ID. Exactly one is set.
	DeviceSelector *LabelSelector `json:"deviceSelector,omitempty"`
	Device         string         `json:"device,omitempty"`
	// Type is "pod" (the only kind, as Flotta's).
	Type string      `json:"type,omitempty"`
	Pod  PodTemplate `json:"pod"`
	Data *DataConfig `json:"data,omitempty"`
	// ConfigMaps are the config maps the pod refers to (volumes and
	// env's configMapKeyRef / envFrom configMapRef).
	ConfigMaps []ConfigMap `json:"configmaps,omitempty"`
	// Secrets are the secrets the pod refers to; their values are sealed
	// at rest and never answered.
	Secrets []EdgeSecret `json:"secrets,omitempty"`
	// ImageRegistries are the credentials for pulling the pod's images.
	ImageRegistries *ImageRegistries `json:"imageRegistries,omitempty"`
	// RolloutPolicy, when set, moves the selected devices to a new
	// revision batch by batch (the rollout engine); none: all at once.
	// It is no part of what devices run: changing it alone makes no new
	// revision.
	RolloutPolicy *RolloutPolicy `json:"rolloutPolicy,omitempty"`
}

// LabelSelector is Kubernetes' label selector.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one expression of a selector.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"` // In, NotIn, Exists, DoesNotExist
	Values   []string `json:"values,omitempty"`
}

// Matches reports whether labels satisfy s (every part of it). A nil
// selector matches nothing: a workload with no selector takes no device.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if s == nil {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		v, ok := labels[r.Key]
		switch r.Operator {
		case "In":
			if !ok || !contains(r.Values, v) {
				return false
			}
		case "NotIn":
			if ok && contains(r.Values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// PodTemplate holds the pod's spec (Flotta's pod.spec).
type PodTemplate struct {
	Spec PodSpec `json:"spec"`
}

// PodSpec is the part of Kubernetes' PodSpec that podman kube play runs.
type PodSpec struct {
	Containers     []Container `json:"containers"`
	InitContainers []Container `json:"initContainers,omitempty"`
	Volumes        []Volume    `json:"volumes,omitempty"`
	RestartPolicy  string      `json:"restartPolicy,omitempty"` // Always, OnFailure, Never
	HostNetwork    bool        `json:"hostNetwork,omitempty"`
	Hostname       string      `json:"hostname,omitempty"`
}

// Container is one container of the pod.
type Container struct {
	Name            string                `json:"name"`
	Image           string                `json:"image"`
	ImagePullPolicy string                `json:"imagePullPolicy,omitempty"`
	Command         []string              `json:"command,omitempty"`
	Args            []string              `json:"args,omitempty"`
	WorkingDir      string                `json:"workingDir,omitempty"`
	Env             []EnvVar              `json:"env,omitempty"`
	EnvFrom         []EnvFromSource       `json:"envFrom,omitempty"`
	Ports           []ContainerPort       `json:"ports,omitempty"`
	VolumeMounts    []VolumeMount         `json:"volumeMounts,omitempty"`
	Resources       *ResourceRequirements `json:"resources,omitempty"`
	SecurityContext *SecurityContext      `json:"securityContext,omitempty"`
}

// EnvVar is an environment variable: a literal Value or ValueFrom.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value,omitempty"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource takes a variable's value from a config map or a secret.
type EnvVarSource struct {
	ConfigMapKeyRef *KeySelector `json:"configMapKeyRef,omitempty"`
	SecretKeyRef    *KeySelector `json:"secretKeyRef,omitempty"`
}

// KeySelector names a key of a config map or secret.
type KeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// EnvFromSource takes every key of a config map or secret as variables.
type EnvFromSource struct {
	Prefix       string   `json:"prefix,omitempty"`
	ConfigMapRef *NameRef `json:"configMapRef,omitempty"`
	SecretRef    *NameRef `json:"secretRef,omitempty"`
}

// NameRef names a config map or secret.
type NameRef struct {
	Name string `json:"name"`
}

// ContainerPort is a port of a container, published on the device when
// HostPort is set.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	HostPort      int32  `json:"hostPort,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
	Protocol      string `json:"protocol,omitempty"` // TCP, UDP
}

// VolumeMount mounts a volume of the pod in a container.
type VolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	SubPath   string `json:"subPath,omitempty"`
}

// ResourceRequirements are a container's limits and requests, as
// Kubernetes quantities ("500m", "128Mi").
type ResourceRequirements struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

// SecurityContext is the part of Kubernetes' that podman honours.
type SecurityContext struct {
	Privileged               *bool            `json:"privileged,omitempty"`
	RunAsUser                *int64           `json:"runAsUser,omitempty"`
	RunAsGroup               *int64           `json:"runAsGroup,omitempty"`
	RunAsNonRoot             *bool            `json:"runAsNonRoot,omitempty"`
	ReadOnlyRootFilesystem   *bool            `json:"readOnlyRootFilesystem,omitempty"`
	AllowPrivilegeEscalation *bool            `json:"allowPrivilegeEscalation,omitempty"`
	Capabilities             *PodCapabilities `json:"capabilities,omitempty"`
}

// PodCapabilities are Linux capabilities added to or dropped from a container.
type PodCapabilities struct {
	Add  []string `json:"add,omitempty"`
	Drop []string `json:"drop,omitempty"`
}

// Volume is a volume of the pod: one of its sources is set.
type Volume struct {
	Name      string                 `json:"name"`
	HostPath  *HostPathVolumeSource  `json:"hostPath,omitempty"`
	EmptyDir  *EmptyDirVolumeSource  `json:"emptyDir,omitempty"`
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`
	Secret    *SecretVolumeSource    `json:"secret,omitempty"`
}

// HostPathVolumeSource is a directory or file of the device.
type HostPathVolumeSource struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"` // DirectoryOrCreate, Directory, File, …
}

// EmptyDirVolumeSource is a scratch directory of the pod.
type EmptyDirVolumeSource struct {
	Medium string `json:"medium,omitempty"`
}

// ConfigMapVolumeSource mounts a config map of the workload.
type ConfigMapVolumeSource struct {
	Name string `json:"name"`
}

// SecretVolumeSource mounts a secret of the workload.
type SecretVolumeSource struct {
	SecretName string `json:"secretName"`
}

// ConfigMap is a named set of keys and values the pod may use.
type ConfigMap struct {
	Name string            `json:"name"`
	Data map[string]string `json:"data"`
}

// EdgeSecret is a named set of keys and secret values. In the store each
// Value is sealed; in an API request a Value left out (null) keeps the
// previous revision's value of the same secret and key.
type EdgeSecret struct {
	Name  string           `json:"name"`
	Items []EdgeSecretItem `json:"items"`
}

// EdgeSecretItem is one key of a secret.
type EdgeSecretItem struct {
	Key   string  `json:"key"`
	Value *string `json:"value,omitempty"`
}

// ImageRegistries are credentials for the registries the pod pulls from.
type ImageRegistries struct {
	Auths []RegistryAuth `json:"auths"`
}

// RegistryAuth logs in to one registry. Password is sealed in the store,
// never answered; left out in a request, it keeps the previous revision's.
type RegistryAuth struct {
	Registry string  `json:"registry"` // host[:port]
	Username string  `json:"username"`
	Password *string `json:"password,omitempty"`
}

// DataConfig are the pod's directories synchronised with the project's
// object storage.
type DataConfig struct {
	Egress  []DataPath `json:"egress,omitempty"`
	Ingress []DataPath `json:"ingress,omitempty"`
}

// DataPath is one synchronised directory: Source is the directory in the
// pod's data volume (mounted at /export in every container, as Flotta
// did), Target the path under the device's prefix in the store.
type DataPath struct {
	Source          string `json:"source"`
	Target          string `json:"target"`
	IntervalSeconds uint32 `json:"intervalSeconds,omitempty"`
}

// EdgeWorkloadTarget is the revision one device must run of one workload.
// Revision 0 in a change removes the target.
type EdgeWorkloadTarget struct {
	Workload string
	HostID   string
	Revision int64
}

// Phases of a workload on a device, as the agent reports them.
const (
	PhaseDeploying = "Deploying"
	PhaseRunning   = "Running"
	PhaseDegraded  = "Degraded"
	PhaseExited    = "Exited"
	PhaseError     = "Error"
	PhaseStopped   = "Stopped"
	PhaseRemoving  = "Removing"
	PhaseUnknown   = "Unknown"
)

// EdgeWorkloadStatus is a workload's state on one device, as its agent
// last reported it, and its uploads.
type EdgeWorkloadStatus struct {
	Workload       string
	HostID         string
	Revision       int64
	Phase          string
	LastError      string
	TransitionTime Time
	Containers     []ContainerState
	ReportedAt     Time
	LastDataUpload Time
	UploadErrors   []string
	// LastDataDownload and DownloadErrors are the ingress data paths'.
	LastDataDownload Time
	DownloadErrors   []string
}

// ContainerState is one container's state on a device.
type ContainerState struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	ExitCode int32  `json:"exitCode"`
	Restarts int32  `json:"restarts"`
	Error    string `json:"error,omitempty"`
	Started  Time   `json:"startedAt"`
	Finished Time   `json:"finishedAt"`
}

// Summaries of a device's state of a workload (EdgeWorkloadSummary): the
// workload's status counts its devices by them, and so does the exporter
// (eim_workload_devices).
const (
	SummaryRunning  = "running"
	SummaryDegraded = "degraded"
	SummaryFailed   = "failed"
	SummaryUpdating = "updating"
	SummaryUnknown  = "unknown"
	SummaryRemoving = "removing"
)

// EdgeWorkloadSummary classes a device's state of a workload from its
// target revision (0: none, the workload is being removed from it) and
// what it last reported (revision and phase; phase "" before any report):
// updating while it does not run the target yet or deploys it, unknown
// before any report, failed in Error or Exited, degraded in Degraded or
// Stopped.
func EdgeWorkloadSummary(target, revision int64, phase string) string {
	switch {
	case target == 0:
		return SummaryRemoving
	case phase == "":
		return SummaryUnknown
	case revision != target || phase == PhaseDeploying:
		return SummaryUpdating
	case phase == PhaseRunning:
		return SummaryRunning
	case phase == PhaseError || phase == PhaseExited:
		return SummaryFailed
	}
	return SummaryDegraded
}

// EdgeWorkloadDeviceCount is a number of devices of a workload in one
// state: their target revision (0: removing), the revision and phase they
// report ("" none).
type EdgeWorkloadDeviceCount struct {
	Project  string
	Workload string
	Target   int64
	Revision int64
	Phase    string
	Devices  int
}

// DeviceWorkloads is what one device must run: its version, its targets
// with their revisions' specs, and the log requests it has not answered.
type DeviceWorkloads struct {
	Version int64
	// StatusVersion is the version the device's last stored status
	// report named (0: none), and StatusWanted whether the server asks
	// for its full status.
	StatusVersion int64
	StatusWanted  bool
	Targets       []DeviceWorkload
	Logs          []EdgeWorkloadLogRequest
}

// DeviceVersion is a device's version, as heartbeats answer it, and
// whether the server wants the device's full status.
type DeviceVersion struct {
	Version      int64
	StatusWanted bool
}

// DeviceWorkload is one target of a device with its revision's spec.
type DeviceWorkload struct {
	Name     string
	Revision int64
	Spec     EdgeWorkloadSpec
}

// EdgeWorkloadLogRequest is a user's request for a log tail of a workload
// on a device, answered by the device (Answered set).
type EdgeWorkloadLogRequest struct {
	Project   string
	ID        string
	Workload  string
	HostID    string
	Container string
	Tail      uint32
	CreatedAt Time
	Answered  bool
	Logs      []ContainerLog
	Error     string
}

// ContainerLog is the log tail of one container.
type ContainerLog struct {
	Container string `json:"container"`
	Text      string `json:"text"`
}

// EdgeWorkloadStore keeps edge workloads, their revisions, the devices'
// targets and versions, statuses and log requests (the workloads module).
// Every operation is scoped to a project.
type EdgeWorkloadStore interface {
	// CreateEdgeWorkload stores w at revision 1 (set on w with the times);
	// ECONFLICT when the name is taken.
	CreateEdgeWorkload(ctx context.Context, w *EdgeWorkload) error
	// ReviseEdgeWorkload stores spec as the next revision of the workload,
	// provided its latest is still prev (ECONFLICT otherwise).
	ReviseEdgeWorkload(ctx context.Context, project, name string, prev int64, spec EdgeWorkloadSpec) (*EdgeWorkload, error)
	FindEdgeWorkload(ctx context.Context, project, name string) (*EdgeWorkload, error)
	// ListEdgeWorkloads lists a project's workloads by name; project ""
	// lists every project's.
	ListEdgeWorkloads(ctx context.Context, project string) ([]*EdgeWorkload, error)
	// EdgeWorkloadRevisions lists a workload's revisions, oldest first.
	EdgeWorkloadRevisions(ctx context.Context, project, name string) ([]*EdgeWorkloadRevision, error)
	// DeleteEdgeWorkload removes the workload with its revisions, targets,
	// statuses and log requests; the devices that had it get a new version.
	DeleteEdgeWorkload(ctx context.Context, project, name string) error

	// EdgeWorkloadTargets lists the targets of a project, of one host
	// when hostID is set.
	EdgeWorkloadTargets(ctx context.Context, project, hostID string) ([]EdgeWorkloadTarget, error)
	// SetEdgeWorkloadTargets applies changes (Revision 0 removes) and
	// gives each device whose set changed a new version, in one
	// transaction. A change naming a workload or host that is gone is
	// skipped.
	SetEdgeWorkloadTargets(ctx context.Context, project string, changes []EdgeWorkloadTarget) error
	// DeviceWorkloadVersions returns the devices' versions of a project
	// (every project's when project is ""), by project then host ID, with
	// whether the server wants each one's full status.
	DeviceWorkloadVersions(ctx context.Context, project string) (map[string]map[string]DeviceVersion, error)
	// DeviceWorkloadVersion returns one device's version and mark (zero
	// when it has none).
	DeviceWorkloadVersion(ctx context.Context, project, hostID string) (DeviceVersion, error)
	// DeviceWorkloads reads one device's set, in one transaction.
	DeviceWorkloads(ctx context.Context, project, hostID string) (*DeviceWorkloads, error)

	// RecordEdgeWorkloadStatus replaces the statuses a device reported:
	// those given are stored (for workloads that exist), and the device's
	// others removed (it runs no pod of them). version is the version the
	// report names (0: none, taken as the device's current one); the
	// device's full status is no longer wanted (a KindEdgeDeviceStatus
	// event when it was).
	RecordEdgeWorkloadStatus(ctx context.Context, project, hostID string, version int64, statuses []EdgeWorkloadStatus) error
	// WantEdgeDeviceStatus marks that the server wants the device's full
	// status (its row is made, at version 0, when it has none): a
	// KindEdgeDeviceStatus event when it was not wanted already.
	WantEdgeDeviceStatus(ctx context.Context, project, hostID string) error
	// WantStaleEdgeDeviceStatus marks, in every project, the devices
	// whose version moved before before and whose stored status names
	// an older version: their full status is wanted. It returns how many
	// it marked, with a KindEdgeDevices event per project touched.
	WantStaleEdgeDeviceStatus(ctx context.Context, before time.Time) (int, error)
	// EdgeWorkloadStatuses lists the statuses of a workload by host.
	EdgeWorkloadStatuses(ctx context.Context, project, name string) ([]EdgeWorkloadStatus, error)
	// RecordEdgeWorkloadUploads records an upload round of a device's
	// workload: its time when some file was sent, and its errors.
	RecordEdgeWorkloadUploads(ctx context.Context, project, hostID, name string, at time.Time, errs []string) error
	// RecordEdgeWorkloadDownloads records a download round of a device's
	// workload (its ingress data paths): its time when some file was
	// downloaded or removed, and its errors.
	RecordEdgeWorkloadDownloads(ctx context.Context, project, hostID, name string, at time.Time, errs []string) error

	// CreateEdgeWorkloadLogRequest stores r (ID set by the caller) and
	// gives its device a new version.
	CreateEdgeWorkloadLogRequest(ctx context.Context, r *EdgeWorkloadLogRequest) error
	// AnswerEdgeWorkloadLogRequest stores the device's answer; ENOTFOUND
	// when the request is not the device's.
	AnswerEdgeWorkloadLogRequest(ctx context.Context, project, hostID, id string, logs []ContainerLog, errText string) error
	FindEdgeWorkloadLogRequest(ctx context.Context, project, id string) (*EdgeWorkloadLogRequest, error)

	// EdgeWorkloadDeviceCounts counts every project's devices by
	// workload, target, reported revision and phase (one grouped read, for
	// the exporter).
	EdgeWorkloadDeviceCounts(ctx context.Context) ([]EdgeWorkloadDeviceCount, error)
	// EdgeWorkloadDeviceCountsOf counts the devices of one workload of a
	// project the same way (the API's status: a grouped read, not every
	// device's row).
	EdgeWorkloadDeviceCountsOf(ctx context.Context, project, name string) ([]EdgeWorkloadDeviceCount, error)

	EdgeWorkloadRolloutStore
}

// EdgeWorkloadSecretPurpose binds a sealed value of a workload (a secret's
// item or a registry password) to its project, workload and place.
func EdgeWorkloadSecretPurpose(project, workload, place string) string {
	return "edgeworkload/" + project + "/" + workload + "/" + place
}

// DeviceLabels returns a device's labels, which workloads' selectors match:
// its metadata over what it inherits (h as the inventory expands it, with
// InheritedMetadata and Site), and the facts EIM knows of it under
// DeviceLabelPrefix: eim.io/host (its ID), eim.io/name, eim.io/hostname,
// eim.io/arch (amd64, arm64, … as Kubernetes names them), eim.io/os (its
// instance's OS profile name), eim.io/site and eim.io/region (IDs).
func DeviceLabels(h *Host) map[string]string {
	out := make(map[string]string, len(h.InheritedMetadata)+len(h.Metadata)+8)
	for _, it := range h.InheritedMetadata {
		out[it.Key] = it.Value
	}
	for _, it := range h.Metadata {
		out[it.Key] = it.Value
	}
	set := func(k, v string) {
		if v = labelValue(v); v != "" {
			out[DeviceLabelPrefix+k] = v
		}
	}
	set("host", h.ResourceID)
	set("name", h.Name)
	set("hostname", h.Hostname)
	set("arch", archLabel(h.CPUArchitecture))
	if h.Instance != nil && h.Instance.OS != nil {
		set("os", h.Instance.OS.Name)
	}
	set("site", h.SiteID)
	if h.Site != nil {
		set("region", h.Site.RegionID)
	}
	return out
}

// archLabel names an architecture as Kubernetes' kubernetes.io/arch does.
func archLabel(a string) string {
	switch strings.ToLower(strings.TrimSpace(a)) {
	case "x86_64", "x86-64", "amd64", "x64":
		return "amd64"
	case "aarch64", "arm64", "armv8":
		return "arm64"
	case "":
		return ""
	}
	return strings.ToLower(a)
}

// labelValue makes v a label value: characters other than letters,
// digits, '-', '_' and '.' become '-', at most 63, trimmed to start and
// end with a letter or digit.
func labelValue(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "-_.")
}
