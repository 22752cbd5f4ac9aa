package compat_test

import (
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestUIRoles checks the roles of the tokens "eim token create" mints
// for a project: the writer's hold the original web UI's roles for its
// write controls (infrastructure, clusters, cluster templates, the admin
// app's), keyed by the project's ID; the reader's their read roles and no
// write role.
func TestUIRoles(t *testing.T) {
	p := newProject(t)
	roles := func(role string) []string {
		out, err := exec.Command(srv.bin, "token", "create", "--data-dir", srv.dataDir, "--project", p.name, "--role", role).Output()
		if err != nil {
			t.Fatalf("token create --role %s: %v", role, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		parts := strings.Split(lines[len(lines)-1], ".")
		if len(parts) != 3 {
			t.Fatalf("token create --role %s: not a JWT", role)
		}
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		// As the UI reads it (decodeToken: realm_access.roles).
		var claims struct {
			RealmAccess struct{ Roles []string } `json:"realm_access"`
		}
		if err := json.Unmarshal(payload, &claims); err != nil {
			t.Fatal(err)
		}
		return claims.RealmAccess.Roles
	}
	writer := roles("rw")
	for _, r := range []string{"im-rw", "cl-rw", "cl-tpl-rw", "alrt-rw", "cat-rw", "ao-rw", "tc-r", "im-r"} {
		if !slices.Contains(writer, p.id+"_"+r) {
			t.Errorf("writer's roles %v: no %s_%s", writer, p.id, r)
		}
	}
	reader := roles("r")
	for _, r := range []string{"im-r", "cl-r", "cl-tpl-r", "alrt-r", "cat-r", "tc-r"} {
		if !slices.Contains(reader, p.id+"_"+r) {
			t.Errorf("reader's roles %v: no %s_%s", reader, p.id, r)
		}
	}
	for _, r := range reader {
		if strings.HasSuffix(r, "-rw") {
			t.Errorf("reader's roles %v: %s is a write role", reader, r)
		}
	}
}
