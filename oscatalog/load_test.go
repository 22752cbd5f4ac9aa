package oscatalog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/eimhq/eim/oscatalog"
)

// manifest returns a valid manifest of the profile and version.
func manifest(name, typ, profile, version string) string {
	return `appVersion: apps/v1
spec:
  name: ` + name + `
  type: ` + typ + `
  profileName: ` + profile + `
  osImageUrl: https://images.example.com/` + profile + `-` + version + `.img
  osImageSha256: 036b21fd43979309662a067340cf6400f6e0767465fa3d7c2ca52ad553ed15d0
  osImageVersion: "` + version + `"
`
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var testShipped = fstest.MapFS{
	"emt-1.yaml":    {Data: []byte(manifest("EMT 1", "OS_TYPE_IMMUTABLE", "emt", "3.0.1"))},
	"emt-2.yaml":    {Data: []byte(manifest("EMT 2", "OS_TYPE_IMMUTABLE", "emt", "3.0.2"))},
	"ubuntu.yaml":   {Data: []byte(manifest("Ubuntu", "OS_TYPE_MUTABLE", "ubuntu", "22.04"))},
	"README.md":     {Data: []byte("not a manifest")},
	"notes.yml.txt": {Data: []byte("not a manifest")},
}

func TestLoadOverride(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		// Same key as a shipped one: replaces it (a mirror's URL).
		"emt-2-mirror.yaml": strings.Replace(manifest("EMT 2", "OS_TYPE_IMMUTABLE", "emt", "3.0.2"), "images.example.com", "mirror.local", 1),
		// A new version of a shipped family, and a new family.
		"emt-3.yml":    manifest("EMT 3", "OS_TYPE_IMMUTABLE", "emt", "3.0.10"),
		"custom.yaml":  manifest("Custom", "OS_TYPE_MUTABLE", "custom", "1"),
		".hidden.yaml": "not: [a manifest",
		"README":       "ignored",
	})
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil { // a directory: ignored
		t.Fatal(err)
	}
	c, err := oscatalog.Load(testShipped, dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range c.Profiles() {
		keys = append(keys, p.Key().String())
	}
	if got, want := strings.Join(keys, "|"), "custom 1|emt 3.0.1|emt 3.0.2|emt 3.0.10|ubuntu 22.04"; got != want {
		t.Errorf("profiles: got %s, want %s", got, want)
	}
	p := c.Lookup(oscatalog.Key{ProfileName: "emt", Version: "3.0.2"})
	if p == nil || !strings.Contains(p.ImageURL, "mirror.local") || p.Source != filepath.Join(dir, "emt-2-mirror.yaml") {
		t.Errorf("overridden profile: got %+v", p)
	}
	if len(c.Overrides) != 1 || c.Overrides[0].Shipped != "shipped:emt-2.yaml" {
		t.Errorf("Overrides: got %+v", c.Overrides)
	}
	base, err := oscatalog.Load(testShipped, "")
	if err != nil {
		t.Fatal(err)
	}
	if base.Digest() == c.Digest() || base.Digest() == "" {
		t.Errorf("digests: shipped only %q, with overrides %q: want different", base.Digest(), c.Digest())
	}
	again, _ := oscatalog.Load(testShipped, "")
	if again.Digest() != base.Digest() {
		t.Errorf("digest of the same catalog changed")
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // in the error
	}{
		{"bad manifest", map[string]string{"a.yaml": manifest("A", "OS_TYPE_MUTABLE", "a", "1"), "b.yaml": "appVersion: apps/v1\nspec:\n  nam: x\n"},
			[]string{"b.yaml:3", "spec.nam", "unknown field"}},
		{"same key twice", map[string]string{"a.yaml": manifest("A", "OS_TYPE_MUTABLE", "a", "1"), "b.yaml": manifest("B", "OS_TYPE_MUTABLE", "a", "1")},
			[]string{"a.yaml", "b.yaml", "both are a 1"}},
		{"name of a shipped profile", map[string]string{"a.yaml": manifest("Ubuntu", "OS_TYPE_MUTABLE", "a", "1")},
			[]string{"a.yaml", "shipped:ubuntu.yaml", `both are named "Ubuntu"`}},
		{"type of a family", map[string]string{"emt.yaml": manifest("EMT 9", "OS_TYPE_MUTABLE", "emt", "9")},
			[]string{"emt.yaml", "profile emt is OS_TYPE_IMMUTABLE in one and OS_TYPE_MUTABLE in the other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oscatalog.Load(testShipped, writeFiles(t, tt.files))
			if err == nil {
				t.Fatal("got nil error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q: want %q in it", err, w)
				}
			}
		})
	}
	if _, err := oscatalog.Load(testShipped, filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing directory: got %v, want an error naming it", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, make([]byte, oscatalog.MaxManifestSize+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := oscatalog.Load(testShipped, filepath.Dir(big)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized manifest: got %v", err)
	}
}
