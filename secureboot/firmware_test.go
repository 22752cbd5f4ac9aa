package secureboot_test

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/eimhq/eim/secureboot"
)

// The proof in real firmware: Debian's OVMF built for Secure Boot (SMM,
// secure flash), with the variables of OVMF_VARS_4M.snakeoil.fd (Secure
// Boot on; the "snakeoil" key in PK, KEK and db) and the snakeoil key as
// the deployment's db key. A VM boots iPXE from a FAT disk as
// \EFI\BOOT\BOOTX64.EFI (the path of a USB stick); the firmware runs it
// when this package signed it with the key, and refuses it unsigned or
// signed with a key db does not hold.
const (
	ovmfCode     = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfVars     = "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd"
	snakeoilKey  = "/usr/share/ovmf/PkKek-1-snakeoil.key"
	snakeoilCert = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
)

func TestFirmwareEnforcesSignature(t *testing.T) {
	if raceEnabled {
		t.Skip("runs in the test step without the race detector (three VM boots, about 40 s)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed")
	}
	need(t, "openssl", ipxeEFI, ovmfCode, ovmfVars, snakeoilKey, snakeoilCert)
	k, cert := snakeoil(t)
	ipxe := read(t, ipxeEFI)
	signed, err := secureboot.Sign(ipxe, cert, k)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, otherCert, err := secureboot.NewKey("not enrolled", time.Now(), 1)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := secureboot.Sign(ipxe, otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}

	// The firmware's boot manager tries the FAT disk ("UEFI Misc
	// Device", virtio) first; iPXE's banner follows when it runs it.
	const started = `BdsDxe: starting Boot0002 "UEFI Misc Device"`
	const refused = `BdsDxe: failed to load Boot0002 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x2,0x0): Access Denied`
	cases := []struct {
		name  string
		image []byte
		want  string
		boots bool
	}{
		{"signed", signed, "iPXE initialising devices", true},
		{"unsigned", ipxe, refused, false},
		{"signed-by-another-key", foreign, refused, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			log := bootFAT(t, c.image, c.want)
			if c.boots != bytes.Contains(log, []byte(started)) {
				t.Errorf("firmware started the disk's BOOTX64.EFI: %v, want %v", !c.boots, c.boots)
			}
			if !c.boots && bytes.Contains(log, []byte("iPXE")) {
				t.Errorf("iPXE ran although the firmware should have refused it")
			}
			t.Logf("%s: power-on to %q in %s", c.name, c.want, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// snakeoil is the key pair the snakeoil variables enroll in db. The key
// is PKCS#8 encrypted with the password "snakeoil" (README.Debian), which
// the standard library does not decrypt: openssl writes it plain.
func snakeoil(t *testing.T) (crypto.Signer, *x509.Certificate) {
	t.Helper()
	plain := filepath.Join(t.TempDir(), "snakeoil.key")
	if out, err := run("openssl", "pkey", "-in", snakeoilKey, "-passin", "pass:snakeoil", "-out", plain); err != nil {
		t.Fatalf("openssl pkey: %v\n%s", err, out)
	}
	blk, _ := pem.Decode(read(t, plain))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cblk, _ := pem.Decode(read(t, snakeoilCert))
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(crypto.Signer), cert
}

// A unified kernel image made by AddSections of Debian's systemd-stub and
// kernel and signed by Sign is run by Secure Boot firmware: the stub
// starts the kernel with the signed command line (its console on the
// serial port). The same image with one byte of its initramfs changed
// after signing is refused by the firmware before anything of it runs.
func TestFirmwareBootsUKI(t *testing.T) {
	if raceEnabled {
		t.Skip("runs in the test step without the race detector (two VM boots)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		if os.Getenv("EIM_REQUIRE_QEMU") != "" {
			t.Fatal("qemu-system-x86_64 not installed and EIM_REQUIRE_QEMU is set")
		}
		t.Skip("qemu-system-x86_64 not installed")
	}
	need(t, "openssl", efiStub, ovmfCode, ovmfVars, snakeoilKey, snakeoilCert)
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		need(t, "/boot/vmlinuz-*")
	}
	k, cert := snakeoil(t)
	const marker = "eim.uki=firmware-test"
	uki, err := secureboot.AddSections(read(t, efiStub),
		secureboot.Section{Name: ".osrel", Data: []byte("ID=eim\n")},
		secureboot.Section{Name: ".cmdline", Data: []byte("console=ttyS0 panic=-1 " + marker)},
		secureboot.Section{Name: ".initrd", Data: bytes.Repeat([]byte{0}, 4096)},
		secureboot.Section{Name: ".linux", Data: read(t, kernels[len(kernels)-1])})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := secureboot.Sign(uki, cert, k)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(signed)
	im, err := secureboot.Parse(tampered)
	if err != nil {
		t.Fatal(err)
	}
	initrd, _ := im.Section(".initrd")
	initrd[0] = 1
	const refused = `BdsDxe: failed to load Boot0002 "UEFI Misc Device" from PciRoot(0x0)/Pci(0x2,0x0): Access Denied`
	for _, c := range []struct {
		name  string
		image []byte
		want  string
	}{
		// The kernel prints its command line: the signed one.
		{"signed", signed, "Kernel command line: console=ttyS0 panic=-1 " + marker},
		{"initrd-changed-after-signing", tampered, refused},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			log := bootFAT(t, c.image, c.want)
			if c.want == refused && bytes.Contains(log, []byte("Linux version")) {
				t.Errorf("the kernel of a UKI changed after signing ran")
			}
			t.Logf("%s: power-on to %q in %s", c.name, c.want, time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// bootFAT powers on a Secure Boot VM whose only disk is a FAT file system
// with image as \EFI\BOOT\BOOTX64.EFI, waits (with a deadline) for want on
// its console, stops it and returns the console.
func bootFAT(t *testing.T, image []byte, want string) []byte {
	t.Helper()
	dir := t.TempDir()
	esp := filepath.Join(dir, "esp", "EFI", "BOOT")
	if err := os.MkdirAll(esp, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(esp, "BOOTX64.EFI"), image)
	vars := filepath.Join(dir, "vars.fd")
	write(t, vars, read(t, ovmfVars))
	logPath := filepath.Join(dir, "serial.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("qemu-system-x86_64",
		"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-m", "256", "-nographic", "-no-user-config", "-net", "none",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file="+vars,
		// QEMU's virtual FAT disk of a directory: no image tools needed.
		"-drive", "file=fat:"+filepath.Join(dir, "esp")+",format=raw,if=virtio,readonly=on")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte(want)) {
			return b
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("QEMU exited (%v) before the console showed %q:\n%s", err, want, tail(b))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console did not show %q within 3 minutes:\n%s", want, tail(b))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(b []byte) []byte {
	return b[max(0, len(b)-3000):]
}
