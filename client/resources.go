package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/eimhq/eim"
)

// paths are the collection paths of each kind below /v1/projects/{name}.
var paths = map[eim.Kind]string{
	eim.KindRegion:           "/regions",
	eim.KindSite:             "/sites",
	eim.KindHost:             "/compute/hosts",
	eim.KindInstance:         "/compute/instances",
	eim.KindOS:               "/compute/os",
	eim.KindProvider:         "/providers",
	eim.KindSingleSchedule:   "/schedules/single",
	eim.KindRepeatedSchedule: "/schedules/repeated",
	eim.KindLocalAccount:     "/localAccounts",
	eim.KindCustomConfig:     "/customConfigs",
	eim.KindOSUpdatePolicy:   "/os-update-policies",
	eim.KindOSUpdateRun:      "/os-update-runs",
	eim.KindWorkload:         "/compute/workloads",
	eim.KindWorkloadMember:   "/workload_members",
}

// KindPath returns the collection path of kind k below a project, e.g.
// "/compute/hosts".
func KindPath(k eim.Kind) (string, bool) {
	p, ok := paths[k]
	return p, ok
}

// A Collection is where an API type is served: its path below a project
// and the name of its list in list answers. Most are one kind's
// (KindCollection); the telemetry kinds have one per type (logs, metrics).
type Collection struct {
	Kind   eim.Kind
	Path   string
	Plural string
}

// The telemetry collections.
var (
	TelemetryLogsGroups      = Collection{eim.KindTelemetryGroup, "/telemetry/groups/logs", eim.TelemetryLogsGroup.Plural}
	TelemetryMetricsGroups   = Collection{eim.KindTelemetryGroup, "/telemetry/groups/metrics", eim.TelemetryMetricsGroup.Plural}
	TelemetryLogsProfiles    = Collection{eim.KindTelemetryProfile, "/telemetry/profiles/logs", eim.TelemetryLogsProfile.Plural}
	TelemetryMetricsProfiles = Collection{eim.KindTelemetryProfile, "/telemetry/profiles/metrics", eim.TelemetryMetricsProfile.Plural}
)

// KindCollection returns the collection of kind k, when it has one of its
// own (not the telemetry kinds: use their Collections).
func KindCollection(k eim.Kind) (Collection, bool) {
	p, ok := paths[k]
	if !ok {
		return Collection{}, false
	}
	return Collection{Kind: k, Path: p, Plural: eim.SchemaOf(k).Plural}, true
}

func kindCollection(k eim.Kind) (Collection, error) {
	c, ok := KindCollection(k)
	if !ok {
		return Collection{}, eim.Errorf(eim.EINVALID, "kind %q has no API path", k)
	}
	return c, nil
}

// ProjectPath returns "/v1/projects/{project}" with the name escaped.
func ProjectPath(project string) string {
	return "/v1/projects/" + url.PathEscape(project)
}

func item(project string, k eim.Kind, id string) (string, error) {
	col, err := kindCollection(k)
	if err != nil {
		return "", err
	}
	return itemAt(project, col, id)
}

func itemAt(project string, col Collection, id string) (string, error) {
	if id == "" {
		return "", eim.Errorf(eim.EINVALID, "resource ID: must not be empty")
	}
	return ProjectPath(project) + col.Path + "/" + url.PathEscape(id), nil
}

// ListOptions select and page a list. Zero values are left to the server
// (its default page size is 20).
type ListOptions struct {
	Filter   string // AIP-160
	OrderBy  string // AIP-132
	PageSize int
	Offset   int
	// Params are further query parameters, e.g. the telemetry profile
	// lists' instanceId and showInherited.
	Params url.Values
}

