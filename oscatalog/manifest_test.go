package oscatalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oscatalog"
)

const goodManifest = `---
appVersion: apps/v1
metadata:
  release: 2.1.0
  version: 0.1.0
spec:
  name: Edge Microvisor Toolkit 3.0.20250717
  type: OS_TYPE_IMMUTABLE
  provider: OS_PROVIDER_KIND_LENOVO
  architecture: x86_64
  profileName: microvisor-nonrt
  osImageUrl: https://example.com/emt/edge-readonly-3.0.20250717.0718.raw.gz
  osImageSha256: 036b21fd43979309662a067340cf6400f6e0767465fa3d7c2ca52ad553ed15d0
  osImageVersion: 3.0.20250717.0718
  securityFeature: SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION
  osPackageManifestURL: https://example.com/emt/pkgs.json
  installedPackages: '{"repo":[{"name":"bash","version":"5.2"}]}'
  platformBundle:
    installerScript: https://example.com/install.sh
    cloudInitScript: https://example.com/ci.yaml
  description: The July image.
  osExistingCvesURL: https://example.com/cves.json
  osFixedCvesURL: https://example.com/fixed.json
  tlsCaCert: QUJD
`

func TestParse(t *testing.T) {
	p, err := oscatalog.Parse("emt.yaml", []byte(goodManifest))
	if err != nil {
		t.Fatal(err)
	}
	want := &eim.OS{
		Name: "Edge Microvisor Toolkit 3.0.20250717", Architecture: "x86_64",
		ImageURL: "https://example.com/emt/edge-readonly-3.0.20250717.0718.raw.gz", ImageID: "3.0.20250717.0718",
		Description: "The July image.", Sha256: "036b21fd43979309662a067340cf6400f6e0767465fa3d7c2ca52ad553ed15d0",
		ProfileName: "microvisor-nonrt", ProfileVersion: "2.1.0",
		InstalledPackages: `{"repo":[{"name":"bash","version":"5.2"}]}`, InstalledPackagesURL: "https://example.com/emt/pkgs.json",
		SecurityFeature: "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION", OsType: "OS_TYPE_IMMUTABLE", OsProvider: "OS_PROVIDER_KIND_LENOVO",
		PlatformBundle: `{"cloudInitScript":"https://example.com/ci.yaml","installerScript":"https://example.com/install.sh"}`,
		TLSCaCert:      "QUJD", ExistingCvesURL: "https://example.com/cves.json", FixedCvesURL: "https://example.com/fixed.json",
	}
	if got := p.OS(); *got != *want {
		t.Errorf("OS:\ngot  %+v\nwant %+v", *got, *want)
	}
	if got := p.Key(); got != (oscatalog.Key{ProfileName: "microvisor-nonrt", Version: "3.0.20250717.0718"}) {
		t.Errorf("Key: got %v", got)
	}
	if p.Source != "emt.yaml" {
		t.Errorf("Source: got %q", p.Source)
	}
}

// A minimal manifest takes the defaults: provider INFRA, no security
// feature, profileVersion the image version; versions stay as written.
func TestParseDefaults(t *testing.T) {
	p, err := oscatalog.Parse("min.yaml", []byte(minimal("")))
	if err != nil {
		t.Fatal(err)
	}
	o := p.OS()
	if o.OsProvider != "OS_PROVIDER_KIND_INFRA" || o.SecurityFeature != "SECURITY_FEATURE_NONE" || o.ProfileVersion != "22.04" || o.ImageID != "22.04" || o.PlatformBundle != "" {
		t.Errorf("defaults: got %+v", *o)
	}
}

