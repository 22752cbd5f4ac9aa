package agent_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// tpmRoot lays out a machine's sysfs and securityfs below a directory:
// tpm0 with the PCR files given, and the event log when log is not nil.
func tpmRoot(t *testing.T, major string, pcrs map[int]string, log []byte) string {
	t.Helper()
	root := t.TempDir()
	tpm := filepath.Join(root, "sys", "class", "tpm", "tpm0")
	mkfile(t, filepath.Join(tpm, "tpm_version_major"), []byte(major+"\n"))
	if pcrs != nil {
		if err := os.MkdirAll(filepath.Join(tpm, "pcr-sha256"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range pcrs {
		mkfile(t, filepath.Join(tpm, "pcr-sha256", strconv.Itoa(i)), []byte(v+"\n"))
	}
	if log != nil {
		mkfile(t, filepath.Join(root, "sys", "kernel", "security", "tpm0", "binary_bios_measurements"), log)
	}
	return root
}

func mkfile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadMeasuredBoot(t *testing.T) {
	v0 := strings.Repeat("AB", 32) // sysfs prints upper-case hex
	v7 := strings.Repeat("07", 32)
	log := []byte("the event log")
	t.Run("present", func(t *testing.T) {
		mb := agent.ReadMeasuredBoot(tpmRoot(t, "2", map[int]string{0: v0, 7: v7}, log))
		if mb.GetTpm() != provisioningv1.MeasuredBoot_TPM_PRESENT || mb.GetError() != "" {
			t.Fatalf("got tpm %v, error %q; want present, no error", mb.GetTpm(), mb.GetError())
		}
		got := map[uint32]string{}
		for _, p := range mb.GetPcrs() {
			got[p.GetIndex()] = hex.EncodeToString(p.GetSha256())
		}
		if len(got) != 2 || got[0] != strings.ToLower(v0) || got[7] != v7 {
			t.Errorf("got PCRs %v, want 0 and 7 of the files", got)
		}
		if !bytes.Equal(mb.GetEventLog(), log) {
			t.Errorf("got event log %q, want %q", mb.GetEventLog(), log)
		}
	})
	for _, c := range []struct {
		name string
		root func(t *testing.T) string
		tpm  provisioningv1.MeasuredBoot_Tpm
		want string
	}{
		{"no TPM", func(t *testing.T) string { return t.TempDir() }, provisioningv1.MeasuredBoot_TPM_ABSENT, ""},
		{"TPM 1.2", func(t *testing.T) string { return tpmRoot(t, "1", nil, log) }, provisioningv1.MeasuredBoot_TPM_PRESENT, "TPM 1.2"},
		{"no SHA-256 bank", func(t *testing.T) string { return tpmRoot(t, "2", nil, log) }, provisioningv1.MeasuredBoot_TPM_PRESENT, "SHA-256 PCRs"},
		{"bad PCR value", func(t *testing.T) string { return tpmRoot(t, "2", map[int]string{3: "xyz"}, log) }, provisioningv1.MeasuredBoot_TPM_PRESENT, "PCR 3: not a SHA-256 value"},
		{"no event log", func(t *testing.T) string { return tpmRoot(t, "2", map[int]string{0: v0}, nil) }, provisioningv1.MeasuredBoot_TPM_PRESENT, "securityfs not mounted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mb := agent.ReadMeasuredBoot(c.root(t))
			if mb.GetTpm() != c.tpm || (c.want == "") != (mb.GetError() == "") || !strings.Contains(mb.GetError(), c.want) {
				t.Errorf("got tpm %v, error %q; want %v, an error containing %q", mb.GetTpm(), mb.GetError(), c.tpm, c.want)
			}
		})
	}
}
