package agent_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/eimhq/eim/agent"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// image is 3 MiB of non-repeating bytes.
func image() []byte {
	b := make([]byte, 3<<20)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func compress(t *testing.T, kind string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch kind {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "xz":
		w, err = xz.NewWriter(&buf)
	case "zstd":
		w, err = zstd.NewWriter(&buf)
	default:
		return b
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func streamAction(url, sum, dev, compression, ca string) *provisioningv1.Action {
	return &provisioningv1.Action{Name: "stream-image", Spec: &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{
		Url: url, Sha256: sum, Device: dev, Compression: compression, CaCertPem: ca}}}
}

func TestMachineStream(t *testing.T) {
	ca := newTestCA(t)
	img := image()
	files := map[string][]byte{}
	for _, k := range []string{"raw", "gzip", "xz", "zstd"} {
		files[k] = compress(t, k, img)
	}
	srv := ca.startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := strings.TrimSuffix(strings.TrimPrefix(filepath.Ext(r.URL.Path), "."), "st")
		switch kind {
		case "img":
			kind = "raw"
		case "gz":
			kind = "gzip"
		case "z": // .zst
			kind = "zstd"
		}
		b, ok := files[kind]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	m := &agent.Machine{}
	dir := t.TempDir()

	for _, tc := range []struct{ name, path, compression, kind string }{
		{"raw", "/os.img", "", "raw"},
		{"gzip by suffix", "/os.img.gz?x=1", "", "gzip"},
		{"xz by suffix", "/os.img.xz", "", "xz"},
		{"zstd by suffix", "/os.img.zst", "", "zstd"},
		{"gzip named", "/os.gz", "gzip", "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			os.WriteFile(dev, bytes.Repeat([]byte{0xff}, 5<<20), 0o644) // an older, longer image
			var out bytes.Buffer
			err := m.Run(t.Context(), streamAction(srv.URL+tc.path, strings.ToUpper(sum(files[tc.kind])), dev, tc.compression, ca.pem), &out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			got, _ := os.ReadFile(dev)
			if !bytes.Equal(got, img) {
				t.Errorf("device holds %d bytes, want the %d-byte image", len(got), len(img))
			}
			if !strings.Contains(out.String(), "verified") {
				t.Errorf("output = %q", out.String())
			}
		})
	}

	fail := func(name string, a *provisioningv1.Action, want string) {
		t.Run(name, func(t *testing.T) {
			err := m.Run(t.Context(), a, io.Discard)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want %q", err, want)
			}
		})
	}
	dev := filepath.Join(dir, "fail")
	fail("no device", streamAction(srv.URL+"/os.img", sum(files["raw"]), dev, "", ca.pem), "no such file")
	os.WriteFile(dev, nil, 0o644)
	fail("sha mismatch", streamAction(srv.URL+"/os.img", sum([]byte("other")), dev, "", ca.pem), "sha256 mismatch")
	fail("bad sha", streamAction(srv.URL+"/os.img", "xyz", dev, "", ca.pem), "not 64 hex digits")
	fail("not found", streamAction(srv.URL+"/nope.bin", sum(img), dev, "", ca.pem), "404")
	fail("untrusted server", streamAction(srv.URL+"/os.img", sum(files["raw"]), dev, "", ""), "certificate")
	fail("unknown compression", streamAction(srv.URL+"/os.img", sum(files["raw"]), dev, "lz4", ca.pem), "unknown compression")
	fail("corrupt gzip", streamAction(srv.URL+"/os.img", sum(files["raw"]), dev, "gzip", ca.pem), "gzip")
}

func TestMachineErase(t *testing.T) {
	for _, size := range []int{4 << 20, 1<<20 + 512, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "disk")
			os.WriteFile(dev, bytes.Repeat([]byte{0xee}, size), 0o644)
			a := &provisioningv1.Action{Name: "erase-disk", Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{Device: dev}}}
			var out bytes.Buffer
			if err := (&agent.Machine{}).Run(t.Context(), a, &out); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(dev)
			if len(got) != size {
				t.Fatalf("size %d, want %d", len(got), size)
			}
			for i, b := range got {
				zero := i < 1<<20 || i >= size-1<<20
				if zero != (b == 0) {
					t.Fatalf("byte %d = %#x (zeroed: %v)", i, b, zero)
				}
			}
		})
	}
}

