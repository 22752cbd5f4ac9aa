package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "eim")
	if err := os.WriteFile(bin, []byte("\x7fELF fake binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{Binary: bin, CACerts: certs, Out: filepath.Join(t.TempDir(), "layout"), Version: "v1.2.3",
		Revision: "abc", Source: "https://example.com/eim", Arch: "amd64", Created: time.Unix(1700000000, 0).UTC()}
}

func TestBuildIsCheckedAndReproducible(t *testing.T) {
	o := testOptions(t)
	d1, err := Build(o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	r, err := Check(o.Out)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if r.Digest != d1 || r.User != "65532:65532" || r.Entrypoint[0] != "/eim" {
		t.Errorf("report %+v, want digest %s, user 65532:65532, entrypoint /eim", r, d1)
	}
	o.Out = filepath.Join(t.TempDir(), "again")
	d2, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 {
		t.Errorf("two builds of one binary: digests %s and %s, want one", d1, d2)
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	o := testOptions(t)
	if err := os.WriteFile(o.Binary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script as the binary: got %v, want not an ELF executable", err)
	}
	o = testOptions(t)
	o.CACerts = filepath.Join(t.TempDir(), "absent.pem")
	if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "ca-certificates") {
		t.Errorf("no CA bundle: got %v, want a hint at ca-certificates", err)
	}
}

// Check refuses an image run as root, or a layout of two images.
func TestCheckRefuses(t *testing.T) {
	o := testOptions(t)
	if _, err := Build(o); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Config.User = "0"
	cf.Config.Entrypoint = []string{"/bin/sh"}
	root, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "root")
	p, err := layout.Write(bad, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(root); err != nil {
		t.Fatal(err)
	}
	_, err = Check(bad)
	if err == nil || !strings.Contains(err.Error(), "non-root") || !strings.Contains(err.Error(), "entrypoint") {
		t.Errorf("root user and /bin/sh: got %v, want both named", err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(bad); err == nil || !strings.Contains(err.Error(), "2 manifests") {
		t.Errorf("two images: got %v, want 2 manifests refused", err)
	}
}
