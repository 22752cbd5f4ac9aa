package eim

import (
	"context"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object storage (package objstore): where a project's devices upload the
// files of their workloads' egress data paths. A project has at most one
// setting: an S3-compatible bucket, each device's files under its own
// prefix. Devices never hold its credentials: they are given presigned
// requests, one per file (UploadGranter). Without a setting, files go to
// the server's own embedded store (docs/objectstorage.md).

// KindObjectStorage names a project's object storage setting in the audit
// log (its resource ID is the project's name).
const KindObjectStorage Kind = "objectstorage"

// ObjectStorage is a project's object storage setting.
type ObjectStorage struct {
	Project string
	// Endpoint is the S3 API's base URL: https://host[:port] (http only
	// where the network is trusted, e.g. a test server on loopback).
	Endpoint string
	Bucket   string
	// KeyPrefix is put before every device's prefix in the bucket ("" none;
	// otherwise it ends with "/").
	KeyPrefix string
	Region    string
	// PathStyle addresses the bucket as Endpoint/bucket/key; otherwise as
	// bucket.host/key (virtual-hosted style).
	PathStyle   bool
	AccessKeyID string
	// SealedSecretKey is the secret access key as stored: sealed under the
	// deployment's secrets key (seal.Key.SealText,
	// ObjectStorageSecretPurpose). It is never answered by the API.
	SealedSecretKey string
	// CACert is the PEM bundle the endpoint's TLS certificate is checked
	// against ("" the system's roots).
	CACert string
	// MaxFileSize is the largest file a device may upload (bytes; 0 the
	// default, DefaultMaxUploadSize).
	MaxFileSize int64
	// BucketPerDevice, when set, is the name template of each device's
	// own bucket (e.g. "eim-{hostId}"), as Flotta's bucket claims: the
	// device's files (its uploads and its own ingress files) go to that
	// bucket, created with the setting's credentials on the device's
	// first grant; Bucket keeps the workloads' shared ingress files. ""
	// puts every device's files in Bucket.
	BucketPerDevice string

	// Reachable is the outcome of the check made when the setting was
	// saved (a HEAD of the bucket with the credentials).
	Reachable StorageReachable
	CreatedAt Time
	UpdatedAt Time
}

// StorageReachable is an object storage setting's Reachable condition.
type StorageReachable struct {
	Status    string `json:"status,omitempty"` // REACHABLE, UNREACHABLE
	LastError string `json:"lastError,omitempty"`
	CheckedAt Time   `json:"checkedAt,omitzero"`
}

// The statuses of StorageReachable.
const (
	StorageReachableOK = "REACHABLE"
	StorageUnreachable = "UNREACHABLE"
)

// ObjectStorageSecretPurpose binds a project's sealed secret key to the
// project (the associated data of seal.Key.SealText).
func ObjectStorageSecretPurpose(project string) string {
	return "objectstorage-secret:" + project
}

// ObjectStorageStore keeps the projects' object storage settings (see
// sqlstore), project-scoped. PutObjectStorage creates or replaces the
// project's setting: an empty SealedSecretKey keeps the stored one (a new
// setting without one is EINVALID naming secretAccessKey); it sets o's
// CreatedAt, UpdatedAt and SealedSecretKey as stored, and its audit record
// shows the secret as Redacted. GetObjectStorage returns the project's
// setting (ENOTFOUND when it has none); DeleteObjectStorage removes it
// (ENOTFOUND when there is none). A setting goes with its project.
type ObjectStorageStore interface {
	PutObjectStorage(ctx context.Context, o *ObjectStorage) error
	GetObjectStorage(ctx context.Context, project string) (*ObjectStorage, error)
	DeleteObjectStorage(ctx context.Context, project string) error
}

// Limits of an object storage setting and of uploads.
const (
	MaxStorageEndpoint = 255
	MaxStorageSecret   = 256
	MaxStorageCACert   = 64 << 10
	MaxStorageKeyPfx   = 256
	// DefaultMaxUploadSize is the largest file a device may upload when
	// the setting says nothing: 5 GiB, the most S3 takes in one PUT.
	DefaultMaxUploadSize int64 = 5 << 30
)

var (
	// reBucket is S3's bucket naming rule (3 to 63 characters, lower case
	// letters, digits, '.', '-'; starting and ending with a letter or
	// digit).
	reBucket    = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	reRegion    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	reAccessKey = regexp.MustCompile(`^[A-Za-z0-9+/=._-]{1,128}$`)
	reKeyPrefix = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/-]*$`)
)

// Validate checks o's settings (not the secret: see
// CheckStorageSecret) and fills the defaults (Region us-east-1). The
// error is EINVALID naming the field by its wire name.
func (o *ObjectStorage) Validate() error {
	if err := checkStorageEndpoint(o.Endpoint); err != nil {
		return err
	}
	switch {
	case o.Bucket == "":
		return Errorf(EINVALID, "bucket: required")
	case !reBucket.MatchString(o.Bucket) || strings.Contains(o.Bucket, ".."):
		return Errorf(EINVALID, "bucket: %q is not an S3 bucket name (3 to 63 lower-case letters, digits, '.' and '-')", o.Bucket)
	case !o.PathStyle && strings.Contains(o.Bucket, "."):
		return Errorf(EINVALID, "bucket: %q: a bucket with dots needs pathStyle (its virtual host would not match a TLS certificate)", o.Bucket)
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if !reRegion.MatchString(o.Region) {
		return Errorf(EINVALID, "region: %q is not a region name (lower-case letters, digits, '-')", o.Region)
	}
	if err := CheckStorageKeyPrefix(o.KeyPrefix); err != nil {
		return err
	}
	if o.AccessKeyID == "" {
		return Errorf(EINVALID, "accessKeyId: required")
	}
	if !reAccessKey.MatchString(o.AccessKeyID) {
		return Errorf(EINVALID, "accessKeyId: at most 128 letters, digits and '+/=._-'")
	}
	if o.CACert != "" {
		if err := checkPEMBundle("caCert", o.CACert, MaxStorageCACert); err != nil {
			return err
		}
	}
	if err := o.checkBucketPerDevice(); err != nil {
		return err
	}
	if o.MaxFileSize < 0 || o.MaxFileSize > DefaultMaxUploadSize {
		return Errorf(EINVALID, "maxFileSize: %d: must be 0 (the default, 5 GiB) to %d bytes", o.MaxFileSize, DefaultMaxUploadSize)
	}
	return nil
}

// HostIDPlaceholder is what BucketPerDevice's template has where the
// device's host ID goes.
const HostIDPlaceholder = "{hostId}"

// DeviceBucket is the bucket of host's files: its own with
// BucketPerDevice, else Bucket.
func (o *ObjectStorage) DeviceBucket(host string) string {
	if o.BucketPerDevice == "" {
		return o.Bucket
	}
	return strings.Replace(o.BucketPerDevice, HostIDPlaceholder, host, 1)
}

// checkBucketPerDevice checks the template: the placeholder once, and
// with any host's ID in its place an S3 bucket name.
func (o *ObjectStorage) checkBucketPerDevice() error {
	t := o.BucketPerDevice
	if t == "" {
		return nil
	}
	if strings.Count(t, HostIDPlaceholder) != 1 {
		return Errorf(EINVALID, "bucketPerDevice: %q must hold %s once (e.g. eim-%s)", t, HostIDPlaceholder, HostIDPlaceholder)
	}
	// Host IDs are host- and 8 hex digits: one long stands for all.
	b := strings.Replace(t, HostIDPlaceholder, "host-0123abcd", 1)
	switch {
	case !reBucket.MatchString(b) || strings.Contains(b, ".."):
		return Errorf(EINVALID, "bucketPerDevice: %q: with a host ID in place of %s it is not an S3 bucket name (3 to 63 lower-case letters, digits, '.' and '-')", t, HostIDPlaceholder)
	case !o.PathStyle && strings.Contains(b, "."):
		return Errorf(EINVALID, "bucketPerDevice: %q: a bucket with dots needs pathStyle", t)
	}
	return nil
}

// CheckStorageKeyPrefix checks a key prefix: "" or path segments of S3's
// safe characters, ending with "/", without "." or ".." segments.
func CheckStorageKeyPrefix(p string) error {
	if p == "" {
		return nil
	}
	switch {
	case len(p) > MaxStorageKeyPfx:
		return Errorf(EINVALID, "keyPrefix: at most %d characters", MaxStorageKeyPfx)
	case !reKeyPrefix.MatchString(p):
		return Errorf(EINVALID, "keyPrefix: %q: only letters, digits and !_.*'()/- are allowed", p)
	case strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/"):
		return Errorf(EINVALID, "keyPrefix: %q: must not start with '/' and must end with '/'", p)
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(p, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return Errorf(EINVALID, "keyPrefix: %q: empty, '.' and '..' segments are not allowed", p)
		}
	}
	return nil
}

// CheckStorageSecret checks a secret access key.
func CheckStorageSecret(secret string) error {
	switch {
	case secret == "":
		return Errorf(EINVALID, "secretAccessKey: required")
	case len(secret) > MaxStorageSecret:
		return Errorf(EINVALID, "secretAccessKey: at most %d bytes", MaxStorageSecret)
	case !utf8.ValidString(secret) || strings.ContainsFunc(secret, func(r rune) bool { return r <= 0x20 || r == 0x7f }):
		return Errorf(EINVALID, "secretAccessKey: spaces and control characters are not allowed")
	}
	return nil
}

// checkStorageEndpoint checks an S3 endpoint: an http(s) URL of a host and
// port only.
func checkStorageEndpoint(ep string) error {
	if ep == "" {
		return Errorf(EINVALID, "endpoint: required")
	}
	if len(ep) > MaxStorageEndpoint {
		return Errorf(EINVALID, "endpoint: at most %d characters", MaxStorageEndpoint)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return Errorf(EINVALID, "endpoint: %q is not a URL", ep)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return Errorf(EINVALID, "endpoint: %q: the scheme must be https or http", ep)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Errorf(EINVALID, "endpoint: %q: give only the scheme, host and port", ep)
	}
	if strings.HasSuffix(u.Host, ":") {
		return Errorf(EINVALID, "endpoint: %q: the port is empty", ep)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Errorf(EINVALID, "endpoint: %q: the port must be 1 to 65535", ep)
		}
	}
	host := u.Hostname()
	if host == "" {
		return Errorf(EINVALID, "endpoint: %q has no host", ep)
	}
	if net.ParseIP(host) == nil && (len(host) > 253 || !reHostname.MatchString(host)) {
		return Errorf(EINVALID, "endpoint: %q: %q is neither an IP address nor a host name", ep, host)
	}
	return nil
}

// ObjectStorageInput is the body of PUT /v1/projects/{p}/objectstorage:
// the setting, which replaces the stored one. A nil SecretAccessKey keeps
// the stored one.
type ObjectStorageInput struct {
	Endpoint        string  `json:"endpoint"`
	Bucket          string  `json:"bucket"`
	KeyPrefix       string  `json:"keyPrefix,omitempty"`
	Region          string  `json:"region,omitempty"`
	PathStyle       bool    `json:"pathStyle,omitempty"`
	AccessKeyID     string  `json:"accessKeyId"`
	SecretAccessKey *string `json:"secretAccessKey,omitempty"`
	CACert          string  `json:"caCert,omitempty"`
	MaxFileSize     int64   `json:"maxFileSize,omitempty"`
	BucketPerDevice string  `json:"bucketPerDevice,omitempty"`
}

// ObjectStorageView is a setting as the API answers it: never the secret
// key, only whether one is set.
type ObjectStorageView struct {
	Endpoint     string `json:"endpoint"`
	Bucket       string `json:"bucket"`
	KeyPrefix    string `json:"keyPrefix,omitempty"`
	Region       string `json:"region"`
	PathStyle    bool   `json:"pathStyle"`
	AccessKeyID  string `json:"accessKeyId"`
	SecretKeySet bool   `json:"secretAccessKeySet"`
	CACert       string `json:"caCert,omitempty"`
	MaxFileSize  int64  `json:"maxFileSize"`
	// BucketPerDevice is the template of the devices' own buckets ("":
	// none).
	BucketPerDevice string           `json:"bucketPerDevice,omitempty"`
	Reachable       StorageReachable `json:"reachable"`
	Timestamps      Timestamps       `json:"timestamps"`
}

// View is o as the API answers it.
func (o *ObjectStorage) View() *ObjectStorageView {
	max := o.MaxFileSize
	if max == 0 {
		max = DefaultMaxUploadSize
	}
	return &ObjectStorageView{Endpoint: o.Endpoint, Bucket: o.Bucket, KeyPrefix: o.KeyPrefix, Region: o.Region, PathStyle: o.PathStyle,
		AccessKeyID: o.AccessKeyID, SecretKeySet: o.SealedSecretKey != "", CACert: o.CACert, MaxFileSize: max,
		BucketPerDevice: o.BucketPerDevice, Reachable: o.Reachable, Timestamps: Timestamps{CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}}
}

// EdgeObject is a file a device uploaded to the embedded store, as the
// API lists it.
type EdgeObject struct {
	Path      string `json:"path"` // under the host's prefix
	Size      int64  `json:"size"`
	UpdatedAt Time   `json:"updatedAt"`
}

// EdgeObjectList is the answer of GET /v1/projects/{p}/edgedata/{hostId}.
type EdgeObjectList struct {
	Objects       []EdgeObject `json:"objects"`
	TotalElements int          `json:"totalElements"`
	HasNext       bool         `json:"hasNext"`
}
