package objstore_test

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/seal"
)

// FuzzGrantPath: whatever path and prefix a device sends, a grant is
// refused or its object key stays under the prefix (no "." or ".."
// segment, no empty segment, no escape from the device's prefix).
func FuzzGrantPath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "a/../../b", "/etc/passwd", "a//b", "a/./b", "a\\..\\b", "dir/file name.bin", "%2e%2e/x", "a\x00b"} {
		f.Add("host-0000abcd/w/out/", s)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	key, _ := seal.New(raw)
	svc, err := objstore.New(objstore.Options{Store: noStorage{}, Authenticator: noAuth{}, Key: key, AgentURL: "https://eim.test:8443",
		GrantBurst: 1 << 30, GrantRate: 1 << 30})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, prefix, path string) {
		gs, _, err := svc.GrantUploads(context.Background(), "p", prefix, []eim.FileChange{{Path: path, Present: true, Size: 1, SHA256: strings.Repeat("0", 64)}})
		if err != nil {
			return
		}
		g := gs[0]
		if g.Refused != "" {
			return
		}
		u, err := url.Parse(g.URL)
		if err != nil {
			t.Fatalf("grant URL %q: %v", g.URL, err)
		}
		k, ok := strings.CutPrefix(u.Path, objstore.UploadPath+"p/")
		if !ok || !strings.HasPrefix(k, prefix) {
			t.Fatalf("prefix %q path %q: key %q is not under the prefix", prefix, path, u.Path)
		}
		for seg := range strings.SplitSeq(k, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("prefix %q path %q: key %q has a %q segment", prefix, path, k, seg)
			}
		}
	})
}

type noStorage struct{}

func (noStorage) PutObjectStorage(context.Context, *eim.ObjectStorage) error { return nil }
func (noStorage) GetObjectStorage(context.Context, string) (*eim.ObjectStorage, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}
func (noStorage) DeleteObjectStorage(context.Context, string) error { return nil }
func (noStorage) FindProject(context.Context, string) (*eim.Project, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}
func (noStorage) FindProjectByID(context.Context, string) (*eim.Project, error) {
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (*eim.Principal, error) {
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "no")
}

// FuzzParseListObjectsV2: whatever an S3 server answers to a listing, the
// parser returns an error or entries with a key and no negative size.
func FuzzParseListObjectsV2(f *testing.F) {
	for _, s := range []string{
		`<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>edge</Name><Prefix>a/</Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated><NextContinuationToken>tok</NextContinuationToken><Contents><Key>a/x.bin</Key><LastModified>2026-12-03T09:00:00.000Z</LastModified><ETag>&#34;9e107d9d372bb6826bd81d3542a419d6&#34;</ETag><Size>43</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>`,
		`<ListBucketResult><Contents><Key></Key><Size>-1</Size></Contents></ListBucketResult>`,
		`<ListBucketResult><Contents><Key>k</Key><LastModified>yesterday</LastModified></Contents></ListBucketResult>`,
		`<Error><Code>AccessDenied</Code></Error>`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := objstore.ParseListObjectsV2(b)
		if err != nil {
			return
		}
		for _, c := range p.Contents {
			if c.Key == "" || c.Size < 0 || strings.HasPrefix(c.ETag, `"`) {
				t.Fatalf("entry %+v from %q", c, b)
			}
		}
	})
}
