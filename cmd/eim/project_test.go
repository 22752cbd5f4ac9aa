package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// staticTokens authenticates fixed tokens.
type staticTokens map[string]*eim.Principal

func (s staticTokens) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	if p, ok := s[tok]; ok {
		return p, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// projectAPI serves the real REST API over SQLite with an admin token and
// a read-only token on project acme; it returns the URL, the token files
// and the inventory.
func projectAPI(t *testing.T) (url, admin, ro string, inv *inventory.Service) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inv = inventory.New(st, inventory.Options{})
	p, err := inv.CreateProject(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(inv, staticTokens{
		"admin": {Subject: "admin", Roles: []string{eim.RoleAdmin}},
		"ro":    {Subject: "ro", Roles: []string{eim.ProjectRole(p, false)}},
	}, httpapi.Options{}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	admin, ro = filepath.Join(dir, "admin"), filepath.Join(dir, "ro")
	for f, tok := range map[string]string{admin: "admin", ro: "ro"} {
		if err := os.WriteFile(f, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return srv.URL, admin, ro, inv
}

func TestProjectGetSet(t *testing.T) {
	url, admin, ro, inv := projectAPI(t)
	ctx := context.Background()
	run := func(tokFile string, args ...string) (string, string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := Main(ctx, append([]string{"--server", url, "--token-file", tokFile}, args...), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	cl := client.New(url, "admin", nil)
	var osr eim.OS
	if err := cl.Create(ctx, "acme", eim.KindOS, map[string]any{"name": "ubuntu", "profileName": "ubuntu", "osType": "OS_TYPE_MUTABLE",
		"sha256": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, &osr); err != nil {
		t.Fatal(err)
	}
	var cc1, cc2 eim.CustomConfig
	for i, cc := range []*eim.CustomConfig{&cc1, &cc2} {
		if err := cl.Create(ctx, "acme", eim.KindCustomConfig, map[string]any{"name": []string{"a", "b"}[i], "config": "#cloud-config\n"}, cc); err != nil {
			t.Fatal(err)
		}
	}

	out, _, err := run(ro, "project", "get", "acme")
	if err != nil || !strings.Contains(out, "defaultOsId:") || !strings.Contains(out, "zero-touch provisioning off") || !strings.Contains(out, "enrollment:              off") {
		t.Fatalf("get: got %q, %v", out, err)
	}

	out, errOut, err := run(admin, "project", "set", "acme", "--default-os", osr.ResourceID,
		"--default-custom-configs", cc1.ResourceID+", "+cc2.ResourceID, "--enrollment-token", "new", "--auto-onboard-enrolled")
	if err != nil {
		t.Fatalf("set: %v; stderr %s", err, errOut)
	}
	m := regexp.MustCompile(`(?m)^enrollment token: ([A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "will not be shown again") || !strings.Contains(out, osr.ResourceID) {
		t.Fatalf("set: got %q, want the settings, the token and the notice", out)
	}
	out, errOut, err = run(admin, "project", "set", "acme", "--heartbeat-interval", "30s", "--heartbeat-timeout", "2m")
	if err != nil || !strings.Contains(out, "heartbeatInterval:       30s") || !strings.Contains(out, "heartbeatTimeout:        2m0s") {
		t.Fatalf("set heartbeat: got %q, %v; stderr %s", out, err, errOut)
	}
	p, err := inv.FindProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if p.Settings.HeartbeatIntervalSeconds != 30 || p.Settings.HeartbeatTimeoutSeconds != 120 {
		t.Fatalf("stored heartbeat settings %+v", p.Settings)
	}
	sum := sha256.Sum256([]byte(m[1]))
	s := p.Settings
	if s.EnrollmentTokenHash != hex.EncodeToString(sum[:]) || s.DefaultOSID != osr.ResourceID || !s.AutoOnboardEnrolled ||
		len(s.DefaultCustomConfigIDs) != 2 || s.DefaultCustomConfigIDs[1] != cc2.ResourceID {
		t.Fatalf("stored: got %+v", s)
	}
	// The token is not shown by get, in any format.
	for _, o := range []string{"table", "json"} {
		out, _, err := run(ro, "project", "get", "acme", "-o", o)
		if err != nil || strings.Contains(out, m[1]) || strings.Contains(out, s.EnrollmentTokenHash) {
			t.Fatalf("get -o %s: got %q, %v", o, out, err)
		}
	}
	var got client.Project
	out, _, _ = run(ro, "project", "get", "acme", "-o", "json")
	if err := json.Unmarshal([]byte(out), &got); err != nil || !got.Settings.Enrollment || got.Settings.DefaultOSID != osr.ResourceID {
		t.Fatalf("get -o json: got %q, %v", out, err)
	}

	// none clears; with -o json the new token is in the JSON and the
	// notice on stderr.
	out, errOut, err = run(admin, "project", "set", "acme", "--default-os", "none", "--default-custom-configs", "none",
		"--auto-onboard-enrolled=false", "--enrollment-token", "new", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got.EnrollmentToken) != 43 || got.EnrollmentToken == m[1] ||
		!strings.Contains(errOut, "will not be shown again") {
		t.Fatalf("set -o json: got %q, stderr %q, %v", out, errOut, err)
	}
	if got.Settings.DefaultOSID != "" || len(got.Settings.DefaultCustomConfigIDs) != 0 || got.Settings.AutoOnboardEnrolled {
		t.Fatalf("after none: got %+v", got.Settings)
	}
	if _, _, err := run(admin, "project", "set", "acme", "--enrollment-token", "none"); err != nil {
		t.Fatal(err)
	}
	if p, _ := inv.FindProject(ctx, "acme"); p.Settings.EnrollmentTokenHash != "" {
		t.Fatalf("after --enrollment-token none: hash %q", p.Settings.EnrollmentTokenHash)
	}

	// Refusals come from the server, with its message.
	if _, _, err := run(ro, "project", "set", "acme", "--auto-onboard-enrolled"); eim.ErrorCode(err) != eim.EFORBIDDEN {
		t.Fatalf("set with a read-only token: got %v, want %s", err, eim.EFORBIDDEN)
	}
	if _, _, err := run(admin, "project", "set", "acme", "--default-os", "os-0000beef"); eim.ErrorCode(err) != eim.ENOTFOUND || !strings.Contains(err.Error(), "defaultOsId") {
		t.Fatalf("set a missing OS: got %v, want %s naming defaultOsId", err, eim.ENOTFOUND)
	}
	if _, _, err := run(admin, "project", "get", "nosuch"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("get nosuch: got %v", err)
	}
}

func TestProjectSetUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"project", "set", "acme"}, "nothing to change"},
		{[]string{"project", "set", "acme", "--enrollment-token", "secret"}, "want new or none"},
		{[]string{"project", "set", "--auto-onboard-enrolled"}, "a project name"},
		{[]string{"project", "get"}, "a project name"},
		{[]string{"project", "get", "a", "b"}, "a project name"},
		{[]string{"project", "frob"}, "unknown verb"},
		{[]string{"project", "set", "acme", "--heartbeat-interval", "1500ms"}, "want whole seconds"},
		{[]string{"project", "set", "acme", "--heartbeat-timeout", "48h"}, "at most 24h"},
	} {
		var out, errOut bytes.Buffer
		err := Main(context.Background(), append([]string{"--token-file", os.DevNull}, tt.args...), &out, &errOut)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("eim %q: got %v, want a usage error mentioning %q", tt.args, err, tt.want)
		}
	}
	var out bytes.Buffer
	if err := Main(context.Background(), []string{"project", "help"}, &out, &out); err != nil || !strings.Contains(out.String(), "--enrollment-token new|none") {
		t.Errorf("project help: got %q, %v", out.String(), err)
	}
}
