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
}

// KindPath returns the collection path of kind k below a project, e.g.
// "/compute/hosts".
func KindPath(k eim.Kind) (string, bool) {
	p, ok := paths[k]
	return p, ok
}

// collection returns the full path of kind k's collection in project.
func collection(project string, k eim.Kind) (string, error) {
	p, ok := paths[k]
	if !ok {
		return "", eim.Errorf(eim.EINVALID, "kind %q has no API path", k)
	}
	return ProjectPath(project) + p, nil
}

// ProjectPath returns "/v1/projects/{project}" with the name escaped.
func ProjectPath(project string) string {
	return "/v1/projects/" + url.PathEscape(project)
}

func item(project string, k eim.Kind, id string) (string, error) {
	p, err := collection(project, k)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", eim.Errorf(eim.EINVALID, "resource ID: must not be empty")
	}
	return p + "/" + url.PathEscape(id), nil
}

// ListOptions select and page a list. Zero values are left to the server
// (its default page size is 20).
type ListOptions struct {
	Filter   string // AIP-160
	OrderBy  string // AIP-132
	PageSize int
	Offset   int
}

func (o ListOptions) query() string {
	q := url.Values{}
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
	p, err := collection(project, k)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := c.Do(ctx, http.MethodGet, p+opts.query(), nil, &raw); err != nil {
		return nil, err
	}
	page := &Page{}
	if err := json.Unmarshal(raw[eim.SchemaOf(k).Plural], &page.Items); err != nil && raw[eim.SchemaOf(k).Plural] != nil {
		return nil, eim.Errorf(eim.EINTERNAL, "list %s: bad %q in the answer: %v", k, eim.SchemaOf(k).Plural, err)
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
	p, err := item(project, k, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodGet, p, nil, out)
}

// Create creates a resource from in and decodes the created one into out.
func (c *Client) Create(ctx context.Context, project string, k eim.Kind, in, out any) error {
	p, err := collection(project, k)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPost, p, in, out)
}

// Update replaces the writable fields of a resource (PUT).
func (c *Client) Update(ctx context.Context, project string, k eim.Kind, id string, in, out any) error {
	p, err := item(project, k, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPut, p, in, out)
}

// Patch changes the fields present in in (PATCH; the server derives the
// field mask from the body).
func (c *Client) Patch(ctx context.Context, project string, k eim.Kind, id string, in, out any) error {
	p, err := item(project, k, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodPatch, p, in, out)
}

// Delete deletes a resource. Hosts and instances are deleted in two phases:
// the server marks them and a manager removes them.
func (c *Client) Delete(ctx context.Context, project string, k eim.Kind, id string) error {
	p, err := item(project, k, id)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodDelete, p, nil, nil)
}
