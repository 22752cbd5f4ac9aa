package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// The clusters module's v2 API (docs/clusters.md).

// ClusterTemplate is a cluster template; Configuration is the original's
// clusterconfiguration object, kept as JSON.
type ClusterTemplate struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	KubernetesVersion    string            `json:"kubernetesVersion"`
	Description          string            `json:"description,omitempty"`
	ControlPlaneProvider string            `json:"controlplaneprovidertype,omitempty"`
	InfraProvider        string            `json:"infraprovidertype,omitempty"`
	Configuration        json.RawMessage   `json:"clusterconfiguration,omitempty"`
	Network              *ClusterNetwork   `json:"clusterNetwork,omitempty"`
	Labels               map[string]string `json:"cluster-labels,omitempty"`
	Artifacts            []ClusterArtifact `json:"artifacts,omitempty"`
}

// The template's parts are the domain's own.
type (
	ClusterNetwork  = eim.ClusterNetwork
	NetworkRanges   = eim.NetworkRanges
	ClusterArtifact = eim.ClusterArtifact
)

// TemplateList is a page of templates and the project's default.
type TemplateList struct {
	DefaultTemplateInfo *TemplateRef      `json:"defaultTemplateInfo,omitempty"`
	TemplateInfoList    []ClusterTemplate `json:"templateInfoList"`
	TotalElements       int               `json:"totalElements"`
}

// TemplateRef names a template.
type TemplateRef struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version"`
}

// ClusterNodeSpec is a node of a cluster to create or of its new node
// list: a host (ID or UUID) and its role (all, controlplane, worker).
type ClusterNodeSpec struct {
	ID   string `json:"id"`
	Role string `json:"role,omitempty"`
}

