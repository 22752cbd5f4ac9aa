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
