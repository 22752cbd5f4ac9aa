package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestFieldValue(t *testing.T) {
	tests := []struct {
		kind  eim.Kind
		field string
		vals  []string
		want  string // JSON; "" = error
	}{
		{eim.KindRegion, "name", []string{"europe"}, `"europe"`},
		{eim.KindRegion, "name", []string{"a", "b"}, `"b"`},
		{eim.KindRegion, "metadata", []string{"zone=eu", "tier=1,x=y=z"}, `[{"key":"zone","value":"eu"},{"key":"tier","value":"1"},{"key":"x","value":"y=z"}]`},
		{eim.KindRegion, "metadata", []string{`[{"key":"k","value":"v"}]`}, `[{"key":"k","value":"v"}]`},
		{eim.KindRegion, "metadata", []string{""}, `[]`},
		{eim.KindRegion, "metadata", []string{"novalue"}, ""},
		{eim.KindSite, "siteLat", []string{"-123"}, `-123`},
		{eim.KindSite, "siteLat", []string{"3000000000"}, ""},
		{eim.KindSite, "siteLat", []string{"north"}, ""},
		{eim.KindSingleSchedule, "startSeconds", []string{"-1"}, ""},
		{eim.KindSingleSchedule, "startSeconds", []string{"1700000000"}, `1700000000`},
		{eim.KindInstance, "customConfigID", []string{"customconfig-00000001", "customconfig-00000002"}, `["customconfig-00000001","customconfig-00000002"]`},
		{eim.KindHost, "site_id", []string{"site-0000abcd"}, `"site-0000abcd"`},
		{eim.KindHost, "desiredState", []string{"HOST_STATE_DELETED"}, ""}, // read-only
		{eim.KindHost, "nosuch", []string{"x"}, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+"."+tt.field, func(t *testing.T) {
			got, err := fieldValue(tt.kind, tt.field, tt.vals)
			if tt.want == "" {
				if err == nil {
					t.Errorf("got %s, want an error", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestParseAllIntersperses(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		wantO   string
	}{
		{[]string{"host-1", "-o", "json"}, []string{"host-1"}, "json"},
		{[]string{"-o", "json", "host-1", "host-2"}, []string{"host-1", "host-2"}, "json"},
		{[]string{"a", "--", "-o", "b"}, []string{"a", "-o", "b"}, "table"},
		{nil, nil, "table"},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o := fs.String("o", "table", "")
		pos, err := (&cli{}).parseAll(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.wantPos) || *o != tt.wantO {
			t.Errorf("parseAll(%q): got %q, -o %q, %v; want %q, -o %q", tt.args, pos, *o, err, tt.wantPos, tt.wantO)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"unknown command", []string{"frob"}, `unknown command "frob"`},
		{"unknown verb", []string{"region", "frob"}, `unknown verb "frob"`},
		{"unknown flag", []string{"region", "list", "--frob"}, "flag provided but not defined"},
		{"bad output", []string{"--token-file", os.DevNull, "region", "list", "-o", "yaml"}, `-o "yaml"`},
		{"get without id", []string{"--token-file", os.DevNull, "region", "get"}, "want one ID"},
		{"update of provider", []string{"provider", "update", "provider-00000001"}, "no update"},
		{"register without ids", []string{"--token-file", os.DevNull, "host", "register", "--name", "x"}, "--serial or --uuid"},
		{"token without role", []string{"token", "create", "--data-dir", dir}, "--role"},
		{"token admin and role", []string{"token", "create", "--admin", "--role", "r"}, "exclude"},
		{"token bad role", []string{"token", "create", "--role", "x"}, `--role "x"`},
		{"server bad log level", []string{"server", "--log-level", "loud"}, "--log-level"},
		{"server one database connection", []string{"server", "--database-max-conns", "1"}, "--database-max-conns: must be at least 2"},
		{"server UI client without an issuer", []string{"server", "--ui-oidc-client-id", "eim-ui"}, "--ui-oidc-client-id: needs --oidc-issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := Main(context.Background(), tt.args, &out, &errOut)
			var u *usageError
			if !errors.As(err, &u) {
				t.Fatalf("got %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestTokenCreateNeedsServerState(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := Main(context.Background(), []string{"token", "create", "--data-dir", dir, "--admin"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "no signing key") {
		t.Errorf("admin token without a key: got %v, want an error about the signing key", err)
	}
	err = Main(context.Background(), []string{"token", "create", "--data-dir", dir, "--project", "p", "--role", "rw"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("project token without a database: got %v, want an error about the database", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "eim.db")); err == nil {
		t.Errorf("token create created a database in %s", dir)
	}
}

func TestHelpSucceeds(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"host"}, {"host", "list", "-h"}, {"server", "--help"}, {"token"}, {"project"}} {
		var out bytes.Buffer
		if err := Main(context.Background(), args, &out, io.Discard); err != nil {
			t.Errorf("eim %q: got %v, want help and success", args, err)
		}
		if out.Len() == 0 {
			t.Errorf("eim %q: printed no help", args)
		}
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{eim.Errorf(eim.ENOTFOUND, "host not found"), "host not found"},
		{errors.Join(errors.New("x")), "x"},
		{wrap("delete host-1", eim.Errorf(eim.EFORBIDDEN, "no access")), "delete host-1: no access"},
	}
	for _, tt := range tests {
		if got := errorText(tt.err); got != tt.want {
			t.Errorf("errorText(%v): got %q, want %q", tt.err, got, tt.want)
		}
	}
}

func wrap(msg string, err error) error { return &wrapped{msg, err} }

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestSplitTemplateRef(t *testing.T) {
	tests := []struct{ ref, name, version string }{
		{"baseline-v0.1.0", "baseline", "v0.1.0"},
		{"my-vm-v1.2.3", "my-vm", "v1.2.3"},
		{"lab-v1.0.0-dev", "lab", "v1.0.0-dev"},
		{"lab", "", ""},
		{"lab-v1", "", ""},
		{"-v1.0.0", "", ""},
	}
	for _, tt := range tests {
		name, version, ok := splitTemplateRef(tt.ref)
		if ok != (tt.name != "") || name != tt.name || version != tt.version {
			t.Errorf("splitTemplateRef(%q) = %q, %q, %v; want %q, %q", tt.ref, name, version, ok, tt.name, tt.version)
		}
	}
}
