package client

import (
	"context"
	"net/http"
	"net/url"
)

// UpdateCounts counts instances by the state of their OS updates (see
// GetInstanceUpdatesSummaryResponse in the API document).
type UpdateCounts struct {
	Total             int `json:"total"`
	UpToDate          int `json:"upToDate"`
	Updating          int `json:"updating"`
	Failed            int `json:"failed"`
	Unknown           int `json:"unknown"`
	OSUpdateAvailable int `json:"osUpdateAvailable"`
}

// OSUpdateCounts are the counts of the instances of one OS profile.
type OSUpdateCounts struct {
	OSResourceID string `json:"osResourceId"`
	Name         string `json:"name"`
	ProfileName  string `json:"profileName"`
	ImageID      string `json:"imageId"`
	UpdateCounts
}

// UpdatesSummary is the fleet-wide view of OS updates: the project's
// counts, and those per OS profile (ordered by name).
type UpdatesSummary struct {
	UpdateCounts
	OperatingSystems []OSUpdateCounts `json:"operatingSystems"`
}

// UpdatesSummary counts the project's instances matching filter ("" for
// all) by OS update state, in all and per OS profile.
func (c *Client) UpdatesSummary(ctx context.Context, project, filter string) (*UpdatesSummary, error) {
	p := ProjectPath(project) + "/compute/instances/updates_summary"
	if filter != "" {
		p += "?filter=" + url.QueryEscape(filter)
	}
	var out UpdatesSummary
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
