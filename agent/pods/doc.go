// Package pods runs an edge workload on its device as a podman pod: the
// lowest layer of device workloads, below the agent's workload module.
//
// A Runner drives the podman CLI (`podman kube play`, `podman pod rm`,
// `podman pod ps`, `podman container inspect`, `podman logs`). Podman's
// own state is the only state: every pod the runner creates is named
// after its workload and labelled eim.io/edge-workload=<workload> and
// eim.io/revision=<revision>, so List finds them after the agent restarts
// or the device reboots, without a file of the agent's.
//
// # Apply, Remove
//
// Apply is idempotent. A pod of the workload at the same revision is left
// as it is, whatever its state (not recreated, not restarted); a pod at
// another revision is removed first and the new one played (podman 4.3's
// `kube play --replace` is not used: the runner decides by the label).
// A pod at the same revision that lacks one of its containers, or has
// one that never started, is the remains of a play that was interrupted
// (the agent killed, the power lost: kube play creates the pod first,
// then pulls and creates each container, then starts them all) and is
// replaced too. Podman cannot label a pod once it exists, so
// completeness is not a mark set after the play: the pod's label
// eim.io/containers names the containers it must have (a pod made before
// that label existed is judged by its start times only), and a container
// that ran keeps its start time across reboots, which reset its state.
// List reports such a pod as Incomplete. A play killed while it
// created a container can also leave that container in podman's storage
// but not in its database, where no pod lists it and its name fails every
// later play: before a play, Apply removes containers of the pod's
// container names (`podman rm` removes such storage containers too).
// The workload's secrets become podman secrets named
// eim_<workload>_<secret> (the pod's secretKeyRef, secretRef and secret
// volume names are rewritten to match), so two workloads' secrets of the
// same name never meet; they are replaced on every new revision and
// removed with the pod. Config maps are passed to `kube play --configmap`.
// Registry logins (Pod.Registries) exist only for the play: an auth file
// (mode 0600) in the play's temporary directory, passed with --authfile
// and removed with it; podman pulls an image only when it lacks it, so a
// pod started again later needs no login.
// A play that fails (an image missing, a container that cannot start) is
// undone, pod and secrets, so that the next Apply tries again rather than
// finding the revision's label on a half-made pod. Remove of an absent
// workload is success.
//
// # Status
//
// Podman's pod status (Created, Running, Degraded, Exited, Stopped,
// Paused, Error, Dead) counts the pod's infra container, so a pod whose
// only container has exited may read "Degraded" while the infra runs, or
// "Exited" once kube play's exit policy stops the infra too. The runner
// derives the workload's status from podman's pod status and the states
// of the workload's own containers (the infra is not counted), the first
// rule that holds:
//
//   - Error: the pod status is Error or Dead, or a container is in state
//     error/dead or carries an error from podman (e.g. its start failed).
//   - Deploying: the pod status is Created (kube play is making it), or a
//     container is created/configured/initialized (not started yet).
//   - Error, again: the pod has no container of the workload.
//   - Stopped: the pod status is Stopped, or every container exited by
//     SIGTERM or SIGKILL (exit code 143 or 137: what `podman pod stop` and
//     a shutdown do).
//   - Running: every container is running.
//   - Exited: every container exited (on its own: its exit code tells
//     success from failure).
//   - Degraded: anything else: some containers running and some not, or
//     paused.
//
// Each container reports podman's state (running, exited, …; libpod's
// "stopped", an ended container not yet cleaned up, reads "exited"), exit code,
// restart count (podman restarts containers by the pod's restartPolicy)
// and start/finish times.
//
// # Left to the agent
//
// Rendering the pod YAML from the edge workload's spec and choosing the
// revision are the server's; creating the hostPath directories
// (HostPaths says which) before the play, starting a stopped pod again
// (Start: Apply leaves a pod at the same revision alone), removing pods
// no longer wanted (List then Remove), status transition times, change
// detection for the reports, and retries with back-off are the agent's
// (agent/workloads.go).
package pods
