package oscatalog_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"

	"github.com/eimhq/eim/oscatalog"
)

// TestFetchPackages: the package lists published at the profiles'
// osPackageManifestURL become their installedPackages; an inline list is
// kept, and a list that cannot be had is left empty and reported.
func TestFetchPackages(t *testing.T) {
	const list = `{"repo":[{"name":"bash","version":"5.2.15"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.json":
			w.Write([]byte(list))
		case "/bad.json":
			w.Write([]byte("not json"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	with := func(name, version, extra string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte(manifest(name, "OS_TYPE_IMMUTABLE", "emt", version) + extra)}
	}
	c, err := oscatalog.Load(fstest.MapFS{
		"ok.yaml":     with("EMT 1", "3.0.1", "  osPackageManifestURL: "+srv.URL+"/ok.json\n"),
		"bad.yaml":    with("EMT 2", "3.0.2", "  osPackageManifestURL: "+srv.URL+"/bad.json\n"),
		"gone.yaml":   with("EMT 3", "3.0.3", "  osPackageManifestURL: "+srv.URL+"/gone.json\n"),
		"inline.yaml": with("EMT 4", "3.0.4", "  osPackageManifestURL: "+srv.URL+"/ok.json\n  installedPackages: '{\"repo\":[]}'\n"),
		"none.yaml":   with("EMT 5", "3.0.5", ""),
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, errs := oscatalog.FetchPackages(context.Background(), c, srv.Client())
	if len(errs) != 2 {
		t.Errorf("errors: got %v, want 2 (bad.json, gone.json)", errs)
	}
	want := map[string]string{"3.0.1": list, "3.0.2": "", "3.0.3": "", "3.0.4": `{"repo":[]}`, "3.0.5": ""}
	for _, p := range got.Profiles() {
		if p.InstalledPackages != want[p.ImageVersion] {
			t.Errorf("%s: installedPackages %q, want %q", p.ImageVersion, p.InstalledPackages, want[p.ImageVersion])
		}
		if got.Lookup(p.Key()) != p {
			t.Errorf("%s: Lookup does not find the fetched profile", p.ImageVersion)
		}
	}
	if got.Digest() == c.Digest() {
		t.Error("digest: unchanged, want the fetched lists to count")
	}
	if c.Lookup(oscatalog.Key{ProfileName: "emt", Version: "3.0.1"}).InstalledPackages != "" {
		t.Error("the original catalog was changed")
	}
}