// fakeSys builds a /sys with the given block devices: name → removable,
// size and partitions (name → size).
func fakeSys(t *testing.T, disks map[string][2]string, parts map[string]map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, v := range disks {
		d := filepath.Join(root, "sys", "block", name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "removable"), []byte(v[0]+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "size"), []byte(v[1]+"\n"), 0o644)
		for p, size := range parts[name] {
			pd := filepath.Join(root, "sys", "class", "block", name, p)
			os.MkdirAll(pd, 0o755)
			os.WriteFile(filepath.Join(pd, "size"), []byte(size+"\n"), 0o644)
		}
	}
	return root
}

func TestMachineWriteFile(t *testing.T) {
	root := fakeSys(t, map[string][2]string{
		"loop0":   {"0", "100"},
		"sr0":     {"1", "100"},
		"sda":     {"1", "100"}, // removable: a USB stick
		"nvme0n1": {"0", "1000"},
		"vdb":     {"0", "1000"},
	}, map[string]map[string]string{"nvme0n1": {"nvme0n1p1": "100", "nvme0n1p2": "800", "nvme0n1p3": "50", "queue": "x"}})
	var calls []string
	var written []byte
	var writtenMode os.FileMode
	m := &agent.Machine{SysRoot: root, Command: func(_ context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args[:len(args)-1], " "))
		if name == "umount" { // what is in the "mounted" directory now
			p := filepath.Join(args[0], "etc", "eim", "agent.json")
			written, _ = os.ReadFile(p)
			if st, err := os.Stat(p); err == nil {
				writtenMode = st.Mode().Perm()
			}
		}
		return nil, nil
	}}
	a := &provisioningv1.Action{Name: "write-file", Spec: &provisioningv1.Action_WriteFile{WriteFile: &provisioningv1.WriteFile{
		Path: "/etc/eim/agent.json", Content: []byte("{}\n"), Mode: 0o600}}}
	var out bytes.Buffer
	if err := m.Run(t.Context(), a, &out); err != nil {
		t.Fatal(err)
	}
	// "" = first non-removable disk (nvme0n1), partition 0 = the largest.
	if want := []string{"mount /dev/nvme0n1p2", "umount "}; !slices.Equal(calls, want) {
		t.Errorf("commands = %q, want %q", calls, want)
	}
	if string(written) != "{}\n" || writtenMode != 0o600 {
		t.Errorf("wrote %q mode %v, want {} 0600", written, writtenMode)
	}

	// Numbered partition of a disk whose name ends in a letter.
	calls = nil
	a.GetWriteFile().Device, a.GetWriteFile().Partition = "/dev/vdb", 1
	if err := m.Run(t.Context(), a, &out); err != nil {
		t.Fatal(err)
	}
	if want := "mount /dev/vdb1"; len(calls) == 0 || calls[0] != want {
		t.Errorf("commands = %q, want %q first", calls, want)
	}
	// A relative or unclean path is refused before anything is mounted.
	calls = nil
	a.GetWriteFile().Path = "/etc/../../x"
	if err := m.Run(t.Context(), a, &out); err == nil || len(calls) != 0 {
		t.Errorf("unclean path: err %v, commands %q", err, calls)
	}
}

func TestMachineNoDisk(t *testing.T) {
	root := fakeSys(t, map[string][2]string{"sr0": {"1", "100"}, "sdb": {"0", "0"}}, nil)
	a := &provisioningv1.Action{Name: "erase-disk", Spec: &provisioningv1.Action_EraseDisk{EraseDisk: &provisioningv1.EraseDisk{}}}
	err := (&agent.Machine{SysRoot: root}).Run(t.Context(), a, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no non-removable disk") {
		t.Errorf("err = %v", err)
	}
}

