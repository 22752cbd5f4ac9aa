package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// ObjectStorageInput is the body of PutObjectStorage: a nil
// SecretAccessKey keeps the stored one.
type ObjectStorageInput = eim.ObjectStorageInput

// ObjectStorage is a project's object storage as the API answers it
// (never its secret key).
type ObjectStorage = eim.ObjectStorageView

func objectStoragePath(project string) string { return ProjectPath(project) + "/objectstorage" }

// PutObjectStorage creates or replaces the project's object storage. The
// answer's Reachable says whether the bucket answered with the
// credentials.
func (c *Client) PutObjectStorage(ctx context.Context, project string, in ObjectStorageInput) (*ObjectStorage, error) {
	var out ObjectStorage
	if err := c.Do(ctx, http.MethodPut, objectStoragePath(project), in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetObjectStorage reads the project's object storage.
func (c *Client) GetObjectStorage(ctx context.Context, project string) (*ObjectStorage, error) {
	var out ObjectStorage
	if err := c.Do(ctx, http.MethodGet, objectStoragePath(project), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteObjectStorage removes the project's object storage: its devices'
// uploads go to the embedded store again.
func (c *Client) DeleteObjectStorage(ctx context.Context, project string) error {
	return c.Do(ctx, http.MethodDelete, objectStoragePath(project), nil, nil)
}

// ListEdgeData lists a host's files in the embedded store (those under
// prefix, "" all), one page.
func (c *Client) ListEdgeData(ctx context.Context, project, host, prefix string, pageSize, offset int) (*eim.EdgeObjectList, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if pageSize > 0 {
		q.Set("pageSize", strconv.Itoa(pageSize))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	p := ProjectPath(project) + "/edgedata/" + url.PathEscape(host)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out eim.EdgeObjectList
	if err := c.Do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutEdgeData stores content as a file of the embedded store under
// host's prefix (host: a host ID, or eim.SharedIngressDir for every device
// of a workload; path: <workload>/<target>/<file>), for the ingress data
// paths that read it.
func (c *Client) PutEdgeData(ctx context.Context, project, host, path string, content []byte) (*eim.EdgeObject, error) {
	if content == nil {
		content = []byte{}
	}
	var out eim.EdgeObject
	if err := c.Do(ctx, http.MethodPut, EdgeDataPath(project, host, path), content, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteEdgeData removes a file of the embedded store.
func (c *Client) DeleteEdgeData(ctx context.Context, project, host, path string) error {
	return c.Do(ctx, http.MethodDelete, EdgeDataPath(project, host, path), nil, nil)
}

// EdgeDataPath is the API path of one of a host's files in the embedded
// store (GET it for the content).
func EdgeDataPath(project, host, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return ProjectPath(project) + "/edgedata/" + url.PathEscape(host) + "/" + strings.Join(segs, "/")
}
