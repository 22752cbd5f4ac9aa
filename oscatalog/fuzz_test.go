package oscatalog_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oscatalog"
)

// FuzzParse: any input is a profile that makes a valid OS resource, or a
// *ManifestError naming the source; never a panic. The corpus is in
// testdata/fuzz/FuzzParse; the shipped manifests and those of the tests
// are seeds.
func FuzzParse(f *testing.F) {
	names, _ := fs.Glob(oscatalog.Shipped(), "*.yaml")
	for _, n := range names {
		b, _ := fs.ReadFile(oscatalog.Shipped(), n)
		f.Add(b)
	}
	f.Add([]byte(goodManifest))
	f.Add([]byte(minimal("  platformBundle:\n    a: b\n")))
	f.Add([]byte("appVersion: apps/v1\nspec: &s\n  name: x\nmetadata: *s\n"))
	f.Add([]byte("appVersion: apps/v1\n<<: {spec: {}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := oscatalog.Parse("f.yaml", data)
		if err != nil {
			var me *oscatalog.ManifestError
			if !errors.As(err, &me) || me.Source != "f.yaml" || !strings.HasPrefix(err.Error(), "os profile f.yaml") {
				t.Fatalf("error %v (%T): want a *ManifestError of f.yaml", err, err)
			}
			return
		}
		if err := eim.Validate(p.OS()); err != nil {
			t.Fatalf("parsed profile makes an invalid OS: %v", err)
		}
		if oscatalog.CompareVersions(p.ImageVersion, p.ImageVersion) != 0 {
			t.Fatalf("version %q is not equal to itself", p.ImageVersion)
		}
	})
}