func (o ListOptions) query() string {
	q := url.Values{}
	for k, vs := range o.Params {
		q[k] = vs
	}
	if o.Filter != "" {
		q.Set("filter", o.Filter)
	}
	if o.OrderBy != "" {
		q.Set("orderBy", o.OrderBy)
	}
	if o.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(o.PageSize))
	}
	if o.Offset != 0 {
		q.Set("offset", strconv.Itoa(o.Offset))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Page is one page of a list: the resources as the server sent them, the
// number matching regardless of paging, and whether more follow.
type Page struct {
	Items   []json.RawMessage
	Total   int
	HasNext bool
}

// List returns one page of resources of kind k.
func (c *Client) List(ctx context.Context, project string, k eim.Kind, opts ListOptions) (*Page, error) {
	col, err := kindCollection(k)
	if err != nil {
		return nil, err
	}
	return c.ListAt(ctx, project, col, opts)
}

// ListAt returns one page of a collection.
func (c *Client) ListAt(ctx context.Context, project string, col Collection, opts ListOptions) (*Page, error) {
	var raw map[string]json.RawMessage
	if err := c.Do(ctx, http.MethodGet, ProjectPath(project)+col.Path+opts.query(), nil, &raw); err != nil {
		return nil, err
	}
	page := &Page{}
	if err := json.Unmarshal(raw[col.Plural], &page.Items); err != nil && raw[col.Plural] != nil {
		return nil, eim.Errorf(eim.EINTERNAL, "list %s: bad %q in the answer: %v", col.Path, col.Plural, err)
	}
	if page.Items == nil {
		page.Items = []json.RawMessage{}
	}
	_ = json.Unmarshal(raw["totalElements"], &page.Total)
	_ = json.Unmarshal(raw["hasNext"], &page.HasNext)
	return page, nil
}

// ListOf returns one page of resources of T's kind, decoded.
func ListOf[T any, PT interface {
	*T
	eim.Resource
}](ctx context.Context, c *Client, project string, opts ListOptions) ([]PT, *Page, error) {
	k := PT(new(T)).ResourceKind()
	page, err := c.List(ctx, project, k, opts)
	if err != nil {
		return nil, nil, err
	}
	out := make([]PT, len(page.Items))
	for i, raw := range page.Items {
		out[i] = new(T)
		if err := json.Unmarshal(raw, out[i]); err != nil {
			return nil, nil, eim.Errorf(eim.EINTERNAL, "list %s: decoding item %d: %v", k, i, err)
		}
	}
	return out, page, nil
}

// Get reads one resource into out (e.g. *eim.Host or *json.RawMessage).
func (c *Client) Get(ctx context.Context, project string, k eim.Kind, id string, out any) error {
	return c.withKind(k, func(col Collection) error { return c.GetAt(ctx, project, col, id, out) })
}

// Create creates a resource from in and decodes the created one into out.
func (c *Client) Create(ctx context.Context, project string, k eim.Kind, in, out any) error {
	return c.withKind(k, func(col Collection) error { return c.CreateAt(ctx, project, col, in, out) })
}

// Update replaces the writable fields of a resource (PUT).
func (c *Client) Update(ctx context.Context, project string, k eim.Kind, id string, in, out any) error {
	return c.withKind(k, func(col Collection) error { return c.UpdateAt(ctx, project, col, id, in, out) })
}

// Patch changes the fields present in in (PATCH; the server derives the
// field mask from the body).
func (c *Client) Patch(ctx context.Context, project string, k eim.Kind, id string, in, out any) error {
	return c.withKind(k, func(col Collection) error { return c.PatchAt(ctx, project, col, id, in, out) })
}

// Delete deletes a resource. Hosts and instances are deleted in two phases:
// the server marks them and a manager removes them.
func (c *Client) Delete(ctx context.Context, project string, k eim.Kind, id string) error {
	return c.withKind(k, func(col Collection) error { return c.DeleteAt(ctx, project, col, id) })
}

func (c *Client) withKind(k eim.Kind, fn func(Collection) error) error {
	col, err := kindCollection(k)
	if err != nil {
		return err
	}
	return fn(col)
}

// GetAt reads one resource of a collection into out.
func (c *Client) GetAt(ctx context.Context, project string, col Collection, id string, out any) error {
	p, err := itemAt(project, col, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodGet, p, nil, out)
}

// CreateAt creates a resource in a collection.
func (c *Client) CreateAt(ctx context.Context, project string, col Collection, in, out any) error {
	return c.Do(ctx, http.MethodPost, ProjectPath(project)+col.Path, in, out)
}

// UpdateAt replaces the writable fields of a resource of a collection (PUT).
func (c *Client) UpdateAt(ctx context.Context, project string, col Collection, id string, in, out any) error {
	p, err := itemAt(project, col, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPut, p, in, out)
}

// PatchAt changes the fields present in in (PATCH) of a resource of a
// collection.
func (c *Client) PatchAt(ctx context.Context, project string, col Collection, id string, in, out any) error {
	p, err := itemAt(project, col, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPatch, p, in, out)
}

// DeleteAt deletes a resource of a collection.
func (c *Client) DeleteAt(ctx context.Context, project string, col Collection, id string) error {
	p, err := itemAt(project, col, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}
