package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent"
)

func TestReadIdentity(t *testing.T) {
	root := t.TempDir()
	dmi := filepath.Join(root, "sys", "class", "dmi", "id")
	if err := os.MkdirAll(dmi, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dmi, "product_uuid"), []byte("4C4C4544-0035-4310-8046-B4C04F4A4C32\n"), 0o644)
	os.WriteFile(filepath.Join(dmi, "product_serial"), []byte("  SN12345 \n"), 0o644)
	id, err := agent.ReadIdentity(root)
	if err != nil {
		t.Fatal(err)
	}
	if id.UUID != "4c4c4544-0035-4310-8046-b4c04f4a4c32" || id.Serial != "SN12345" {
		t.Errorf("identity = %+v", id)
	}
	for _, i := range id.Interfaces {
		if i.Name == "lo" || i.MAC == "" || i.MAC != strings.ToLower(i.MAC) {
			t.Errorf("interface %+v: loopback or bad MAC", i)
		}
	}

	// Serial only: fine; neither: an error.
	os.Remove(filepath.Join(dmi, "product_uuid"))
	if id, err := agent.ReadIdentity(root); err != nil || id.UUID != "" || id.Serial != "SN12345" {
		t.Errorf("serial only: %+v, %v", id, err)
	}
	os.Remove(filepath.Join(dmi, "product_serial"))
	if _, err := agent.ReadIdentity(root); err == nil {
		t.Error("no UUID and no serial: no error")
	}
}

func TestParseCmdline(t *testing.T) {
	fp := strings.Repeat("0a", 32)
	for _, tc := range []struct {
		in      string
		want    agent.BootConfig
		wantErr bool
	}{
		{in: "BOOT_IMAGE=/vmlinuz eim.url=https://10.0.2.2:8443/ eim.ca=sha256:" + strings.ToUpper(fp) + " console=ttyS0 quiet\n",
			want: agent.BootConfig{URL: "https://10.0.2.2:8443", CAFingerprint: fp}},
		{in: "eim.url=https://eim.example eim.ca=" + fp + " eim.enroll=tok123",
			want: agent.BootConfig{URL: "https://eim.example", CAFingerprint: fp, EnrollToken: "tok123"}},
		{in: "eim.ca=sha256:" + fp, wantErr: true},                         // no URL
		{in: "eim.url=http://10.0.2.2 eim.ca=sha256:" + fp, wantErr: true}, // not https
		{in: "eim.url=https://10.0.2.2", wantErr: true},                    // no CA
		{in: "eim.url=https://10.0.2.2 eim.ca=sha256:abcd", wantErr: true}, // short
		{in: "eim.url=https:// eim.ca=sha256:" + fp, wantErr: true},        // no host
		{in: "eim.url=https://x eim.ca=sha1:" + fp[:40], wantErr: true},    // wrong hash
	} {
		got, err := agent.ParseCmdline(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseCmdline(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func FuzzParseCmdline(f *testing.F) {
	f.Add("eim.url=https://10.0.2.2:8443 eim.ca=sha256:" + strings.Repeat("0a", 32) + " eim.enroll=x")
	f.Add("eim.url= eim.ca==")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := agent.ParseCmdline(s)
		if err != nil {
			return
		}
		if !strings.HasPrefix(c.URL, "https://") || len(c.CAFingerprint) != 64 {
			t.Errorf("accepted %+v", c)
		}
	})
}