// minimal returns a valid manifest with extra lines appended to spec.
func minimal(extra string) string {
	return `appVersion: apps/v1
spec:
  name: Ubuntu 22.04
  type: OS_TYPE_MUTABLE
  profileName: ubuntu-22.04
  osImageUrl: https://cloud-images.ubuntu.com/x.img
  osImageSha256: b9b65a7e045ca262ad614cbedeaa1bf34b9325d76f856e85e17b68984e7a4314
  osImageVersion: 22.04
` + extra
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc string
		field     string // want this field named
		line      int
		msg       string // and this in the message
	}{
		{"empty", "", "", 0, "is empty"},
		{"not yaml", "appVersion: [", "", 0, "yaml:"},
		{"list", "- a\n- b\n", "", 1, "want a mapping"},
		{"two documents", minimal("") + "---\nappVersion: apps/v1\n", "", 9, "more than one YAML document"},
		{"unknown top field", "appVersion: apps/v1\nkind: OSProfile\n", "kind", 2, "unknown field"},
		{"no appVersion", "spec:\n  name: x\n", "appVersion", 0, "is required"},
		{"wrong appVersion", strings.Replace(minimal(""), "apps/v1", "apps/v2", 1), "appVersion", 1, `"apps/v2"`},
		{"no spec", "appVersion: apps/v1\n", "spec", 0, "is required"},
		{"empty spec", "appVersion: apps/v1\nspec:\n", "spec.name", 2, "is required"},
		{"unknown spec field", minimal("  kernelCommand: quiet\n"), "spec.kernelCommand", 9, "unknown field"},
		{"near miss", minimal("  existingCvesURL: https://x.example/c\n"), "spec.existingCvesURL", 9, "did you mean osExistingCvesURL?"},
		{"typo", minimal("  osImageSha265: x\n"), "spec.osImageSha265", 9, "did you mean osImageSha256?"},
		{"no suggestion", minimal("  kernel: x\n"), "spec.kernel", 9, "unknown field"},
		{"unknown metadata field", "appVersion: apps/v1\nmetadata:\n  owner: me\n", "metadata.owner", 3, "unknown field"},
		{"duplicate key", minimal("  name: Again\n"), "spec.name", 9, "more than once"},
		{"mapping for string", minimal("  description:\n    a: b\n"), "spec.description", 10, "got a mapping"},
		{"list for string", minimal("  architecture: [x86_64]\n"), "spec.architecture", 9, "got a list"},
		{"alias", "appVersion: apps/v1\nx: &a 1\n", "x", 2, "unknown field"},
		{"alias value", "appVersion: &v apps/v1\nmetadata:\n  release: *v\n", "metadata.release", 3, "aliases"},
		{"missing type", strings.Replace(minimal(""), "  type: OS_TYPE_MUTABLE\n", "", 1), "spec.type", 0, "is required"},
		{"bad type", strings.Replace(minimal(""), "OS_TYPE_MUTABLE", "OS_TYPE_UNSPECIFIED", 1), "spec.type", 4, "OS_TYPE_MUTABLE, OS_TYPE_IMMUTABLE"},
		{"bad provider", minimal("  provider: LENOVO\n"), "spec.provider", 9, "OS_PROVIDER_KIND_INFRA, OS_PROVIDER_KIND_LENOVO"},
		{"bad security", minimal("  securityFeature: SB\n"), "spec.securityFeature", 9, "SECURITY_FEATURE_NONE"},
		{"bad profile name", strings.Replace(minimal(""), "ubuntu-22.04", "Ubuntu 22", 1), "spec.profileName", 5, "lowercase"},
		{"bad version", strings.Replace(minimal(""), "osImageVersion: 22.04", "osImageVersion: 22 04", 1), "spec.osImageVersion", 8, "want a version"},
		{"bad release", minimal("") + "metadata:\n  release: 1/2\n", "metadata.release", 10, "want a version"},
		{"sha256 uppercase", strings.Replace(minimal(""), "b9b65a7e", "B9B65A7E", 1), "spec.osImageSha256", 7, "64 lowercase hex"},
		{"sha256 short", strings.Replace(minimal(""), "b9b65a7e045ca262", "", 1), "spec.osImageSha256", 7, "64 lowercase hex"},
		{"relative url", strings.Replace(minimal(""), "https://cloud-images.ubuntu.com/x.img", "files-edge-orch/x.raw.gz", 1), "spec.osImageUrl", 6, "absolute http(s) URL"},
		{"bad cve url", minimal("  osFixedCvesURL: ftp://x/y\n"), "spec.osFixedCvesURL", 9, "absolute http(s) URL"},
		{"packages not json", minimal("  installedPackages: bash 5.2\n"), "spec.installedPackages", 9, "JSON"},
		{"bundle list", minimal("  platformBundle: [a]\n"), "spec.platformBundle", 9, "got a list"},
		{"bundle nested", minimal("  platformBundle:\n    script:\n      url: x\n"), "spec.platformBundle.script", 11, "got a mapping"},
		{"bad name", strings.Replace(minimal(""), "Ubuntu 22.04", "Ubuntu 22.04 'LTS'", 1), "spec.name", 3, "does not match"},
		{"bad description", minimal("  description: see https://x/y\n"), "spec.description", 9, "does not match"},
		{"bad certificate", minimal("  tlsCaCert: not base64!\n"), "spec.tlsCaCert", 9, "does not match"},
		{"too large", minimal("  description: " + strings.Repeat("a", oscatalog.MaxManifestSize) + "\n"), "", 0, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oscatalog.Parse("dir/p.yaml", []byte(tt.doc))
			var me *oscatalog.ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("got %v, want a *ManifestError", err)
			}
			if me.Source != "dir/p.yaml" || me.Field != tt.field || (tt.line != 0 && me.Line != tt.line) || !strings.Contains(me.Msg, tt.msg) {
				t.Errorf("got %q (field %q, line %d), want field %q, line %d, message with %q", err, me.Field, me.Line, tt.field, tt.line, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "os profile dir/p.yaml") {
				t.Errorf("error %q does not start with the file", err)
			}
		})
	}
}

// Every shipped manifest parses, and the catalog they make has the
// profiles the documentation promises.
func TestShipped(t *testing.T) {
	c, err := oscatalog.Load(oscatalog.Shipped(), "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, p := range c.Profiles() {
		keys = append(keys, p.Key().String())
		if !strings.HasPrefix(p.Source, "shipped:") {
			t.Errorf("%s: source %q", p.Key(), p.Source)
		}
	}
	want := []string{
		"eim-test 1.0",
		"microvisor-nonrt 3.0.20250328.1439",
		"microvisor-nonrt 3.0.20250717.0718",
		"ubuntu-22.04-lts-generic 22.04.5",
		"ubuntu-24.04-lts-generic 24.04.2",
	}
	if strings.Join(keys, "|") != strings.Join(want, "|") {
		t.Errorf("shipped profiles: got %q, want %q", keys, want)
	}
	for _, p := range c.Profiles() {
		if p.ProfileName == "microvisor-nonrt" && p.Type != "OS_TYPE_IMMUTABLE" {
			t.Errorf("%s: type %s, want immutable", p.Key(), p.Type)
		}
	}
}
