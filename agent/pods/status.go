package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Status is an edge workload's state on its device.
type Status string

// The statuses of a workload's pod; the package doc says how each is
// derived.
const (
	Deploying Status = "Deploying"
	Running   Status = "Running"
	Degraded  Status = "Degraded"
	Exited    Status = "Exited"
	Error     Status = "Error"
	Stopped   Status = "Stopped"
)

// Info is an EIM-managed pod as podman reports it.
type Info struct {
	Workload  string
	Revision  int64
	PodID     string
	PodStatus string // podman's, e.g. "Degraded"
	Status    Status
	// Incomplete is a pod some of whose containers are missing or were
	// never started: a play interrupted (the agent killed, the device
	// losing power). Apply of its revision replaces it.
	Incomplete bool
	Containers []Container // by name
}

// Container is one container of a workload's pod (the infra container is
// not listed).
type Container struct {
	Name     string // as in the pod YAML
	State    string // podman's: created, running, exited, stopped, paused, …
	ExitCode int
	Restarts int
	Error    string // podman's, when it could not run the container
	Started  time.Time
	Finished time.Time
}

// podJSON is a pod of `podman pod ps --format json`.
type podJSON struct {
	ID         string `json:"Id"`
	Name       string
	Status     string
	InfraID    string `json:"InfraId"`
	Labels     map[string]string
	Containers []struct {
		ID    string `json:"Id"`
		Names string // podman's one name of the container
	}
}

// complete reports whether the pod has every container its
// LabelContainers names. kube play creates the pod, then pulls each
// image and creates each container: an agent killed meanwhile leaves a
// pod with its revision's label and some of its containers. A pod made
// before the label existed counts as complete.
func (p podJSON) complete() bool {
	want, ok := p.Labels[LabelContainers]
	if !ok {
		return true
	}
	have := map[string]bool{}
	for _, c := range p.Containers {
		have[c.Names] = true
	}
	for _, name := range strings.Split(want, ",") {
		if name != "" && !have[p.Name+"-"+name] {
			return false
		}
	}
	return true
}

// inspectJSON is a container of `podman container inspect`.
type inspectJSON struct {
	ID           string `json:"Id"`
	Name         string
	Pod          string
	IsInfra      bool
	RestartCount int
	State        struct {
		Status     string
		ExitCode   int
		Error      string
		StartedAt  time.Time
		FinishedAt time.Time
	}
}

// List returns the pods the runner made (found by their label), by
// workload.
func (r *Runner) List(ctx context.Context) ([]Info, error) {
	return r.listWhere(ctx, "label="+LabelWorkload)
}

// listWhere returns the pods podman's filter selects.
func (r *Runner) listWhere(ctx context.Context, filter string) ([]Info, error) {
	// A container removed between the listing of the pods and their
	// inspection fails the inspection: listed again, a few times.
	for i := 0; ; i++ {
		infos, err := r.list(ctx, filter)
		var pe *podmanError
		if err == nil || i == 2 || !errors.As(err, &pe) || !strings.Contains(pe.stderr, "no such container") {
			return infos, err
		}
	}
}

func (r *Runner) list(ctx context.Context, filter string) ([]Info, error) {
	pods, err := r.pods(ctx, filter)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range pods {
		for _, c := range p.Containers {
			ids = append(ids, c.ID)
		}
	}
	ctrs := map[string]inspectJSON{}
	if len(ids) > 0 {
		out, err := r.podman(ctx, append([]string{"container", "inspect", "--format", "json"}, ids...)...)
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		var list []inspectJSON
		if err := json.Unmarshal(out, &list); err != nil {
			return nil, fmt.Errorf("list pods: container inspect: %w", err)
		}
		for _, c := range list {
			ctrs[c.ID] = c
		}
	}
	infos := make([]Info, 0, len(pods))
	for _, p := range pods {
		rev, _ := strconv.ParseInt(p.Labels[LabelRevision], 10, 64)
		info := Info{Workload: p.Labels[LabelWorkload], Revision: rev, PodID: p.ID, PodStatus: p.Status, Incomplete: !p.complete()}
		for _, pc := range p.Containers {
			c, ok := ctrs[pc.ID]
			if !ok {
				continue
			}
			if c.IsInfra || c.ID == p.InfraID {
				continue
			}
			info.Containers = append(info.Containers, Container{
				Name:     strings.TrimPrefix(c.Name, p.Name+"-"),
				State:    containerState(c.State.Status),
				ExitCode: c.State.ExitCode,
				Restarts: c.RestartCount,
				Error:    c.State.Error,
				Started:  c.State.StartedAt,
				Finished: c.State.FinishedAt,
			})
		}
		sort.Slice(info.Containers, func(i, j int) bool { return info.Containers[i].Name < info.Containers[j].Name })
		info.Status = derive(p.Status, info.Containers)
		// kube play starts the containers once it has created them all:
		// one never started is a play interrupted before it was done. (A
		// reboot resets a container's state, not its start time.)
		for _, c := range info.Containers {
			if c.Started.IsZero() {
				info.Incomplete = true
			}
		}
		infos = append(infos, info)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Workload < infos[j].Workload })
	return infos, nil
}

// containerState is podman's state of a container as the runner reports
// it. Libpod's "stopped" is a container whose process has ended but whose
// cleanup has not run yet; a moment later the same container reads
// "exited". Reporting both as "exited" keeps a container that exited on its
// own from passing for one an operator stopped (its exit code tells which).
func containerState(s string) string {
	if s == "stopped" {
		return "exited"
	}
	return s
}

// derive maps podman's pod status and the containers' states to a
// workload status (the order is the package doc's).
func derive(podStatus string, ctrs []Container) Status {
	if podStatus == "Error" || podStatus == "Dead" {
		return Error
	}
	for _, c := range ctrs {
		if c.State == "error" || c.State == "dead" || c.Error != "" {
			return Error
		}
	}
	if podStatus == "Created" {
		return Deploying
	}
	running, exited, killed := 0, 0, 0
	for _, c := range ctrs {
		switch containerState(c.State) {
		case "created", "configured", "initialized":
			return Deploying
		case "running":
			running++
		case "exited":
			exited++
			if c.ExitCode == 128+15 || c.ExitCode == 128+9 {
				killed++
			}
		}
	}
	n := len(ctrs)
	switch {
	case n == 0:
		return Error
	case podStatus == "Stopped", killed == n:
		return Stopped
	case running == n:
		return Running
	case exited == n:
		return Exited
	default:
		return Degraded
	}
}

// podsOf returns the pods of workload.
func (r *Runner) podsOf(ctx context.Context, workload string) ([]podJSON, error) {
	return r.pods(ctx, "label="+LabelWorkload+"="+workload)
}

func (r *Runner) pods(ctx context.Context, filter string) ([]podJSON, error) {
	out, err := r.podman(ctx, "pod", "ps", "--filter", filter, "--format", "json")
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var pods []podJSON
	if err := json.Unmarshal(out, &pods); err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return pods, nil
}
