package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/syncbuf"
	"github.com/eimhq/eim/sqlstore/storetest"
)

// syncBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type syncBuffer = syncbuf.Buffer

var servingRE = regexp.MustCompile(`eim: serving API on (http://\S+)`)

// startServer runs "eim server" through Main on a free port and returns
// its URL. The server stops (and is waited for) at cleanup or via stop.
func startServer(t *testing.T, dataDir string, extra ...string) (url string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		args := []string{"server", "--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--agent-addr", "127.0.0.1:0", "--log-level", "warn", "--rate-limit", "0"}
		done <- Main(ctx, append(args, extra...), &out, &errOut)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("server exited with %v; stderr:\n%s", err, errOut.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("server did not stop within 30 s after cancel")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := servingRE.FindStringSubmatch(out.String()); m != nil {
			return m[1], stop
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("server exited before serving: %v; stderr:\n%s", err, errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not print its address within 30 s; stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
}

// cliRunner runs CLI commands through Main against one server.
type cliRunner struct {
	t         *testing.T
	url       string
	tokenFile string
}

// run returns the command's stdout and error.
func (r cliRunner) run(args ...string) (string, error) {
	r.t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{"--server", r.url, "--token-file", r.tokenFile}, args...)
	err := Main(context.Background(), full, &out, &errOut)
	if err != nil && errOut.Len() > 0 {
		r.t.Logf("eim %s: stderr:\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), err
}

// must runs a command that must succeed.
func (r cliRunner) must(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err != nil {
		r.t.Fatalf("eim %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// json runs a command with -o json and decodes its output.
func (r cliRunner) json(v any, args ...string) {
	r.t.Helper()
	out := r.must(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("eim %s -o json: %v; output:\n%s", strings.Join(args, " "), err, out)
	}
}

func TestEndToEnd(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, stop := startServer(t, dataDir)

	adminToken := filepath.Join(dataDir, adminTokenFile)
	fi, err := os.Stat(adminToken)
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("admin token mode: got %04o, want 0600", fi.Mode().Perm())
	}
	tokenBefore, _ := os.ReadFile(adminToken)
	admin := cliRunner{t: t, url: url, tokenFile: adminToken}

	// Projects: "default" exists from the first start; create another.
	var projects []eim.Project
	admin.json(&projects, "project", "list")
	if len(projects) != 1 || projects[0].Name != eim.DefaultProject {
		t.Fatalf("projects after first start: got %+v, want only %q", projects, eim.DefaultProject)
	}
	var acme eim.Project
	admin.json(&acme, "project", "create", "acme")
	if acme.Name != "acme" || acme.ID == "" {
		t.Fatalf("created project: got %+v, want name acme with an ID", acme)
	}

	// A region, a site in it, hosts at the site; global flags after the verb.
	var region eim.Region
	admin.json(&region, "region", "create", "--name", "europe", "--metadata", "zone=eu", "--project", "acme")
	if !eim.ValidID(eim.KindRegion, region.ResourceID) || region.Name != "europe" {
		t.Fatalf("created region: got %+v", region)
	}
	var site eim.Site
	admin.json(&site, "--project", "acme", "site", "create", "--name", "berlin", "--region", region.ResourceID)
	if site.RegionID != region.ResourceID {
		t.Errorf("site region: got %q, want %q", site.RegionID, region.ResourceID)
	}
	var host eim.Host
	admin.json(&host, "--project", "acme", "host", "create", "--name", "edge-1",
		"--uuid", "9b1c0a8e-3f5d-4b7a-9c2e-1d4f6a8b0c2e", "--site", site.ResourceID)
	if host.SiteID != site.ResourceID || host.DesiredState != eim.HostStateOnboarded {
		t.Errorf("created host: got site %q state %q, want %q %q", host.SiteID, host.DesiredState, site.ResourceID, eim.HostStateOnboarded)
	}
	var reg eim.Host
	admin.json(&reg, "--project", "acme", "host", "register", "--serial", "SN12345", "--name", "line-1")
	if reg.DesiredState != eim.HostStateRegistered {
		t.Errorf("registered host state: got %q, want %q", reg.DesiredState, eim.HostStateRegistered)
	}
	admin.must("--project", "acme", "host", "onboard", reg.ResourceID)

	// Lists and gets.
	var hosts struct {
		Hosts         []eim.Host `json:"hosts"`
		TotalElements int        `json:"totalElements"`
		HasNext       bool       `json:"hasNext"`
	}
	admin.json(&hosts, "--project", "acme", "host", "list", "--order-by", "name")
	if hosts.TotalElements != 2 || len(hosts.Hosts) != 2 || hosts.Hosts[0].Name != "edge-1" || hosts.Hosts[1].DesiredState != eim.HostStateOnboarded {
		t.Errorf("host list: got %+v, want edge-1 then the onboarded line-1", hosts)
	}
	admin.json(&hosts, "--project", "acme", "host", "list", "--page-size", "1")
	if len(hosts.Hosts) != 1 || !hosts.HasNext || hosts.TotalElements != 2 {
		t.Errorf("host list page 1 of 2: got %d items, hasNext %v, total %d", len(hosts.Hosts), hosts.HasNext, hosts.TotalElements)
	}
	table := admin.must("--project", "acme", "host", "list")
	if !strings.Contains(table, "NAME") || !strings.Contains(table, "edge-1") || !strings.Contains(table, "ONBOARDED") {
		t.Errorf("host table: got\n%s\nwant a header and edge-1 ONBOARDED", table)
	}
	ids := admin.must("--project", "acme", "region", "list", "--filter", "name=europe", "-o", "id")
	if strings.TrimSpace(ids) != region.ResourceID {
		t.Errorf("region IDs by filter: got %q, want %q", ids, region.ResourceID)
	}
	var got eim.Host
	admin.json(&got, "--project", "acme", "host", "get", host.ResourceID)
	if got.Name != "edge-1" || got.Site == nil || got.Site.Name != "berlin" {
		t.Errorf("host get: got name %q site %+v, want edge-1 at berlin", got.Name, got.Site)
	}
	if v, _ := got.InheritedMetadata.Get("zone"); v != "eu" {
		t.Errorf("host inherited metadata: got %+v, want zone=eu", got.InheritedMetadata)
	}
	admin.json(&got, "--project", "acme", "host", "patch", host.ResourceID, "--set", "name=edge-1b")
	if got.Name != "edge-1b" {
		t.Errorf("patched host name: got %q, want edge-1b", got.Name)
	}
	regionFile := filepath.Join(t.TempDir(), "region.json")
	if err := os.WriteFile(regionFile, []byte(`{"name":"europe-west","metadata":[{"key":"zone","value":"euw"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var upd eim.Region
	admin.json(&upd, "--project", "acme", "region", "update", region.ResourceID, "--file", regionFile)
	if v, _ := upd.Metadata.Get("zone"); upd.Name != "europe-west" || v != "euw" {
		t.Errorf("updated region: got %+v, want europe-west zone=euw", upd)
	}
	admin.must("--project", "acme", "region", "patch", region.ResourceID, "--set", "name=europe")

	// A project with resources goes only with --force.
	admin.must("project", "create", "scratch")
	admin.must("--project", "scratch", "region", "create", "--name", "tmp")
	if _, err := admin.run("project", "delete", "scratch"); err == nil {
		t.Errorf("delete of a non-empty project without --force: got success, want an error")
	}
	// The tenant module runs: the delete is followed phase by phase until
	// the project is gone, and the name is free again.
	if out := admin.must("project", "delete", "scratch", "--force"); !strings.Contains(out, "deleting project scratch: deauthorize (1/") ||
		!strings.Contains(out, "deleted project scratch") {
		t.Errorf("project delete: got %q, want its phases and the end", out)
	}
	if _, err := admin.run("project", "get", "scratch"); err == nil {
		t.Errorf("project get after the delete: got success, want not found")
	}
	admin.must("project", "create", "scratch")
	deadline := time.Now().Add(30 * time.Second)
	for out := ""; !regexp.MustCompile(`(?m)^ready:\s+true$`).MatchString(out); out = admin.must("project", "get", "scratch") {
		if time.Now().After(deadline) {
			t.Fatalf("project get: not ready within 30 s:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := admin.must("project", "get", "scratch"); !strings.Contains(out, "tenant:") || !strings.Contains(out, "defaults of version") || !strings.Contains(out, "os:") {
		t.Errorf("project get: got\n%s\nwant the conditions of os and tenant", out)
	}
	// Its defaults do not make it non-empty.
	admin.must("project", "delete", "scratch")

	var sum struct{ Total, Unallocated int }
	admin.json(&sum, "--project", "acme", "host", "summary")
	if sum.Total != 2 || sum.Unallocated != 1 {
		t.Errorf("host summary: got %+v, want total 2, unallocated 1", sum)
	}

	// Errors come back with their codes.
	errorTests := []struct {
		name string
		args []string
		code string
	}{
		{"unknown id", []string{"--project", "acme", "region", "get", "region-00000000"}, eim.ENOTFOUND},
		{"malformed id", []string{"--project", "acme", "region", "get", "site-1"}, eim.EINVALID},
		{"unknown project", []string{"--project", "nope", "region", "list"}, eim.ENOTFOUND},
		{"duplicate project", []string{"project", "create", "acme"}, eim.ECONFLICT},
	}
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := admin.run(tt.args...)
			if got := eim.ErrorCode(err); got != tt.code {
				t.Errorf("eim %s: got %q (%v), want %q", strings.Join(tt.args, " "), got, err, tt.code)
			}
		})
	}
	var u *usageError
	if _, err := admin.run("frobnicate"); !errors.As(err, &u) {
		t.Errorf("unknown command: got %v, want a usage error", err)
	}

	// A read-only token for acme: reads work, writes are 403.
	roTok := mintToken(t, "--data-dir", dataDir, "--project", "acme", "--role", "r", "--ttl", "1h")
	ro := cliRunner{t: t, url: url, tokenFile: writeToken(t, roTok)}
	ro.json(&hosts, "--project", "acme", "host", "list")
	if hosts.TotalElements != 2 {
		t.Errorf("host list with the read token: got %d, want 2", hosts.TotalElements)
	}
	if _, err := ro.run("--project", "acme", "region", "create", "--name", "asia"); eim.ErrorCode(err) != eim.EFORBIDDEN {
		t.Errorf("create with the read token: got %v, want %s", err, eim.EFORBIDDEN)
	}
	if _, err := ro.run("--project", "default", "region", "list"); eim.ErrorCode(err) != eim.EFORBIDDEN {
		t.Errorf("list another project with acme's read token: got %v, want %s", err, eim.EFORBIDDEN)
	}

	// Restart: data, admin token and signing key survive.
	stop()
	url, _ = startServer(t, dataDir)
	admin.url, ro.url = url, url
	tokenAfter, _ := os.ReadFile(adminToken)
	if !bytes.Equal(tokenBefore, tokenAfter) {
		t.Errorf("admin token rewritten on restart")
	}
	var again eim.Region
	admin.json(&again, "--project", "acme", "region", "get", region.ResourceID)
	if again.Name != "europe" {
		t.Errorf("region after restart: got %+v, want europe", again)
	}
	ro.json(&hosts, "--project", "acme", "host", "list")
	if hosts.TotalElements != 2 {
		t.Errorf("hosts after restart with the read token: got %d, want 2", hosts.TotalElements)
	}
	admin.json(&projects, "project", "list")
	if len(projects) != 2 {
		t.Errorf("projects after restart: got %d, want 2 (default, acme)", len(projects))
	}
}

// mintToken runs "eim token create" and returns the token (its last line).
func mintToken(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := Main(context.Background(), append([]string{"token", "create"}, args...), &out, &errOut); err != nil {
		t.Fatalf("token create: %v; stderr: %s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

func writeToken(t *testing.T, tok string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEndToEndPostgres runs the server on PostgreSQL (a fresh database):
// a project and a region survive a restart, and token create finds the
// project through --database.
func TestEndToEndPostgres(t *testing.T) {
	pgURL := freshPostgres(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	url, stop := startServer(t, dataDir, "--database", pgURL)
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	admin.must("project", "create", "acme")
	var region eim.Region
	admin.json(&region, "--project", "acme", "region", "create", "--name", "europe")
	if _, err := os.Stat(filepath.Join(dataDir, "eim.db")); err == nil {
		t.Errorf("a SQLite database was created in the data dir despite --database")
	}

	stop()
	url, _ = startServer(t, dataDir, "--database", pgURL)
	rw := cliRunner{t: t, url: url, tokenFile: writeToken(t, mintToken(t, "--data-dir", dataDir, "--database", pgURL, "--project", "acme", "--role", "rw"))}
	var again eim.Region
	rw.json(&again, "--project", "acme", "region", "get", region.ResourceID)
	if again.Name != "europe" {
		t.Errorf("region after restart: got %+v, want europe", again)
	}
	rw.must("--project", "acme", "region", "delete", region.ResourceID)
}

// freshPostgres returns the URL of a new database, dropped at cleanup; it
// skips the test when EIM_TEST_POSTGRES_URL is unset.
func freshPostgres(t *testing.T) string { return storetest.PostgresURL(t) }
