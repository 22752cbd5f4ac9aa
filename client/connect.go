package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// ConnectToken is a connect token as issued: the token is shown once.
type ConnectToken struct {
	ID      string    `json:"id"`
	Cluster string    `json:"cluster"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// ClusterConnection is a cluster's tunnel status.
type ClusterConnection struct {
	Cluster      string     `json:"cluster"`
	Connected    bool       `json:"connected"`
	LastSeen     *time.Time `json:"lastSeen,omitempty"`
	AgentVersion string     `json:"agentVersion,omitempty"`
	RTTMillis    float64    `json:"rttMillis,omitempty"`
	Replica      string     `json:"replica,omitempty"`
	TokenExpires *time.Time `json:"tokenExpires,omitempty"`
}

func connectPath(project, cluster string) string {
	p := "/v2/projects/" + url.PathEscape(project) + "/connect/clusters"
	if cluster != "" {
		p += "/" + url.PathEscape(cluster)
	}
	return p
}

// IssueConnectToken issues a connect token for the cluster, valid for ttl
// (0: the server's default). The cluster's other tokens expire after
// grace (0: at once).
func (c *Client) IssueConnectToken(ctx context.Context, project, cluster string, ttl, grace time.Duration) (*ConnectToken, error) {
	q := url.Values{}
	if ttl > 0 {
		q.Set("ttl", ttl.String())
	}
	if grace > 0 {
		q.Set("grace", grace.String())
	}
	p := connectPath(project, cluster) + "/token"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out ConnectToken
	if err := c.Do(ctx, http.MethodPost, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RevokeConnectTokens makes every connect token of the cluster expire now.
func (c *Client) RevokeConnectTokens(ctx context.Context, project, cluster string) error {
	return c.Do(ctx, http.MethodDelete, connectPath(project, cluster)+"/token", nil, nil)
}

// ClusterConnections lists the project's clusters' tunnels.
func (c *Client) ClusterConnections(ctx context.Context, project string) ([]ClusterConnection, error) {
	var out struct {
		Clusters []ClusterConnection `json:"clusters"`
	}
	if err := c.Do(ctx, http.MethodGet, connectPath(project, ""), nil, &out); err != nil {
		return nil, err
	}
	return out.Clusters, nil
}

// ClusterConnection returns one cluster's tunnel status.
func (c *Client) ClusterConnection(ctx context.Context, project, cluster string) (*ClusterConnection, error) {
	var out ClusterConnection
	if err := c.Do(ctx, http.MethodGet, connectPath(project, cluster), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Kubeconfig returns a kubeconfig reaching the cluster through the
// connect gateway with a short-lived token for the caller.
func (c *Client) Kubeconfig(ctx context.Context, project, cluster string) (string, error) {
	var out struct {
		Kubeconfig string `json:"kubeconfig"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v2/projects/"+url.PathEscape(project)+"/clusters/"+url.PathEscape(cluster)+"/kubeconfigs", nil, &out); err != nil {
		return "", err
	}
	return out.Kubeconfig, nil
}
