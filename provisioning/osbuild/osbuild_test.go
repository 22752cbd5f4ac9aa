package osbuild

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// fakeKernel writes a bzImage with a setup header naming release, and a
// modules directory for it.
func fakeKernel(t *testing.T, release string) *Kernel {
	t.Helper()
	dir := t.TempDir()
	img := make([]byte, 0x1000)
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x20e:], 0x300) // the version at 0x500
	copy(img[0x500:], release+" (builder@example) #1 SMP\x00")
	image := filepath.Join(dir, "vmlinuz-"+release)
	if err := os.WriteFile(image, img, 0o644); err != nil {
		t.Fatal(err)
	}
	mods := filepath.Join(dir, "lib/modules", release)
	write := func(name string, data []byte) {
		p := filepath.Join(mods, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("modules.dep", []byte(`kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/virtio/virtio.ko:
kernel/fs/ext4/ext4.ko.xz: kernel/lib/crc16.ko kernel/fs/jbd2/jbd2.ko
kernel/fs/jbd2/jbd2.ko:
kernel/lib/crc16.ko:
`))
	write("modules.builtin", []byte("kernel/drivers/virtio/virtio_pci.ko\n"))
	for _, m := range []string{"drivers/net/virtio_net", "drivers/net/net_failover", "net/core/failover", "drivers/virtio/virtio", "fs/jbd2/jbd2", "lib/crc16"} {
		write("kernel/"+m+".ko", []byte("module "+m))
	}
	var xzb bytes.Buffer
	w, _ := xz.NewWriter(&xzb)
	w.Write([]byte("module fs/ext4/ext4"))
	w.Close()
	write("kernel/fs/ext4/ext4.ko.xz", xzb.Bytes())
	k, err := FindKernel(image, mods)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fakeAgent writes a minimal static x86-64 ELF executable header.
func fakeAgent(t *testing.T, interp bool) string {
	t.Helper()
	b := make([]byte, 64+56)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1                // 64-bit, little-endian, version 1
	binary.LittleEndian.PutUint16(b[16:], 2)  // ET_EXEC
	binary.LittleEndian.PutUint16(b[18:], 62) // EM_X86_64
	binary.LittleEndian.PutUint32(b[20:], 1)
	binary.LittleEndian.PutUint64(b[32:], 64) // program headers right after
	binary.LittleEndian.PutUint16(b[52:], 64)
	binary.LittleEndian.PutUint16(b[54:], 56)
	binary.LittleEndian.PutUint16(b[56:], 1)
	typ := uint32(1) // PT_LOAD
	if interp {
		typ = 3 // PT_INTERP
	}
	binary.LittleEndian.PutUint32(b[64:], typ)
	p := filepath.Join(t.TempDir(), "eim-agent")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestKernelRelease(t *testing.T) {
	k := fakeKernel(t, "6.1.0-99-test")
	if k.Release != "6.1.0-99-test" {
		t.Errorf("release %q", k.Release)
	}
	if _, err := KernelRelease(fakeAgent(t, false)); err == nil {
		t.Error("not a bzImage: got nil error")
	}
}

func TestVersionLess(t *testing.T) {
	in := []string{"vmlinuz-6.1.0-10-amd64", "vmlinuz-6.1.0-9-amd64", "vmlinuz-5.10.0-30-amd64", "vmlinuz-6.10.1-1-amd64"}
	slices.SortFunc(in, func(a, b string) int {
		if versionLess(a, b) {
			return -1
		}
		if versionLess(b, a) {
			return 1
		}
		return 0
	})
	want := []string{"vmlinuz-5.10.0-30-amd64", "vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64", "vmlinuz-6.10.1-1-amd64"}
	if !slices.Equal(in, want) {
		t.Errorf("got %q, want %q", in, want)
	}
}

func TestModules(t *testing.T) {
	k := fakeKernel(t, "6.1.0-99-test")
	mods, missing, err := k.Modules([]string{"virtio-net", "ext4", "virtio_pci", "nosuch"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range mods {
		paths = append(paths, m.Path)
	}
	// Dependencies first; each once; xz decompressed and renamed .ko.
	want := []string{
		"kernel/net/core/failover.ko", "kernel/drivers/net/net_failover.ko", "kernel/drivers/virtio/virtio.ko", "kernel/drivers/net/virtio_net.ko",
		"kernel/lib/crc16.ko", "kernel/fs/jbd2/jbd2.ko", "kernel/fs/ext4/ext4.ko",
	}
	if !slices.Equal(paths, want) {
		t.Errorf("load order\n got %q\nwant %q", paths, want)
	}
	if string(mods[len(mods)-1].Data) != "module fs/ext4/ext4" {
		t.Errorf("ext4.ko.xz not decompressed: %q", mods[len(mods)-1].Data)
	}
	if !slices.Equal(missing, []string{"nosuch"}) {
		t.Errorf("missing %q (virtio_pci is built in)", missing)
	}
	if _, _, err := k.Modules([]string{"nosuch"}, true); err == nil {
		t.Error("strict with an unknown module: got nil error")
	}
}

func TestCheckStatic(t *testing.T) {
	if err := CheckStatic(fakeAgent(t, false)); err != nil {
		t.Errorf("static: %v", err)
	}
	if err := CheckStatic(fakeAgent(t, true)); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("dynamic: got %v", err)
	}
}

// The micro-OS is reproducible, its manifest verifies with the key and
// lists every file of the initramfs, and the initramfs says what to load.
func TestBuildMicroOS(t *testing.T) {
	k := fakeKernel(t, "6.1.0-99-test")
	agent := fakeAgent(t, false)
	pub, key, _ := ed25519.GenerateKey(nil)
	build := func() string {
		dir := t.TempDir()
		res, err := BuildMicroOS(MicroOSOptions{Kernel: k, Modules: []string{"virtio_net", "ext4"}, Agent: agent,
			CACertPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Key: key, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Modules) != 7 {
			t.Errorf("%d modules, want 7", len(res.Modules))
		}
		return dir
	}
	a, b := build(), build()
	for _, name := range []string{bootartifact.KernelFile, bootartifact.InitrdFile, bootartifact.FileName, bootartifact.SignatureName} {
		x, _ := os.ReadFile(filepath.Join(a, name))
		y, _ := os.ReadFile(filepath.Join(b, name))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same inputs (or is empty)", name)
		}
	}
	body, _ := os.ReadFile(filepath.Join(a, bootartifact.FileName))
	sig, _ := os.ReadFile(filepath.Join(a, bootartifact.SignatureName))
	m, err := bootartifact.Verify(pub, body, sig)
	if err != nil {
		t.Fatal(err)
	}
	if m.KernelRelease != "6.1.0-99-test" {
		t.Errorf("kernel release %q", m.KernelRelease)
	}
	var names []string
	for _, f := range m.InitrdFiles {
		names = append(names, f.Name)
	}
	for _, want := range []string{"init", "etc/eim/init.json", "etc/eim/ca.crt", "etc/eim/artifacts.pub", "lib/modules/6.1.0-99-test/kernel/fs/ext4/ext4.ko"} {
		if !slices.Contains(names, want) {
			t.Errorf("the manifest does not list %s (it lists %q)", want, names)
		}
	}
	f, _ := m.Find(bootartifact.InitrdFile)
	img, _ := os.Open(filepath.Join(a, bootartifact.InitrdFile))
	defer img.Close()
	if err := f.Check(img); err != nil {
		t.Error(err)
	}
}

func TestAssembleGPT(t *testing.T) {
	boot := bytes.Repeat([]byte{1}, 3*mib)
	root := bytes.Repeat([]byte{2}, 5*mib)
	disk := assembleGPT(bytes.Repeat([]byte{0xeb}, 440), []gptPart{
		{typ: typeESP, name: "EIM boot", attrs: gptAttrLegacyBoot, data: boot},
		{typ: typeLinux, name: "eim-root", data: root},
	})
	if disk[510] != 0x55 || disk[511] != 0xaa || disk[446+4] != 0xee {
		t.Fatal("no protective MBR")
	}
	total := uint64(len(disk) / 512)
	for _, h := range []struct {
		lba, other, table uint64
	}{{1, total - 1, 2}, {total - 1, 1, total - 33}} {
		hdr := append([]byte(nil), disk[h.lba*512:h.lba*512+92]...)
		if string(hdr[:8]) != "EFI PART" {
			t.Fatalf("no GPT header at LBA %d", h.lba)
		}
		crc := binary.LittleEndian.Uint32(hdr[16:])
		binary.LittleEndian.PutUint32(hdr[16:], 0)
		if crc32.ChecksumIEEE(hdr) != crc {
			t.Errorf("header at LBA %d: CRC mismatch", h.lba)
		}
		if binary.LittleEndian.Uint64(hdr[24:]) != h.lba || binary.LittleEndian.Uint64(hdr[32:]) != h.other || binary.LittleEndian.Uint64(hdr[72:]) != h.table {
			t.Errorf("header at LBA %d: self/other/table %d/%d/%d", h.lba, binary.LittleEndian.Uint64(hdr[24:]), binary.LittleEndian.Uint64(hdr[32:]), binary.LittleEndian.Uint64(hdr[72:]))
		}
		table := disk[h.table*512 : h.table*512+128*128]
		if crc32.ChecksumIEEE(table) != binary.LittleEndian.Uint32(hdr[88:]) {
			t.Errorf("entries at LBA %d: CRC mismatch", h.table)
		}
	}
	ent := func(i int) (typ []byte, first, last, attrs uint64) {
		e := disk[2*512+i*128:]
		return e[:16], binary.LittleEndian.Uint64(e[32:]), binary.LittleEndian.Uint64(e[40:]), binary.LittleEndian.Uint64(e[48:])
	}
	typ, first, last, attrs := ent(0)
	if !bytes.Equal(typ, []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}) || first != 2048 || last != 2048+6144-1 || attrs != 4 {
		t.Errorf("ESP: type % x, LBA %d..%d, attributes %d", typ, first, last, attrs)
	}
	if _, first, last, _ := ent(1); first != 2048+6144 || last != 2048+6144+10240-1 {
		t.Errorf("root: LBA %d..%d", first, last)
	}
	if disk[2048*512] != 1 || disk[(2048+6144)*512] != 2 {
		t.Error("partitions not where the table says")
	}
	// util-linux reads it as we mean it, when installed.
	if sfdisk, err := exec.LookPath("sfdisk"); err == nil {
		p := filepath.Join(t.TempDir(), "disk.img")
		os.WriteFile(p, disk, 0o644)
		out, err := exec.Command(sfdisk, "--dump", p).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "label: gpt") || !strings.Contains(string(out), "start=        2048, size=        6144") ||
			!strings.Contains(string(out), "LegacyBIOSBootable") {
			t.Errorf("sfdisk --dump: %v\n%s", err, out)
		}
	}
}

// With the Secure Boot key, the micro-OS kernel and iPXE are written
// signed (sbverify-compatible Authenticode, checked here with
// secureboot.Verify) and the manifest lists the signed kernel; a kernel
// that is not a PE image is refused with the reason.
func TestBuildMicroOSSignsForSecureBoot(t *testing.T) {
	k := fakeKernel(t, "6.1.0-99-test")
	// An EFI-stub kernel: a PE image that is also a bzImage.
	img := make([]byte, 0x1000)
	copy(img, petest.Minimal(7))
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x20e:], 0x300)
	copy(img[0x500:], "6.1.0-99-test (builder@example) #1 SMP\x00")
	plain := k.Image
	pe := filepath.Join(t.TempDir(), "vmlinuz-pe")
	ipxe := filepath.Join(t.TempDir(), "ipxe.efi")
	loader := filepath.Join(t.TempDir(), "systemd-bootx64.efi")
	for p, b := range map[string][]byte{pe: img, ipxe: petest.Minimal(9), loader: petest.Minimal(11)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k.Image = pe
	sbKey, sbCert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	opts := MicroOSOptions{Kernel: k, Modules: []string{"ext4"}, Agent: fakeAgent(t, false),
		CACertPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Key: key, Dir: dir,
		SecureBootKey: sbKey, SecureBootCert: sbCert, IPXE: ipxe, BootLoader: loader}
	res, err := BuildMicroOS(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bootartifact.KernelFile, IPXEFile, bootartifact.BootLoaderFile} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := secureboot.Verify(b, sbCert); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	f, _ := res.Manifest.Find(bootartifact.KernelFile)
	kf, _ := os.Open(filepath.Join(dir, bootartifact.KernelFile))
	defer kf.Close()
	if err := f.Check(kf); err != nil {
		t.Errorf("the manifest does not describe the signed kernel: %v", err)
	}
	opts.Kernel.Image, opts.Dir = plain, t.TempDir()
	if _, err := BuildMicroOS(opts); err == nil || !strings.Contains(err.Error(), "sign for Secure Boot") {
		t.Errorf("a kernel that is not a PE image: got %v, want the reason", err)
	}
	opts.Kernel.Image, opts.SecureBootKey = pe, nil
	if _, err := BuildMicroOS(opts); err == nil || !strings.Contains(err.Error(), "only signed") {
		t.Errorf("iPXE without the Secure Boot key: got %v", err)
	}
}

// With a stub and the command line, the micro-OS is also written as a
// signed unified kernel image: the stub with the signed kernel, the same
// initramfs and the command line as sections, listed in the manifest.
func TestBuildMicroOSUKI(t *testing.T) {
	k := fakeKernel(t, "6.1.0-99-test")
	img := make([]byte, 0x1000)
	copy(img, petest.Minimal(7))
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x20e:], 0x300)
	dir := t.TempDir()
	k.Image = filepath.Join(dir, "vmlinuz-pe")
	stub := filepath.Join(dir, "linuxx64.efi.stub")
	for p, b := range map[string][]byte{k.Image: img, stub: petest.Stub(5)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sbKey, sbCert, err := secureboot.NewKey("db", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	out := t.TempDir()
	cmdline := UKICmdline("https://eim.example:8443", strings.Repeat("ab", 32))
	opts := MicroOSOptions{Kernel: k, Modules: []string{"ext4"}, Agent: fakeAgent(t, false),
		CACertPEM: []byte("-----BEGIN CERTIFICATE-----\n"), Key: key, Dir: out,
		SecureBootKey: sbKey, SecureBootCert: sbCert, UKIStub: stub, UKICmdline: cmdline}
	res, err := BuildMicroOS(opts)
	if err != nil {
		t.Fatal(err)
	}
	uki, err := os.ReadFile(filepath.Join(out, bootartifact.UKIFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := secureboot.Verify(uki, sbCert); err != nil {
		t.Fatalf("the UKI's signature: %v", err)
	}
	im, err := secureboot.Parse(uki)
	if err != nil {
		t.Fatal(err)
	}
	kernel, _ := os.ReadFile(filepath.Join(out, bootartifact.KernelFile))
	initrd, _ := os.ReadFile(filepath.Join(out, bootartifact.InitrdFile))
	for name, want := range map[string][]byte{".cmdline": []byte(cmdline), ".linux": kernel, ".initrd": initrd, ".uname": []byte("6.1.0-99-test")} {
		if got, ok := im.Section(name); !ok || !bytes.Equal(got, want) {
			t.Errorf("UKI section %s: %d bytes (found %v), want the %d of the build", name, len(got), ok, len(want))
		}
	}
	if osrel, _ := im.Section(".osrel"); !strings.Contains(string(osrel), "ID=eim") {
		t.Errorf(".osrel %q", osrel)
	}
	f, ok := res.Manifest.Find(bootartifact.UKIFile)
	if !ok || f.Check(bytes.NewReader(uki)) != nil {
		t.Errorf("the manifest does not describe the UKI (%v)", ok)
	}
	opts.UKICmdline, opts.Dir = "", t.TempDir()
	if _, err := BuildMicroOS(opts); err == nil || !strings.Contains(err.Error(), "needs its command line") {
		t.Errorf("a UKI without its command line: got %v", err)
	}
	opts.UKICmdline, opts.SecureBootKey = cmdline, nil
	if _, err := BuildMicroOS(opts); err == nil || !strings.Contains(err.Error(), "only signed") {
		t.Errorf("a UKI without the Secure Boot key: got %v", err)
	}
}
