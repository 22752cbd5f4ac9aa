package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim/agent"
)

// cmdRecorder is a TEST DOUBLE of the programs the updaters run (apt-get,
// update-grub, grub-editenv): it records each command line and answers
// with canned output, so the updaters' logic runs here without changing
// this machine's packages or boot loader. The real programs run in the
// VM boot test.
type cmdRecorder struct {
	mu   sync.Mutex
	cmds []string
	fail map[string]error // by program name
}

func (r *cmdRecorder) run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, strings.TrimSpace(name+" "+strings.Join(args, " ")))
	if err := r.fail[name]; err != nil {
		return []byte(name + ": failing as told\n"), err
	}
	return []byte(name + " ok\n"), nil
}

func (r *cmdRecorder) commands() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.cmds...)
}

func TestParsePackages(t *testing.T) {
	got, err := agent.ParsePackages("curl\n\n  openssl \nlibc6:amd64\n")
	if err != nil || strings.Join(got, ",") != "curl,openssl,libc6:amd64" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, bad := range []string{"curl=7.88", "-o APT::Get::AllowUnauthenticated=true", "Curl", "a b"} {
		if _, err := agent.ParsePackages("ok\n" + bad); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: err %v, want one naming line 2", bad, err)
		}
	}
}

func TestAptApply(t *testing.T) {
	root := t.TempDir()
	rec := &cmdRecorder{}
	apt := &agent.Apt{Run: rec.run, Root: root}
	var log bytes.Buffer
	reboot, err := apt.Apply(t.Context(), agent.MutableUpdate{
		Sources:       []string{"Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm\nComponents: main\n"},
		Packages:      []string{"curl", "openssl"},
		KernelCommand: "quiet  intel_iommu=on",
	}, &log)
	if err != nil {
		t.Fatalf("Apply: %v\n%s", err, log.String())
	}
	if !reboot {
		t.Error("a new kernel command line needs a reboot")
	}
	want := []string{
		"apt-get update",
		"apt-get -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install -- curl openssl",
		"update-grub",
	}
	if got := rec.commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	src, err := os.ReadFile(filepath.Join(root, "etc/apt/sources.list.d/eim-update.sources"))
	if err != nil || !strings.Contains(string(src), "URIs: http://deb.example/debian") {
		t.Fatalf("sources file: %q, %v", src, err)
	}
	grub, err := os.ReadFile(filepath.Join(root, "etc/default/grub.d/90-eim-update.cfg"))
	if err != nil || !strings.Contains(string(grub), `GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} quiet intel_iommu=on"`) {
		t.Fatalf("grub drop-in: %q, %v", grub, err)
	}

	// The same policy again: nothing for GRUB, no reboot; no packages
	// upgrades what is installed.
	rec.cmds = nil
	reboot, err = apt.Apply(t.Context(), agent.MutableUpdate{KernelCommand: "quiet intel_iommu=on"}, &log)
	if err != nil || reboot {
		t.Fatalf("again: reboot %v, err %v", reboot, err)
	}
	if got := strings.Join(rec.commands(), "\n"); got != "apt-get update\napt-get -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold upgrade" {
		t.Fatalf("commands: %s", got)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/apt/sources.list.d/eim-update.sources")); !os.IsNotExist(err) {
		t.Error("a policy without sources must remove the old sources file")
	}

	// A package manager's failure is the update's; a shell-looking kernel
	// option is refused before anything runs.
	rec.cmds, rec.fail = nil, map[string]error{"apt-get": errors.New("exit status 100")}
	if _, err := apt.Apply(t.Context(), agent.MutableUpdate{Packages: []string{"curl"}}, &log); err == nil {
		t.Fatal("apt-get failing: no error")
	}
	rec.cmds, rec.fail = nil, nil
	if _, err := apt.Apply(t.Context(), agent.MutableUpdate{KernelCommand: "quiet $(reboot)"}, &log); err == nil || len(rec.commands()) != 0 {
		t.Fatalf("kernel command with $( ): err %v, commands %v", err, rec.commands())
	}
}

// The A/B updater writes the image into the slot the node does not run
// from, checking its SHA-256, points the next boot at it once, and commits
// it after the boot. Slots are real files here; the boot loader's program
// is recorded.
func TestABImage(t *testing.T) {
	dir := t.TempDir()
	image := bytes.Repeat([]byte("edge-os-v2 "), 10000)
	sum := sha256.Sum256(image)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(image) }))
	defer srv.Close()
	slotA, slotB := filepath.Join(dir, "root-a"), filepath.Join(dir, "root-b")
	for _, p := range []string{slotA, slotB} {
		if err := os.WriteFile(p, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	layout := filepath.Join(dir, "ab.json")
	os.WriteFile(layout, []byte(`{"slots":{"a":"`+slotA+`","b":"`+slotB+`"},"entries":{"a":"eim-a","b":"eim-b"},"grubEnv":"`+dir+`/grubenv"}`), 0o600)
	l, err := agent.LoadABSlots(layout)
	if err != nil {
		t.Fatal(err)
	}
	rec := &cmdRecorder{}
	u := &agent.ABImage{Layout: l, Cmdline: "root=/dev/vda2 eim.slot=a quiet", Run: rec.run}
	var log bytes.Buffer
	slot, err := u.Install(t.Context(), agent.Image{URL: srv.URL + "/os.img", Sha256: hex.EncodeToString(sum[:])}, &log)
	if err != nil || slot != "b" {
		t.Fatalf("Install: slot %q, %v\n%s", slot, err, log.String())
	}
	if got, _ := os.ReadFile(slotB); !bytes.Equal(got, image) {
		t.Fatal("slot b does not hold the image")
	}
	if got, _ := os.ReadFile(slotA); string(got) != "old" {
		t.Fatal("the running slot was written")
	}
	if got := strings.Join(rec.commands(), "\n"); got != "grub-editenv "+dir+"/grubenv set next_entry=eim-b" {
		t.Fatalf("commands: %s", got)
	}

	// A wrong checksum fails, and the boot loader is not touched.
	rec.cmds = nil
	if _, err := u.Install(t.Context(), agent.Image{URL: srv.URL + "/os.img", Sha256: strings.Repeat("0", 64)}, &log); err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Fatalf("bad checksum: %v", err)
	}
	if len(rec.commands()) != 0 {
		t.Fatalf("boot loader changed after a bad image: %v", rec.commands())
	}

	// After the reboot: slot b runs; commit makes it the default.
	u.Cmdline = "eim.slot=b"
	if b, err := u.Booted(); err != nil || b != "b" {
		t.Fatalf("Booted: %q, %v", b, err)
	}
	if err := u.Commit(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	if got := rec.commands(); got[len(got)-1] != "grub-editenv "+dir+"/grubenv set saved_entry=eim-b" {
		t.Fatalf("commit: %v", got)
	}
	u.Cmdline = "quiet"
	if _, err := u.Booted(); err == nil {
		t.Fatal("no eim.slot=: no error")
	}

	// Layout errors name the problem.
	os.WriteFile(layout, []byte(`{"slots":{"a":"/dev/x"},"entries":{"a":"x"}}`), 0o600)
	if _, err := agent.LoadABSlots(layout); err == nil || !strings.Contains(err.Error(), "want 2 slots") {
		t.Fatalf("one slot: %v", err)
	}
}
