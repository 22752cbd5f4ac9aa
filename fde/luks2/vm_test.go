package luks2_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/xts"

	"github.com/eimhq/eim/provisioning/initramfs"
	"github.com/eimhq/eim/provisioning/osbuild"
)

// TestVMActivateAndSeal checks Activate and Deactivate against the kernel's
// dm-crypt, which this machine's kernel may lack: a QEMU VM boots Debian's
// kernel with an initramfs whose /init is testdata/vmcheck. In the VM, Go
// formats the first disk (as the installer does), maps it and writes a
// pattern through the kernel; it unlocks and maps the second disk, which
// cryptsetup formatted here and the test filled through its own AES-XTS,
// and reads it back through the kernel. Outside, cryptsetup reads the first
// disk's header and volume key, and the data the kernel wrote decrypts to
// the pattern. With swtpm as the VM's TPM (tpm-tis), the VM also seals and
// unseals a secret with fde/tpmseal through the kernel's /dev/tpmrm0;
// without swtpm, it checks that tpmseal.Open says there is no TPM. It
// skips without QEMU, a kernel in /boot or cryptsetup, unless
// EIM_REQUIRE_QEMU (or EIM_REQUIRE_TOOLS, for cryptsetup) is set; without
// swtpm the TPM part fails with EIM_REQUIRE_SECUREBOOT.
func TestVMActivateAndSeal(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a VM")
	}
	if raceEnabled {
		t.Skip("runs in the test step without the race detector (one VM boot)")
	}
	needCryptsetup(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		skipVM(t, "qemu-system-x86_64 not installed")
	}
	k, err := osbuild.FindKernel("", "")
	if err != nil {
		skipVM(t, "no kernel to boot: "+err.Error())
	}
	dir := t.TempDir()

	// The VM's /init.
	initBin := filepath.Join(dir, "init")
	build := exec.Command("go", "build", "-o", initBin, "./testdata/vmcheck")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/vmcheck: %v\n%s", err, out)
	}

	key := []byte{0x00, 0x9f, 'k', 0xff, 0x10}
	pattern := make([]byte, 256<<10)
	for i := 0; i < len(pattern); i += sha256.Size {
		s := sha256.Sum256(binary.BigEndian.AppendUint64(nil, uint64(i)))
		copy(pattern[i:], s[:])
	}
	keyFile := writeFile(t, dir, "key", key)

	// vda: empty, for the VM to format. vdb: cryptsetup's, holding the
	// pattern encrypted here.
	vda := filepath.Join(dir, "vda.img")
	vdb := filepath.Join(dir, "vdb.img")
	for _, p := range []string{vda, vdb} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 24<<20); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cryptsetup(t, "luksFormat", "--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", keyFile, vdb); err != nil {
		t.Fatalf("cryptsetup luksFormat: %v\n%s", err, out)
	}
	bOff, bSector := dataSegment(t, vdb)
	if bSector != 4096 {
		t.Logf("cryptsetup chose %d-byte sectors (4096 expected on a file: the large-sector IVs are not checked)", bSector)
	}
	writeEncrypted(t, vdb, bOff, bSector, dumpVolumeKey(t, vdb, keyFile), pattern)

	var a initramfs.Archive
	mods, _, err := k.Modules([]string{"virtio_pci", "virtio_blk", "dm_crypt", "xts", "ecb"}, true)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, m := range mods {
		list = append(list, m.Path)
		if err := a.AddFile(filepath.Join("lib/modules", k.Release, m.Path), m.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string][]byte{
		"init": readFile(t, initBin), "key": key, "pattern": pattern,
		"modules.txt": []byte(strings.Join(list, "\n")),
	} {
		if err := a.AddFile(name, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var tpmArgs []string
	if _, err := exec.LookPath("swtpm"); err == nil {
		tpmArgs = startVMTPM(t, dir)
		if err := a.AddFile("tpm", nil, 0o644); err != nil {
			t.Fatal(err)
		}
	} else if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
		t.Fatal("swtpm not installed and EIM_REQUIRE_SECUREBOOT is set")
	}
	var img bytes.Buffer
	if err := a.WriteGzip(&img); err != nil {
		t.Fatal(err)
	}
	initrd := writeFile(t, dir, "initrd", img.Bytes())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	qemu := exec.CommandContext(ctx, "qemu-system-x86_64", append([]string{
		"-machine", "q35", "-m", "512",
		"-nographic", "-no-user-config", "-no-reboot", "-net", "none",
		"-kernel", k.Image, "-initrd", initrd, "-append", "console=ttyS0 panic=-1",
		"-drive", "file=" + vda + ",format=raw,if=virtio",
		"-drive", "file=" + vdb + ",format=raw,if=virtio"}, tpmArgs...)...)
	out, err := qemu.CombinedOutput()
	console := string(out)
	if err != nil || !strings.Contains(console, "VMCHECK DONE") {
		t.Fatalf("VM (%v): %v; console:\n%s", time.Since(start).Round(time.Second), err, console)
	}
	t.Logf("VM ran in %v", time.Since(start).Round(time.Second))
	want := fmt.Sprintf("%x", sha256.Sum256(pattern))
	tpmLine := "VMCHECK tpm sealed and unsealed"
	if tpmArgs == nil {
		tpmLine = "VMCHECK tpm absent: tpmseal: no TPM 2.0 on this node"
	}
	for _, line := range []string{tpmLine, "VMCHECK vda-readback " + want, "VMCHECK vdb " + want, "VMCHECK duplicate-name luks2: activate vmcheck-b: DM_DEV_CREATE: device or resource busy"} {
		if !strings.Contains(console, line) {
			t.Errorf("console lacks %q:\n%s", line, console)
		}
	}

	// Outside: cryptsetup reads the header Go wrote in the VM, its volume
	// key decrypts what the kernel wrote to the pattern.
	dump, err := cryptsetup(t, "luksDump", vda)
	if err != nil || !strings.Contains(dump, "Version:       \t2") || !strings.Contains(dump, "Label:         \tvmcheck") {
		t.Fatalf("cryptsetup luksDump of the VM's disk: %v\n%s", err, dump)
	}
	aOff, aSector := dataSegment(t, vda)
	got := readDecrypted(t, vda, aOff, aSector, dumpVolumeKey(t, vda, keyFile), len(pattern))
	if !bytes.Equal(got, pattern) {
		t.Fatal("the VM's disk does not decrypt to the pattern written through the mapping")
	}
}

func skipVM(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("EIM_REQUIRE_QEMU") != "" {
		t.Fatal(why + " and EIM_REQUIRE_QEMU is set")
	}
	t.Skip(why)
}

// dataSegment is the data segment's offset and sector size as cryptsetup
// reads them.
func dataSegment(t *testing.T, img string) (int64, int) {
	t.Helper()
	out, err := cryptsetup(t, "luksDump", img)
	m := regexp.MustCompile(`offset: (\d+) \[bytes\]`).FindStringSubmatch(out)
	s := regexp.MustCompile(`sector: (\d+) \[bytes\]`).FindStringSubmatch(out)
	if err != nil || m == nil || s == nil {
		t.Fatalf("cryptsetup luksDump: %v\n%s", err, out)
	}
	off, _ := strconv.ParseInt(m[1], 10, 64)
	sector, _ := strconv.Atoi(s[1])
	return off, sector
}

// aes-xts-plain64 of the data segment: each sector (of the segment's size)
// encrypted with its number from the segment's start as the tweak (LUKS2
// counts in sectors of that size), written here independently of the
// package.
func xtsCipher(t *testing.T, vk []byte) *xts.Cipher {
	t.Helper()
	c, err := xts.NewCipher(aes.NewCipher, vk)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeEncrypted(t *testing.T, img string, off int64, sector int, vk, plain []byte) {
	t.Helper()
	c := xtsCipher(t, vk)
	enc := make([]byte, len(plain))
	for i := 0; i < len(plain); i += sector {
		c.Encrypt(enc[i:i+sector], plain[i:i+sector], uint64(i/sector))
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(enc, off); err != nil {
		t.Fatal(err)
	}
}

func readDecrypted(t *testing.T, img string, off int64, sector int, vk []byte, n int) []byte {
	t.Helper()
	c := xtsCipher(t, vk)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += sector {
		c.Decrypt(b[i:i+sector], b[i:i+sector], uint64(i/sector))
	}
	return b
}

// startVMTPM starts swtpm for QEMU (its control channel on a Unix socket)
// and returns QEMU's arguments for a TPM 2.0 on the TIS interface.
func startVMTPM(t *testing.T, dir string) []string {
	t.Helper()
	state := filepath.Join(dir, "tpm")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "swtpm.sock")
	var log bytes.Buffer
	cmd := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+sock, "--flags", "not-need-init")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not create its socket in 30 s: %s", log.String())
		}
		time.Sleep(50 * time.Millisecond) // polling for the socket, with the deadline above
	}
	return []string{"-chardev", "socket,id=chrtpm,path=" + sock,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0"}
}