// gptDisk writes a disk image whose GPT has its EFI System Partition at
// entry esp (1-based; 0: none).
func gptDisk(t *testing.T, esp int) string {
	t.Helper()
	img := make([]byte, 64<<10)
	copy(img[512:], "EFI PART")
	binary.LittleEndian.PutUint64(img[512+72:], 2)   // entries at LBA 2
	binary.LittleEndian.PutUint32(img[512+80:], 128) // 128 entries
	binary.LittleEndian.PutUint32(img[512+84:], 128) // of 128 bytes
	linux := []byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}
	copy(img[1024:], linux)
	if esp > 0 {
		copy(img[1024+(esp-1)*128:], []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b})
	}
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMachineBootOrder(t *testing.T) {
	disk := gptDisk(t, 15) // as Ubuntu's cloud images: root 1, ESP 15
	a := &provisioningv1.Action{Name: "set-boot-order", Spec: &provisioningv1.Action_SetBootOrder{SetBootOrder: &provisioningv1.SetBootOrder{Device: disk, Label: "Ubuntu"}}}
	var calls []string
	cmd := func(_ context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, strings.TrimSpace(name+" "+strings.Join(args, " ")))
		if len(args) == 0 {
			return []byte("BootCurrent: 0001\nTimeout: 1 seconds\nBootOrder: 0004,0001,0000\n" +
				"Boot0000* UiApp\tFvVol(7cb8bdc9)\nBoot0001* UEFI PXEv4\tPciRoot(0x0)\n" +
				"Boot0004* Ubuntu\tHD(15,GPT,…)/File(\\EFI\\BOOT\\BOOTX64.EFI)\nBoot000A* Ubuntu\n"), nil
		}
		return nil, nil
	}
	// Legacy BIOS: nothing to do.
	root := t.TempDir()
	var out bytes.Buffer
	if err := (&agent.Machine{SysRoot: root, Command: cmd}).Run(t.Context(), a, &out); err != nil || len(calls) != 0 {
		t.Errorf("BIOS: err %v, commands %q", err, calls)
	}
	os.MkdirAll(filepath.Join(root, "sys", "firmware", "efi"), 0o755)
	// EFI without efibootmgr nor efivarfs: a clear error.
	noTool := func(string) (string, error) { return "", os.ErrNotExist }
	err := (&agent.Machine{SysRoot: root, Command: cmd, LookPath: noTool}).Run(t.Context(), a, &out)
	if err == nil || !strings.Contains(err.Error(), "neither efibootmgr nor efivarfs") {
		t.Errorf("err = %v", err)
	}
	found := func(n string) (string, error) { return "/usr/bin/" + n, nil }
	if err := (&agent.Machine{SysRoot: root, Command: cmd, LookPath: found}).Run(t.Context(), a, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"efibootmgr",
		"efibootmgr --bootnum 0004 --delete-bootnum",
		"efibootmgr --bootnum 000A --delete-bootnum",
		"efibootmgr --create --disk " + disk + " --part 15 --label Ubuntu --loader \\EFI\\BOOT\\BOOTX64.EFI",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("commands = %q, want %q", calls, want)
	}
	// A disk without an ESP cannot get an entry.
	a.GetSetBootOrder().Device = gptDisk(t, 0)
	err = (&agent.Machine{SysRoot: root, Command: cmd, LookPath: found}).Run(t.Context(), a, &out)
	if err == nil || !strings.Contains(err.Error(), "no EFI System Partition") {
		t.Errorf("no ESP: err = %v", err)
	}
	a.GetSetBootOrder().Device = filepath.Join(root, "zero")
	os.WriteFile(a.GetSetBootOrder().Device, make([]byte, 8192), 0o644)
	err = (&agent.Machine{SysRoot: root, Command: cmd, LookPath: found}).Run(t.Context(), a, &out)
	if err == nil || !strings.Contains(err.Error(), "no GPT") {
		t.Errorf("no GPT: err = %v", err)
	}
}

