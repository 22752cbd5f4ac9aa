package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/server"
	"github.com/eimhq/eim/sqlstore"
)

// TestObjectStorageE2E: "eim server --profile devices" serves the object
// storage API and the embedded store. A grant made with the deployment's
// secrets key (as the workloads module's granter in the server makes it)
// uploads a file bigger than the agent listener's body limit over its
// TLS, the API lists and serves it back, and a tampered grant is refused.
// A file an operator puts through the API for a workload's devices is
// granted to a device's listing and downloaded over the agent listener.
func TestObjectStorageE2E(t *testing.T) {
	dataDir := t.TempDir()
	s := startModules(t, dataDir, true, "--profile", "devices")
	tok, err := os.ReadFile(filepath.Join(dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cl := client.New(s.http, strings.TrimSpace(string(tok)), nil)
	host := &eim.Host{}
	if err := cl.Do(ctx, http.MethodPost, client.ProjectPath("default")+"/compute/hosts/register", map[string]any{"name": "dev-1", "serialNumber": "SNOBJ1"}, host); err != nil {
		t.Fatal(err)
	}
	// The setting's API, through the Go client: saved, its check a condition.
	sk := "secret-key"
	o, err := cl.PutObjectStorage(ctx, "default", client.ObjectStorageInput{Endpoint: "http://127.0.0.1:1", Bucket: "edge", PathStyle: true,
		AccessKeyID: "AK", SecretAccessKey: &sk})
	if err != nil || o.Reachable.Status != eim.StorageUnreachable || !o.SecretKeySet {
		t.Fatalf("put: got %+v, %v; want saved, UNREACHABLE", o, err)
	}
	if err := cl.DeleteObjectStorage(ctx, "default"); err != nil {
		t.Fatal(err)
	}

	// A granter on the server's database, with the deployment's key and
	// agent URL, signs as the server's does; the project has no setting
	// now: the embedded store.
	key, err := seal.LoadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlstore.Open(ctx, server.DatabaseDSN(dataDir, ""), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := objstore.New(objstore.Options{Store: st, Authenticator: oneToken{}, Key: key, AgentURL: s.agent, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("0123456789abcdef"), 5<<16) // 5 MiB: over the listener's 4 MiB limit of calls
	sum := sha256.Sum256(content)
	gs, _, err := g.GrantUploads(ctx, "default", host.ResourceID+"/cam/out/", []eim.FileChange{
		{Path: "frame.raw", Present: true, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}})
	if err != nil || gs[0].Refused != "" {
		t.Fatalf("grant: %+v, %v", gs, err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dataDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	agent := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	put := func(url string, body []byte) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		resp, err := agent.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := put(strings.Replace(gs[0].URL, "frame.raw", "other.raw", 1), content); code != http.StatusForbidden {
		t.Fatalf("tampered grant: got %d, want 403", code)
	}
	if code := put(gs[0].URL, content); code != http.StatusOK {
		t.Fatalf("upload through the agent listener: got %d, want 200", code)
	}
	list, err := cl.ListEdgeData(ctx, "default", host.ResourceID, "", 0, 0)
	if err != nil || list.TotalElements != 1 || list.Objects[0].Path != "cam/out/frame.raw" || list.Objects[0].Size != int64(len(content)) {
		t.Fatalf("list: got %+v, %v", list, err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.http+client.EdgeDataPath("default", host.ResourceID, "cam/out/frame.raw"), nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, content) {
		t.Fatalf("download: got %d, %d bytes; want 200 and the %d bytes uploaded", resp.StatusCode, len(got), len(content))
	}

	// Ingress: the operator puts a file for every device of a workload
	// through the API (over the API's body limit of calls too); the
	// device's listing grants a GET of it on the agent listener, which a
	// changed URL does not get.
	model := bytes.Repeat([]byte("weights!"), 5<<17) // 5 MiB
	obj, err := cl.PutEdgeData(ctx, "default", eim.SharedIngressDir, "cam/models/net.bin", model)
	if err != nil || obj.Size != int64(len(model)) {
		t.Fatalf("put a file for the workload's devices: %+v, %v", obj, err)
	}
	ds, _, _, err := g.GrantDownloads(ctx, "default", []string{host.ResourceID + "/cam/models/", eim.SharedIngressPrefix("cam", "models")})
	if err != nil || len(ds) != 1 || ds[0].Path != "net.bin" || ds[0].Size != int64(len(model)) {
		t.Fatalf("download grants: %+v, %v", ds, err)
	}
	get := func(url string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := agent.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := get(ds[0].URL); code != http.StatusOK || !bytes.Equal(b, model) {
		t.Fatalf("download through the agent listener: got %d, %d bytes; want 200 and %d", code, len(b), len(model))
	}
	if code, _ := get(strings.Replace(ds[0].URL, "net.bin", "other.bin", 1)); code != http.StatusForbidden {
		t.Fatalf("tampered download grant: got %d, want 403", code)
	}
	if err := cl.DeleteEdgeData(ctx, "default", eim.SharedIngressDir, "cam/models/net.bin"); err != nil {
		t.Fatal(err)
	}
	if ds, _, _, err := g.GrantDownloads(ctx, "default", []string{eim.SharedIngressPrefix("cam", "models")}); err != nil || len(ds) != 0 {
		t.Fatalf("download grants after the delete: %+v, %v; want none", ds, err)
	}
}
