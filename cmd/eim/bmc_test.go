package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
)

type oneToken struct{}

func (oneToken) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	if tok != "t" {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "invalid token")
	}
	return &eim.Principal{Subject: "alice", Roles: []string{"default_im-rw"}}, nil
}

// TestHostBMC: eim host bmc set (the password from stdin, or kept when
// not given), get (no password shown) and delete, against the oob
// module's API on a real store.
func TestHostBMC(t *testing.T) {
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
	raw := make([]byte, 32)
	rand.Read(raw)
	key, _ := seal.New(raw)
	svc, err := oob.New(oob.Options{Store: st, Key: key, Authenticator: oneToken{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hd := range svc.Routes() {
		mux.Handle(p, hd)
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := &cli{ctx: ctx, stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		err := c.run(append([]string{"--server", hs.URL, "--token-file", tok, "host", "bmc"}, args...))
		return out.String() + errOut.String(), err
	}
	stored := func() string {
		b, err := st.GetBMC(ctx, "default", h.ResourceID)
		if err != nil {
			t.Fatal(err)
		}
		pw, err := key.OpenText(b.SealedPassword, eim.BMCPasswordPurpose("default", h.ResourceID))
		if err != nil {
			t.Fatal(err)
		}
		return pw
	}

	out, err := run("s3cret-pw\n", "set", h.ResourceID, "--protocol", "redfish", "--address", "https://10.0.0.5", "--username", "admin", "--password-stdin", "--insecure")
	if err != nil {
		t.Fatalf("set: %v: %s", err, out)
	}
	if !strings.Contains(out, "REDFISH") || !strings.Contains(out, "insecure") || strings.Contains(out, "s3cret") {
		t.Fatalf("set: got %q", out)
	}
	if pw := stored(); pw != "s3cret-pw" {
		t.Fatalf("stored password %q, want s3cret-pw (the line from stdin)", pw)
	}
	// Replaced without a password: kept.
	if out, err := run("", "set", h.ResourceID, "--protocol", "IPMI", "--address", "10.0.0.6:623", "--username", "root"); err != nil {
		t.Fatalf("set without a password: %v: %s", err, out)
	}
	if pw := stored(); pw != "s3cret-pw" {
		t.Fatalf("after a set without a password: %q, want it kept", pw)
	}
	out, err = run("", "get", h.ResourceID, "-o", "json")
	if err != nil || !strings.Contains(out, `"passwordSet": true`) || !strings.Contains(out, `"address": "10.0.0.6:623"`) || strings.Contains(out, "s3cret") {
		t.Fatalf("get: %v: %s", err, out)
	}
	if _, err := run("", "set", h.ResourceID, "--protocol", "IPMI", "--address", "h", "--username", "u", "--password", "a", "--password-stdin"); err == nil {
		t.Fatal("set with --password and --password-stdin: got no error")
	}
	out, err = run("", "set", h.ResourceID, "--protocol", "SNMP", "--address", "h", "--username", "u")
	if err == nil || !strings.Contains(err.Error(), "protocol:") {
		t.Fatalf("set with a bad protocol: got %v (%s), want the API's error naming protocol", err, out)
	}
	if out, err := run("", "delete", h.ResourceID); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %v: %s", err, out)
	}
	if _, err := run("", "get", h.ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Fatalf("get after delete: got %v, want not found", err)
	}
}

// TestHostPowerCLI: eim host power adds a job through the oob module's API
// (a boot override first), eim host jobs lists it; bad arguments are
// usage errors naming them.
func TestHostPowerCLI(t *testing.T) {
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
	raw := make([]byte, 32)
	rand.Read(raw)
	key, _ := seal.New(raw)
	svc, err := oob.New(oob.Options{Store: st, Key: key, Authenticator: oneToken{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hd := range svc.Routes() {
		mux.Handle(p, hd)
	}
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := &cli{ctx: ctx, stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		err := c.run(append([]string{"--server", hs.URL, "--token-file", tok, "host"}, args...))
		return out.String() + errOut.String(), err
	}
	if out, err := run("power", h.ResourceID, "on"); err == nil || !strings.Contains(out+err.Error(), "no BMC") {
		t.Fatalf("power of a host without a BMC: got %q, %v; want an error saying it has no BMC", out, err)
	}
	if _, err := run("bmc", "set", h.ResourceID, "--protocol", "IPMI", "--address", "127.0.0.1:623", "--username", "u", "--password", "p"); err != nil {
		t.Fatal(err)
	}
	out, err := run("power", h.ResourceID, "on", "--boot", "pxe", "--once")
	if err != nil || !strings.Contains(out, "PENDING") || !strings.Contains(out, "boot PXE, ON") {
		t.Fatalf("power on --boot pxe --once: got %q, %v; want a PENDING job, boot PXE then ON", out, err)
	}
	out, err = run("jobs", h.ResourceID, "-o", "json")
	if err != nil || !strings.Contains(out, `"totalElements": 1`) || !strings.Contains(out, `"once": true`) {
		t.Fatalf("jobs: got %q, %v", out, err)
	}
	// Day 0 through the BMC: a network-boot job.
	out, err = run("provision", h.ResourceID)
	if err != nil || !strings.Contains(out, "PENDING") || !strings.Contains(out, "boot PXE, ON or RESET, call home, clear boot") {
		t.Fatalf("provision: got %q, %v; want a PENDING network-boot job", out, err)
	}
	// From virtual media: the server (here) has no CD image URL.
	if out, err := run("provision", h.ResourceID, "--boot", "virtual-media"); err == nil || !strings.Contains(out+err.Error(), "--oob-virtual-media-url") {
		t.Fatalf("provision --boot virtual-media without a CD image URL: got %q, %v; want an error naming --oob-virtual-media-url", out, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"provision"}, "one host ID"},
		{[]string{"provision", h.ResourceID, "--boot", "usb"}, "network or virtual-media"},
		{[]string{"provision", h.ResourceID, "extra"}, "one host ID"},
		{[]string{"power", h.ResourceID, "warp"}, "not one of"},
		{[]string{"power", h.ResourceID, "on", "--once"}, "--once goes with --boot"},
		{[]string{"power", h.ResourceID, "off", "--boot", "pxe"}, "boot"},
		{[]string{"power", h.ResourceID}, "a host ID and a power state"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%v: got %q, %v; want an error with %q", c.args, out, err, c.want)
		}
	}
}

// TestServerNetbootFlags: the network-boot job's flags are checked before
// the server starts, and the error names the flag.
func TestServerNetbootFlags(t *testing.T) {
	for _, bad := range []string{"--oob-http-boot-url=tftp://10.0.0.1/ipxe.efi", "--oob-http-boot-url=/boot/ipxe.efi",
		"--oob-virtual-media-url=nfs://10.0.0.1/eim.iso", "--oob-virtual-media-url=eim-microos.iso",
		"--oob-call-home-timeout=500ms", "--oob-call-home-timeout=soon"} {
		err := Main(t.Context(), []string{"server", bad, "--data-dir", t.TempDir()}, io.Discard, io.Discard)
		flag, _, _ := strings.Cut(strings.TrimPrefix(bad, "--"), "=")
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("eim server %s: got %v, want a usage error naming %s", bad, err, flag)
		}
	}
}