// Without efibootmgr (the micro-OS), the entry is written through efivarfs:
// the old entry of the same label goes, the new one is first in BootOrder.
func TestMachineBootOrderEFIVars(t *testing.T) {
	disk := gptDisk(t, 15)
	root := t.TempDir()
	vars := filepath.Join(root, "sys", "firmware", "efi", "efivars")
	os.MkdirAll(vars, 0o755)
	const g = "-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	option := func(label string) []byte {
		b := []byte{7, 0, 0, 0, 1, 0, 0, 0, 4, 0}
		for _, r := range label + "\x00" {
			b = append(b, byte(r), 0)
		}
		return append(b, 0x7f, 0xff, 4, 0)
	}
	os.WriteFile(filepath.Join(vars, "Boot0000"+g), option("UiApp"), 0o644)
	os.WriteFile(filepath.Join(vars, "Boot0001"+g), option("UEFI PXEv4"), 0o644)
	os.WriteFile(filepath.Join(vars, "Boot0004"+g), option("Ubuntu"), 0o644)
	os.WriteFile(filepath.Join(vars, "BootOrder"+g), []byte{7, 0, 0, 0, 4, 0, 1, 0, 0, 0}, 0o644)
	os.WriteFile(filepath.Join(vars, "Timeout"+g), []byte{7, 0, 0, 0, 1, 0}, 0o644)
	a := &provisioningv1.Action{Name: "set-boot-order", Spec: &provisioningv1.Action_SetBootOrder{SetBootOrder: &provisioningv1.SetBootOrder{Device: disk, Label: "Ubuntu"}}}
	noTool := func(string) (string, error) { return "", os.ErrNotExist }
	var out bytes.Buffer
	if err := (&agent.Machine{SysRoot: root, LookPath: noTool}).Run(t.Context(), a, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vars, "Boot0004"+g)); err == nil {
		t.Error("the old Ubuntu entry is still there")
	}
	order, _ := os.ReadFile(filepath.Join(vars, "BootOrder"+g))
	if want := []byte{7, 0, 0, 0, 2, 0, 1, 0, 0, 0}; !bytes.Equal(order, want) {
		t.Errorf("BootOrder % x, want % x", order, want)
	}
	b, err := os.ReadFile(filepath.Join(vars, "Boot0002"+g))
	if err != nil {
		t.Fatal(err)
	}
	// attributes, LOAD_OPTION_ACTIVE, then the label in UTF-16, then a hard
	// drive device path to partition 15 (GPT) and the loader's path.
	if binary.LittleEndian.Uint32(b) != 7 || binary.LittleEndian.Uint32(b[4:]) != 1 {
		t.Errorf("attributes % x", b[:8])
	}
	label := []byte{'U', 0, 'b', 0, 'u', 0, 'n', 0, 't', 0, 'u', 0, 0, 0}
	if !bytes.Equal(b[10:10+len(label)], label) {
		t.Errorf("label % x", b[10:10+len(label)])
	}
	hd := b[10+len(label):]
	if hd[0] != 4 || hd[1] != 1 || binary.LittleEndian.Uint16(hd[2:]) != 42 || binary.LittleEndian.Uint32(hd[4:]) != 15 || hd[40] != 2 || hd[41] != 2 {
		t.Errorf("hard drive device path % x", hd[:42])
	}
	loader := string(bytes.ReplaceAll(hd[46:], []byte{0}, nil))
	if !strings.HasPrefix(loader, `\EFI\BOOT\BOOTX64.EFI`) {
		t.Errorf("loader %q", loader)
	}
	if !strings.Contains(out.String(), "Boot0002") {
		t.Errorf("output %q", out.String())
	}
}
