package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// The OS catalog end to end with the real server (Main): the shipped
// profiles, with an operator's manifests beside them (one replacing a
// shipped profile, one adding a newer version of the immutable Edge
// Microvisor Toolkit), appear in GET /v1/projects/default/compute/os and in
// a project created later; an instance on the older version shows
// osUpdateAvailable naming the newer one. A bad manifest stops the start,
// naming the file and the field.
func TestOSCatalogSQLite(t *testing.T) { testOSCatalog(t) }

func TestOSCatalogPostgres(t *testing.T) { testOSCatalog(t, "--database", freshPostgres(t)) }

const newerEMT = `appVersion: apps/v1
metadata:
  release: 1.1.0
spec:
  name: Edge Microvisor Toolkit 3.0.20250801
  type: OS_TYPE_IMMUTABLE
  architecture: x86_64
  profileName: microvisor-nonrt
  osImageUrl: https://mirror.example.com/emt/edge-readonly-3.0.20250801.0900.raw.gz
  osImageSha256: 5f1b1a3c0e7d4b9a8c6e2f0d1b3a5c7e9f1d3b5a7c9e1f3d5b7a9c1e3f5d7b9a
  osImageVersion: 3.0.20250801.0900
`

func testOSCatalog(t *testing.T, extra ...string) {
	ctx := t.Context()
	dir := t.TempDir()
	shippedJuly, err := os.ReadFile(filepath.Join("..", "..", "oscatalog", "profiles", "microvisor-nonrt-3.0.20250717.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	mirrored := strings.ReplaceAll(string(shippedJuly), "https://files-rs.edgeorchestration.intel.com/files-edge-orch/", "https://mirror.example.com/")
	for name, body := range map[string]string{"emt-july-mirror.yaml": mirrored, "emt-august.yaml": newerEMT} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	api, _ := startServer(t, dataDir, append([]string{"--os-profiles", dir}, extra...)...)
	tok, err := os.ReadFile(filepath.Join(dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(api, strings.TrimSpace(string(tok)), nil)

	// listOS is GET /v1/projects/P/compute/os, as any client of the
	// original would call it, by name.
	listOS := func(project string) (map[string]eim.OS, error) {
		var raw map[string]json.RawMessage
		if err := c.Do(ctx, http.MethodGet, "/v1/projects/"+project+"/compute/os?pageSize=100", nil, &raw); err != nil {
			return nil, err
		}
		var items []eim.OS
		if err := json.Unmarshal(raw["OperatingSystemResources"], &items); err != nil {
			return nil, fmt.Errorf("OperatingSystemResources: %v", err)
		}
		out := map[string]eim.OS{}
		for _, o := range items {
			out[o.Name] = o
		}
		return out, nil
	}
	wantNames := []string{
		"EIM test OS 1.0",
		"Edge Microvisor Toolkit 3.0.20250328",
		"Edge Microvisor Toolkit 3.0.20250717",
		"Edge Microvisor Toolkit 3.0.20250801",
		"Ubuntu 22.04.5 LTS",
		"Ubuntu 24.04.2 LTS",
	}
	catalogIn := func(project string) map[string]eim.OS {
		t.Helper()
		var got map[string]eim.OS
		poll(t, "the OS catalog in project "+project, func() error {
			var err error
			if got, err = listOS(project); err != nil {
				return err
			}
			names := make([]string, 0, len(got))
			for n := range got {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, wantNames) {
				return fmt.Errorf("got %q, want %q", names, wantNames)
			}
			return nil
		})
		return got
	}
	oses := catalogIn(eim.DefaultProject)
	july, august := oses["Edge Microvisor Toolkit 3.0.20250717"], oses["Edge Microvisor Toolkit 3.0.20250801"]
	if !strings.HasPrefix(july.ImageURL, "https://mirror.example.com/") || july.ProfileName != "microvisor-nonrt" || july.ImageID != "3.0.20250717.0718" || july.OsType != "OS_TYPE_IMMUTABLE" {
		t.Errorf("the replaced shipped profile: got %+v", july)
	}
	if august.ProfileVersion != "1.1.0" || august.OsProvider != "OS_PROVIDER_KIND_INFRA" {
		t.Errorf("the added profile: got %+v", august)
	}
	if u := oses["Ubuntu 22.04.5 LTS"]; u.OsType != "OS_TYPE_MUTABLE" || u.Sha256 != "b9b65a7e045ca262ad614cbedeaa1bf34b9325d76f856e85e17b68984e7a4314" || u.ProfileName != "ubuntu-22.04-lts-generic" {
		t.Errorf("Ubuntu 22.04: got %+v", u)
	}

	// An instance on the July image: the August one is available.
	var host, inst map[string]any
	if err := c.Create(ctx, eim.DefaultProject, eim.KindHost, map[string]any{"name": "edge-1", "uuid": "8b2c2f0e-4f3a-4d0e-9a51-3c1f5e7a9b01"}, &host); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"name": "edge-1", "hostID": host["resourceId"], "osID": july.ResourceID}
	if err := c.Create(ctx, eim.DefaultProject, eim.KindInstance, body, &inst); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("Edge Microvisor Toolkit 3.0.20250801 (%s) is available: version 3.0.20250801.0900", august.ResourceID)
	poll(t, "osUpdateAvailable", func() error {
		var got eim.Instance
		if err := c.Get(ctx, eim.DefaultProject, eim.KindInstance, inst["resourceId"].(string), &got); err != nil {
			return err
		}
		if got.OsUpdateAvailable != want {
			return fmt.Errorf("got %q, want %q", got.OsUpdateAvailable, want)
		}
		return nil
	})

	// A project created later gets the catalog.
	if _, err := c.CreateProject(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	catalogIn("acme")

	// A bad manifest: the server does not start, and says where.
	if err := os.WriteFile(filepath.Join(dir, "typo.yaml"), []byte(strings.Replace(newerEMT, "osImageSha256", "osImageSha265", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = Main(sctx, []string{"server", "--data-dir", filepath.Join(t.TempDir(), "other"), "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0",
		"--os-profiles", dir}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "typo.yaml")+":10") || !strings.Contains(err.Error(), "spec.osImageSha265: unknown field (did you mean osImageSha256?)") {
		t.Errorf("start with a bad manifest: got %v, want an error naming the file, line and field", err)
	}
}

// poll retries cond until it returns nil or 30 s pass.
func poll(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
