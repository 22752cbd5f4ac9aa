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

// Ingress: files an operator puts in object storage are downloaded to the
// devices of a workload. A device's ingress data path reads two prefixes:
// the workload's shared one (SharedIngressPrefix: every device of the
// workload gets its files) and the device's own (<host>/<workload>/<target>/),
// whose files win over shared files of the same path.

// SharedIngressDir is the first segment of the shared ingress prefixes.
// It is not a host ID (those are host-…), so no device's prefix meets it.
const SharedIngressDir = "_workloads"

// SharedIngressPrefix is the prefix every device of workload reads for the
// ingress data path target: _workloads/<workload>/<target>/.
func SharedIngressPrefix(workload, target string) string {
	return SharedIngressDir + "/" + workload + "/" + target + "/"
}

// MaxDownloadFiles is the most files one ingress data path holds: a
// listing with more is answered with the first ones (by path) and
// Truncated.
const MaxDownloadFiles = 1000

// DownloadGrant is an object of an ingress data path, with leave to GET
// it: URL with Headers, valid until the listing's expiry. Path is relative
// to the data path.
type DownloadGrant struct {
	Path     string
	Size     int64
	ETag     string // the store's entity tag, without quotes
	Modified time.Time
	URL      string
	Headers  map[string]string
}

// DownloadGranter lists the objects under prefixes of a project's object
// storage with the server's credentials and grants a device a GET of
// each, so that it never holds the storage's credentials. Prefixes are in
// order of precedence: an object whose path (relative to its prefix) an
// earlier prefix has too is left out. At most MaxDownloadFiles are
// answered, by path; truncated says there were more.
type DownloadGranter interface {
	GrantDownloads(ctx context.Context, project string, prefixes []string) (grants []DownloadGrant, truncated bool, expires time.Time, err error)
}
