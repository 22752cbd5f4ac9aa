package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/sqlstore"
)

// twoTokens: "admin" is an administrator, "rw" a writer of the project.
type twoTokens struct{}

func (twoTokens) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	switch tok {
	case "admin":
		return &eim.Principal{Subject: "root", Roles: []string{eim.RoleAdmin}}, nil
	case "rw":
		return &eim.Principal{Subject: "alice", Roles: []string{"default_im-rw"}}, nil
	}
	return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
}

// TestHostAttestationKeyCLI: eim host attestation-key get shows the pinned
// keys and what the EK was believed on; reset is refused to a project
// writer and done for an administrator, after which get finds none.
func TestHostAttestationKeyCLI(t *testing.T) {
	ctx := t.Context()
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateProject(ctx, &eim.Project{Name: "default", ID: "00000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	h := &eim.Host{Name: "h"}
	if err := st.Update(ctx, "default", func(tx eim.Tx) error { return tx.Create(ctx, h) }); err != nil {
		t.Fatal(err)
	}
	prov := provisioning.New(provisioning.Options{Store: st})
	hs := httptest.NewServer(httpapi.New(inventory.New(st, inventory.Options{}), twoTokens{}, httpapi.Options{AttestationKeys: prov}))
	t.Cleanup(hs.Close)
	dir := t.TempDir()
	for _, tok := range []string{"admin", "rw"} {
		if err := os.WriteFile(filepath.Join(dir, tok), []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(tok string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := &cli{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		err := c.run(append([]string{"--server", hs.URL, "--token-file", filepath.Join(dir, tok), "host", "attestation-key"}, args...))
		return out.String() + errOut.String(), err
	}

	if _, err := run("rw", "get", h.ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("get with nothing pinned: got %v, want not found", err)
	}
	if _, err := st.UseAttestationKey(ctx, &eim.AttestationKey{Project: "default", HostID: h.ResourceID, Public: []byte{1}, Name: "000b01", EKName: "000bee", NonceAt: 1}); err != nil {
		t.Fatal(err)
	}
	out, err := run("rw", "get", h.ResourceID)
	if err != nil || !strings.Contains(out, "000b01") || !strings.Contains(out, "000bee") || !strings.Contains(out, "FIRST_USE") || !strings.Contains(out, "trusted on first use: no TPM maker CA is configured") {
		t.Fatalf("get: %v: %s", err, out)
	}
	out, err = run("rw", "get", h.ResourceID, "-o", "json")
	if err != nil || !strings.Contains(out, `"akName": "000b01"`) || !strings.Contains(out, `"trust": "FIRST_USE"`) {
		t.Fatalf("get -o json: %v: %s", err, out)
	}
	if _, err := run("rw", "reset", h.ResourceID); eim.ErrorCode(err) != eim.EFORBIDDEN {
		t.Fatalf("reset by a project writer: got %v, want forbidden", err)
	}
	if out, err := run("admin", "reset", h.ResourceID); err != nil || !strings.Contains(out, "reset the attestation key of "+h.ResourceID) {
		t.Fatalf("reset: %v: %s", err, out)
	}
	if _, err := run("rw", "get", h.ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("get after the reset: got %v, want not found", err)
	}
	if _, err := run("admin", "rotate", h.ResourceID); err == nil || !strings.Contains(err.Error(), `unknown verb "rotate"`) {
		t.Fatalf("an unknown verb: got %v", err)
	}
	if _, err := run("admin", "get"); err == nil {
		t.Fatal("get without a host: got no error")
	}
}
