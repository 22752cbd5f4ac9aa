//go:build linux

package sysinit

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFSLabel(t *testing.T) {
	ext := make([]byte, 4096)
	binary.LittleEndian.PutUint16(ext[1024+56:], 0xEF53)
	copy(ext[1024+120:], "eim-root")
	fat32 := make([]byte, 4096)
	copy(fat32[71:82], "EIMBOOT    ")
	copy(fat32[82:90], "FAT32   ")
	fat32[510], fat32[511] = 0x55, 0xaa
	fat16 := make([]byte, 4096)
	copy(fat16[43:54], "EIMBOOT    ")
	copy(fat16[54:62], "FAT16   ")
	fat16[510], fat16[511] = 0x55, 0xaa
	luks := make([]byte, 4096)
	copy(luks, "LUKS\xba\xbe\x00\x02")
	copy(luks[24:], "eim-root")
	luks1 := slices.Clone(luks)
	luks1[7] = 1
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"ext4":  {ext, "eim-root"},
		"luks2": {luks, "eim-root"},
		"luks1": {luks1, ""},
		"fat32": {fat32, "EIMBOOT"},
		"fat16": {fat16, "EIMBOOT"},
		"empty": {make([]byte, 4096), ""},
		"short": {make([]byte, 100), ""},
	} {
		if got := FSLabel(bytes.NewReader(c.b)); got != c.want {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/mnt/a\040b`); got != "/mnt/a b" {
		t.Errorf("got %q", got)
	}
	if got := unescapeMount(`/plain`); got != "/plain" {
		t.Errorf("got %q", got)
	}
}

// What provisioning writes: meta-data, and user-data as a multipart
// archive when there are custom configs (EIM's part, a cloud-config and a
// script).
const (
	sampleMeta = "instance-id: inst-12345678\nlocal-hostname: host-12345678\n"
	sampleUser = `Content-Type: multipart/mixed; boundary="EIM-CLOUD-INIT-PART-BOUNDARY"
MIME-Version: 1.0

--EIM-CLOUD-INIT-PART-BOUNDARY
Content-Disposition: attachment; filename="eim.cfg"
Content-Type: text/cloud-config; charset="utf-8"

#cloud-config
hostname: host-12345678
users:
  - default
ca_certs:
  trusted:
    - |
      -----BEGIN CERTIFICATE-----
      MIIB
      -----END CERTIFICATE-----
write_files:
  - path: /etc/systemd/system/eim-agent.service
    permissions: "0644"
    content: |
      [Unit]
runcmd:
  - [systemctl, enable, --now, eim-agent.service]
--EIM-CLOUD-INIT-PART-BOUNDARY
Content-Disposition: attachment; filename="ntp"
Content-Type: text/cloud-config; charset="utf-8"
Merge-Type: list(append)+dict(no_replace,recurse_list)+str()

#cloud-config
write_files:
  - path: /etc/eim/extra.conf
    permissions: "0600"
    content: "x=1\n"
--EIM-CLOUD-INIT-PART-BOUNDARY
Content-Disposition: attachment; filename="hello"
Content-Type: text/x-shellscript; charset="utf-8"

#!/bin/sh
echo hello
--EIM-CLOUD-INIT-PART-BOUNDARY--
`
)

func writeSeed(t *testing.T, root, meta, user string) {
	t.Helper()
	dir := filepath.Join(root, SeedDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "meta-data"), []byte(meta), 0o644)
	os.WriteFile(filepath.Join(dir, "user-data"), []byte(user), 0o600)
}

func TestSeed(t *testing.T) {
	root := t.TempDir()
	writeSeed(t, root, sampleMeta, sampleUser)
	seed, files, err := readSeed(root)
	if err != nil {
		t.Fatal(err)
	}
	if seed.InstanceID != "inst-12345678" || seed.Hostname != "host-12345678" {
		t.Errorf("instance %q hostname %q", seed.InstanceID, seed.Hostname)
	}
	if len(seed.CACerts) != 1 || !strings.Contains(seed.CACerts[0], "BEGIN CERTIFICATE") {
		t.Errorf("CA certificates %q", seed.CACerts)
	}
	if want := []string{"users", "runcmd", "part hello (text/x-shellscript)"}; !slices.Equal(seed.Skipped, want) {
		t.Errorf("skipped %q, want %q", seed.Skipped, want)
	}
	if err := writeFiles(root, seed, files); err != nil {
		t.Fatal(err)
	}
	if want := []string{"/etc/systemd/system/eim-agent.service", "/etc/eim/extra.conf"}; !slices.Equal(seed.Files, want) {
		t.Errorf("files %q, want %q", seed.Files, want)
	}
	st, err := os.Stat(filepath.Join(root, "etc/eim/extra.conf"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("extra.conf: %v, mode %v", err, st.Mode())
	}
	// write_files run once per instance: a second boot leaves the files.
	os.WriteFile(filepath.Join(root, "etc/eim/extra.conf"), []byte("changed on the node"), 0o600)
	seed2, files2, _ := readSeed(root)
	if err := writeFiles(root, seed2, files2); err != nil || len(seed2.Files) != 0 {
		t.Errorf("second boot wrote %q (%v)", seed2.Files, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/eim/extra.conf")); string(b) != "changed on the node" {
		t.Error("a second boot rewrote a file")
	}
}

func TestSeedRefuses(t *testing.T) {
	if _, _, err := readSeed(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no seed") {
		t.Errorf("no seed: got %v", err)
	}
	root := t.TempDir()
	writeSeed(t, root, sampleMeta, "#cloud-config\nwrite_files:\n  - path: relative/x\n    content: y\n")
	seed, files, err := readSeed(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(root, seed, files); err == nil {
		t.Error("a relative write_files path: got nil error")
	}
	root = t.TempDir()
	writeSeed(t, root, sampleMeta, "#cloud-config\nwrite_files:\n  - path: /../../escape\n    content: y\n")
	seed, files, _ = readSeed(root)
	if err := writeFiles(root, seed, files); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "escape")); err != nil {
		t.Errorf("/../../escape must land inside the root: %v", err)
	}
}

func TestConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "init.json")
	b, _ := Config{Mode: ModeNode, KernelRelease: "6.1", Modules: []string{"kernel/a.ko"}, RootLabel: "eim-root"}.Marshal()
	os.WriteFile(path, b, 0o644)
	c, err := LoadConfig(path)
	if err != nil || c.Mode != ModeNode || c.RootLabel != "eim-root" || len(c.Modules) != 1 {
		t.Errorf("got %+v, %v", c, err)
	}
	os.WriteFile(path, []byte(`{"mode":"other"}`), 0o644)
	if _, err := LoadConfig(path); err == nil {
		t.Error("unknown mode: got nil error")
	}
}