// ClusterSpec is a cluster to create.
type ClusterSpec struct {
	Name     string            `json:"name,omitempty"`
	Template string            `json:"template,omitempty"`
	Nodes    []ClusterNodeSpec `json:"nodes"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// GenericStatus is a status of a cluster.
type GenericStatus struct {
	Message   string `json:"message"`
	Indicator string `json:"indicator"`
	Timestamp uint64 `json:"timestamp"`
}

// ClusterNode is a node of a cluster and its condition.
type ClusterNode struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Status struct {
		Condition string `json:"condition"`
		Reason    string `json:"reason"`
		Timestamp string `json:"timestamp"`
	} `json:"status"`
}

// Cluster is a cluster as listed (Template and Nodes only from GetCluster).
type Cluster struct {
	Name                string            `json:"name"`
	KubernetesVersion   string            `json:"kubernetesVersion"`
	Template            string            `json:"template,omitempty"`
	Labels              map[string]string `json:"labels"`
	LifecyclePhase      GenericStatus     `json:"lifecyclePhase"`
	ProviderStatus      GenericStatus     `json:"providerStatus"`
	ControlPlaneReady   GenericStatus     `json:"controlPlaneReady"`
	InfrastructureReady GenericStatus     `json:"infrastructureReady"`
	NodeHealth          GenericStatus     `json:"nodeHealth"`
	NodeQuantity        int               `json:"nodeQuantity"`
	Nodes               []ClusterNode     `json:"nodes,omitempty"`
}

// ClusterQuery selects clusters or templates: the original's filter
// (field=value, value* a prefix, OR/AND), orderBy and paging.
type ClusterQuery struct {
	Filter, OrderBy  string
	PageSize, Offset int
}

func (q ClusterQuery) encode() string {
	v := url.Values{}
	if q.Filter != "" {
		v.Set("filter", q.Filter)
	}
	if q.OrderBy != "" {
		v.Set("orderBy", q.OrderBy)
	}
	if q.PageSize > 0 {
		v.Set("pageSize", strconv.Itoa(q.PageSize))
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func v2(project, path string) string { return "/v2/projects/" + url.PathEscape(project) + path }

// ListClusterTemplates returns a page of the project's templates.
func (c *Client) ListClusterTemplates(ctx context.Context, project string, q ClusterQuery) (*TemplateList, error) {
	var out TemplateList
	return &out, c.Do(ctx, http.MethodGet, v2(project, "/templates"+q.encode()), nil, &out)
}

// GetClusterTemplate returns a template.
func (c *Client) GetClusterTemplate(ctx context.Context, project, name, version string) (*ClusterTemplate, error) {
	var out ClusterTemplate
	return &out, c.Do(ctx, http.MethodGet, v2(project, "/templates/"+url.PathEscape(name)+"/"+url.PathEscape(version)), nil, &out)
}

// CreateClusterTemplate imports a template.
func (c *Client) CreateClusterTemplate(ctx context.Context, project string, t *ClusterTemplate) error {
	return c.Do(ctx, http.MethodPost, v2(project, "/templates"), t, nil)
}

// DeleteClusterTemplate deletes a template no cluster uses.
func (c *Client) DeleteClusterTemplate(ctx context.Context, project, name, version string) error {
	return c.Do(ctx, http.MethodDelete, v2(project, "/templates/"+url.PathEscape(name)+"/"+url.PathEscape(version)), nil, nil)
}

// SetDefaultClusterTemplate makes a template the project's default
// (version "": its latest).
func (c *Client) SetDefaultClusterTemplate(ctx context.Context, project, name, version string) error {
	return c.Do(ctx, http.MethodPut, v2(project, "/templates/"+url.PathEscape(name)+"/default"), TemplateRef{Version: version}, nil)
}

// ClusterTemplateVersions returns a template's versions, oldest first.
func (c *Client) ClusterTemplateVersions(ctx context.Context, project, name string) ([]string, error) {
	var out struct {
		VersionList []string `json:"versionList"`
	}
	return out.VersionList, c.Do(ctx, http.MethodGet, v2(project, "/templates/"+url.PathEscape(name)+"/versions"), nil, &out)
}

// ListClusters returns a page of the project's clusters and their number.
func (c *Client) ListClusters(ctx context.Context, project string, q ClusterQuery) ([]Cluster, int, error) {
	var out struct {
		Clusters      []Cluster `json:"clusters"`
		TotalElements int       `json:"totalElements"`
	}
	err := c.Do(ctx, http.MethodGet, v2(project, "/clusters"+q.encode()), nil, &out)
	return out.Clusters, out.TotalElements, err
}

// GetCluster returns a cluster with its nodes.
func (c *Client) GetCluster(ctx context.Context, project, name string) (*Cluster, error) {
	var out Cluster
	return &out, c.Do(ctx, http.MethodGet, v2(project, "/clusters/"+url.PathEscape(name)), nil, &out)
}

// CreateCluster creates a cluster and returns its name (the answer is
// the original's "successfully created cluster NAME").
func (c *Client) CreateCluster(ctx context.Context, project string, s *ClusterSpec) (string, error) {
	var msg string
	err := c.Do(ctx, http.MethodPost, v2(project, "/clusters"), s, &msg)
	return strings.TrimPrefix(msg, "successfully created cluster "), err
}

// DeleteCluster deletes a cluster (its nodes uninstall first; force: its
// records go at once).
func (c *Client) DeleteCluster(ctx context.Context, project, name string, force bool) error {
	p := v2(project, "/clusters/"+url.PathEscape(name))
	if force {
		p += "?force=true"
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}

// SetClusterNodes makes the cluster's nodes those given: new hosts join,
// nodes left out are removed (drained first).
func (c *Client) SetClusterNodes(ctx context.Context, project, name string, nodes []ClusterNodeSpec) error {
	return c.Do(ctx, http.MethodPut, v2(project, "/clusters/"+url.PathEscape(name)+"/nodes"), nodes, nil)
}

// RemoveClusterNode removes a node (drained first unless force).
func (c *Client) RemoveClusterNode(ctx context.Context, project, name, nodeID string, force bool) error {
	p := v2(project, "/clusters/"+url.PathEscape(name)+"/nodes/"+url.PathEscape(nodeID))
	if force {
		p += "?force=true"
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}

// SetClusterLabels replaces a cluster's labels.
func (c *Client) SetClusterLabels(ctx context.Context, project, name string, labels map[string]string) error {
	return c.Do(ctx, http.MethodPut, v2(project, "/clusters/"+url.PathEscape(name)+"/labels"), map[string]any{"labels": labels}, nil)
}

// UpgradeCluster moves a cluster to a template, a node at a time (the
// same template again retries a failed node).
func (c *Client) UpgradeCluster(ctx context.Context, project, name, template, version string) error {
	return c.Do(ctx, http.MethodPut, v2(project, "/clusters/"+url.PathEscape(name)+"/template"), TemplateRef{Name: template, Version: version}, nil)
}
