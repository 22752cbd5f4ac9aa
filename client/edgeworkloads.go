package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim"
)

// Edge workloads (the workloads module): /v1/projects/{p}/edgeworkloads.

// EdgeWorkload is a workload as the API answers it (no secret values).
type EdgeWorkload = eim.EdgeWorkloadView

// EdgeWorkloadInput is the body of a create or replace.
type EdgeWorkloadInput = eim.EdgeWorkloadInput

// EdgeWorkloads is a page of the list.
type EdgeWorkloads struct {
	EdgeWorkloads []*EdgeWorkload `json:"edgeWorkloads"`
	TotalElements int             `json:"totalElements"`
	HasNext       bool            `json:"hasNext"`
}

func edgeWorkloadsPath(project string) string { return ProjectPath(project) + "/edgeworkloads" }

func edgeWorkloadPath(project, name string) string {
	return edgeWorkloadsPath(project) + "/" + url.PathEscape(name)
}

// CreateEdgeWorkload creates a workload (revision 1).
func (c *Client) CreateEdgeWorkload(ctx context.Context, project string, in *EdgeWorkloadInput) (*EdgeWorkload, error) {
	var out EdgeWorkload
	if err := c.Do(ctx, http.MethodPost, edgeWorkloadsPath(project), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReplaceEdgeWorkload replaces a workload's spec (a new revision when it
// changed).
func (c *Client) ReplaceEdgeWorkload(ctx context.Context, project string, in *EdgeWorkloadInput) (*EdgeWorkload, error) {
	var out EdgeWorkload
	if err := c.Do(ctx, http.MethodPut, edgeWorkloadPath(project, in.Name), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ApplyEdgeWorkload creates the workload, or replaces it when it exists.
func (c *Client) ApplyEdgeWorkload(ctx context.Context, project string, in *EdgeWorkloadInput) (*EdgeWorkload, error) {
	out, err := c.CreateEdgeWorkload(ctx, project, in)
	if eim.ErrorCode(err) == eim.ECONFLICT {
		return c.ReplaceEdgeWorkload(ctx, project, in)
	}
	return out, err
}

// GetEdgeWorkload reads a workload.
func (c *Client) GetEdgeWorkload(ctx context.Context, project, name string) (*EdgeWorkload, error) {
	var out EdgeWorkload
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEdgeWorkloads reads a page of the project's workloads.
func (c *Client) ListEdgeWorkloads(ctx context.Context, project, filter string, pageSize, offset int) (*EdgeWorkloads, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	p := edgeWorkloadsPath(project)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out EdgeWorkloads
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEdgeWorkload removes a workload from the project and its devices.
func (c *Client) DeleteEdgeWorkload(ctx context.Context, project, name string) error {
	return c.Do(ctx, http.MethodDelete, edgeWorkloadPath(project, name), nil, nil)
}

// EdgeWorkloadStatus reads a workload's status and its devices.
func (c *Client) EdgeWorkloadStatus(ctx context.Context, project, name string) (*eim.EdgeWorkloadStatusView, []eim.EdgeWorkloadDeviceView, error) {
	var st eim.EdgeWorkloadStatusView
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name)+"/status", nil, &st); err != nil {
		return nil, nil, err
	}
	var ds struct {
		Devices []eim.EdgeWorkloadDeviceView `json:"devices"`
	}
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name)+"/devices", nil, &ds); err != nil {
		return nil, nil, err
	}
	return &st, ds.Devices, nil
}

// EdgeWorkloadRollout reads a workload's rollout (ENOTFOUND when it has
// none: no rollout policy, or none started yet).
func (c *Client) EdgeWorkloadRollout(ctx context.Context, project, name string) (*eim.EdgeWorkloadRolloutView, error) {
	var out eim.EdgeWorkloadRolloutView
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name)+"/rollout", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EdgeWorkloadRolloutAction pauses, resumes or aborts a workload's
// rollout (action "pause", "resume", "abort") and answers its state.
func (c *Client) EdgeWorkloadRolloutAction(ctx context.Context, project, name, action string) (*eim.EdgeWorkloadRolloutView, error) {
	switch action {
	case "pause", "resume", "abort":
	default:
		return nil, fmt.Errorf("rollout action %q: want pause, resume or abort", action)
	}
	var out eim.EdgeWorkloadRolloutView
	if err := c.Do(ctx, http.MethodPost, edgeWorkloadPath(project, name)+"/rollout/"+action, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RollbackEdgeWorkload makes the previous revision of the workload's
// rollout its next revision, rolled out as any other; it answers the
// workload at that revision.
func (c *Client) RollbackEdgeWorkload(ctx context.Context, project, name string) (*EdgeWorkload, error) {
	var out EdgeWorkload
	if err := c.Do(ctx, http.MethodPost, edgeWorkloadPath(project, name)+"/rollout/rollback", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EdgeWorkloadLogs asks a device for the workload's log tail; the answer
// is pending (State "pending") when the device did not answer within the
// server's wait: poll it with EdgeWorkloadLogResult.
func (c *Client) EdgeWorkloadLogs(ctx context.Context, project, name, host, container string, tail int) (*eim.EdgeWorkloadLogView, error) {
	q := url.Values{"host": {host}}
	if container != "" {
		q.Set("container", container)
	}
	if tail > 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	var out eim.EdgeWorkloadLogView
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name)+"/logs?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EdgeWorkloadLogResult reads a log request.
func (c *Client) EdgeWorkloadLogResult(ctx context.Context, project, name, id string) (*eim.EdgeWorkloadLogView, error) {
	var out eim.EdgeWorkloadLogView
	if err := c.Do(ctx, http.MethodGet, edgeWorkloadPath(project, name)+"/logs/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Flotta's EdgeWorkload resource (management.project-flotta.io/v1alpha1).
const (
	FlottaAPIVersion = "management.project-flotta.io/v1alpha1"
	FlottaKind       = "EdgeWorkload"
)

// ParseEdgeWorkload reads a workload document: EIM's own (JSON or YAML:
// name and spec), or a Flotta EdgeWorkload as Flotta users have them
// (apiVersion management.project-flotta.io/v1alpha1, kind EdgeWorkload),
// mapped field by field (docs/workloads.md); what cannot be mapped is
// refused with the field named.
func ParseEdgeWorkload(doc []byte) (*EdgeWorkloadInput, error) {
	var generic map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&generic); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "not a JSON or YAML document: %v", err)
	}
	var more any
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, eim.Errorf(eim.EINVALID, "one document expected, got more")
	}
	j, err := json.Marshal(generic)
	if err != nil {
		return nil, eim.Errorf(eim.EINVALID, "document: %v", err)
	}
	if _, ok := generic["apiVersion"]; ok {
		return fromFlotta(j, generic)
	}
	var in EdgeWorkloadInput
	if err := strict(j, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

func strict(j []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(j))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return eim.Errorf(eim.EINVALID, "%s: not a field EIM knows here", strings.Trim(f, `"`))
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return eim.Errorf(eim.EINVALID, "%s", eim.JSONTypeProblem(te))
		}
		return eim.Errorf(eim.EINVALID, "%v", err)
	}
	return nil
}

// flottaDoc is the part of Flotta's EdgeWorkload that maps to EIM's.
type flottaDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"` // a project replaces it
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		DeviceSelector *eim.LabelSelector `json:"deviceSelector"`
		Device         string             `json:"device"`
		Type           string             `json:"type"`
		Pod            *struct {
			Spec eim.PodSpec `json:"spec"`
		} `json:"pod"`
		Data            *eim.DataConfig `json:"data"`
		ImageRegistries *struct {
			SecretRef *struct {
				Name string `json:"name"`
			} `json:"secretRef"`
		} `json:"imageRegistries"`
		Metrics       any `json:"metrics"`
		LogCollection any `json:"logCollection"`
	} `json:"spec"`
	Status any `json:"status"`
}

func fromFlotta(j []byte, generic map[string]any) (*EdgeWorkloadInput, error) {
	if generic["apiVersion"] != FlottaAPIVersion || generic["kind"] != FlottaKind {
		return nil, eim.Errorf(eim.EINVALID, "apiVersion %v, kind %v: the only foreign document taken is Flotta's (apiVersion %s, kind %s)",
			generic["apiVersion"], generic["kind"], FlottaAPIVersion, FlottaKind)
	}
	var f flottaDoc
	if err := strict(j, &f); err != nil {
		return nil, eim.Errorf(eim.EINVALID, "Flotta EdgeWorkload: %s", eim.ErrorMessage(err))
	}
	refuse := func(field, why string) error {
		return eim.Errorf(eim.EINVALID, "Flotta EdgeWorkload: %s: %s", field, why)
	}
	switch {
	case f.Spec.ImageRegistries != nil:
		return nil, refuse("spec.imageRegistries.secretRef", "EIM cannot read a Kubernetes secret: give the registry's credentials in EIM's spec.imageRegistries.auths")
	case f.Spec.Metrics != nil:
		return nil, refuse("spec.metrics", "workload metrics are not collected by EIM; remove it")
	case f.Spec.LogCollection != nil:
		return nil, refuse("spec.logCollection", "log collection to a syslog server is not in EIM; remove it (log tails: eim edgeworkload logs)")
	case f.Spec.Pod == nil:
		return nil, refuse("spec.pod", "required")
	case f.Spec.Device != "" && !eim.ValidID(eim.KindHost, f.Spec.Device):
		return nil, refuse("spec.device", fmt.Sprintf("%q: a device is an EIM host: give its ID (host-…)", f.Spec.Device))
	}
	in := &EdgeWorkloadInput{Name: f.Metadata.Name, Spec: eim.EdgeWorkloadSpec{DeviceSelector: f.Spec.DeviceSelector, Device: f.Spec.Device,
		Type: f.Spec.Type, Pod: eim.PodTemplate{Spec: f.Spec.Pod.Spec}, Data: f.Spec.Data}}
	return in, nil
}
