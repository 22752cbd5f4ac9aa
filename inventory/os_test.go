package inventory_test

import (
	"testing"

	"github.com/eimhq/eim"
)

// TestOSUpdateFields: a PUT or PATCH of an OS resource changes its name,
// architecture and metadata only; the rest of the body is ignored, as in
// the original (so a PATCH with "sha256":"", which generated clients send,
// is no error, and a PUT resets nothing).
func TestOSUpdateFields(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		o := e.create(&eim.OS{Name: "ubuntu", Architecture: "x86_64", ImageURL: "https://img/a.raw", Sha256: sha, ProfileName: "ubuntu-22",
			OsType: "OS_TYPE_MUTABLE", OsProvider: "OS_PROVIDER_KIND_INFRA", SecurityFeature: "SECURITY_FEATURE_NONE"}).(*eim.OS)
		other := "0000000000000000000000000000000000000000000000000000000000000001"
		check := func(what string, got *eim.OS, name, arch string) {
			t.Helper()
			if got.Name != name || got.Architecture != arch {
				t.Errorf("%s: got name %q architecture %q, want %q %q", what, got.Name, got.Architecture, name, arch)
			}
			if got.Sha256 != sha || got.ImageURL != o.ImageURL || got.ProfileName != o.ProfileName || got.OsType != o.OsType ||
				got.OsProvider != o.OsProvider || got.SecurityFeature != o.SecurityFeature {
				t.Errorf("%s: got %+v, want image, checksum, profile, type, provider and security feature kept", what, got)
			}
		}
		put := ok(e.svc.Update(e.ctx, e.proj, &eim.OS{Meta: eim.Meta{ResourceID: o.ResourceID}, Name: "renamed", Architecture: "x86", Sha256: other}, nil)).get(t).(*eim.OS)
		check("PUT", put, "renamed", "x86")
		patch := ok(e.svc.Update(e.ctx, e.proj, &eim.OS{Meta: eim.Meta{ResourceID: o.ResourceID}, Architecture: "arm64", Sha256: "", ImageURL: "https://img/b.raw"},
			[]string{"architecture", "sha256", "imageUrl"})).get(t).(*eim.OS)
		check("PATCH", patch, "renamed", "arm64")
		md := ok(e.svc.Update(e.ctx, e.proj, &eim.OS{Meta: eim.Meta{ResourceID: o.ResourceID}, Metadata: `{"a":"b"}`}, []string{"metadata"})).get(t).(*eim.OS)
		if md.Metadata != `{"a":"b"}` {
			t.Errorf("PATCH metadata: got %q", md.Metadata)
		}
	})
}
