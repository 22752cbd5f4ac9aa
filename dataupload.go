package eim

import (
	"context"
	"time"
)

// FileChange is a file of a device's egress data path that changed since
// its last successful sync: to upload (Present) or to delete.
type FileChange struct {
	Path    string // relative to the data path, slash-separated
	Present bool
	Size    int64
	SHA256  string // hex, of the content to upload
}

// UploadGrant is leave for a device to send one HTTP request to object
// storage: a PUT of the file's content, or a DELETE, to URL with Headers.
// Refused, instead of a URL, says why this file may not be sent.
type UploadGrant struct {
	Path    string
	Method  string // PUT or DELETE
	URL     string
	Headers map[string]string
	Refused string
}

// UploadGranter grants a device's uploads under one prefix of its
// project's object storage (<host>/<workload>/<target>/), so that the
// device never holds the storage's credentials. Grants expire at expires.
type UploadGranter interface {
	GrantUploads(ctx context.Context, project, prefix string, changes []FileChange) (grants []UploadGrant, expires time.Time, err error)
}
