package attest_test

import (
	"bufio"
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/attest"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning/initramfs"
	"github.com/eimhq/eim/secureboot"
)

// The proof in real firmware and a real (emulated) TPM: Debian's OVMF
// built for Secure Boot with the snakeoil variables (Secure Boot on, the
// snakeoil key in db) and swtpm as the VM's TPM 2.0 run Debian's iPXE,
// signed by secureboot.Sign with the snakeoil key, from a FAT disk; iPXE
// loads Debian's kernel, signed the same way, over QEMU's user network
// (the firmware's LoadImage verifies and measures both into PCR 4; QEMU's
// -kernel would not measure it). The initramfs's /init
// (testdata/capture) reads the PCRs and the event log with the agent's
// code and prints them; the test verifies them against the two signed
// binaries' Authenticode digests, and against a kernel changed after
// signing (PCR 4 names the binary).
//
// With EIM_ATTEST_CAPTURE=1 it also rewrites testdata/ovmf-swtpm, which
// the tests without a VM read.
const (
	ovmfCode     = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfVars     = "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd"
	snakeoilKey  = "/usr/share/ovmf/PkKek-1-snakeoil.key"
	snakeoilCert = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
	ipxeEFI      = "/usr/lib/ipxe/ipxe.efi"
)

func TestFirmwareMeasuredBoot(t *testing.T) {
	if raceEnabled {
		t.Skip("runs in the test step without the race detector (one VM boot)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "swtpm", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			skipOrFail(t, tool+" not installed")
		}
	}
	for _, f := range []string{ovmfCode, ovmfVars, snakeoilKey, snakeoilCert, ipxeEFI} {
		if _, err := os.Stat(f); err != nil {
			skipOrFail(t, f+" missing")
		}
	}
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		skipOrFail(t, "no kernel in /boot (Debian's linux-image-amd64)")
	}
	sort.Strings(kernels)
	dir := t.TempDir()
	cert, key := snakeoil(t, dir)
	kernel, err := os.ReadFile(kernels[len(kernels)-1])
	if err != nil {
		t.Fatal(err)
	}
	signed, err := secureboot.Sign(kernel, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	served, err := attest.ArtifactOf("vmlinuz", signed)
	if err != nil {
		t.Fatal(err)
	}
	ipxe, err := secureboot.Sign(readFile(t, ipxeEFI), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	servedIPXE, err := attest.ArtifactOf("ipxe.efi", ipxe)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	rep := bootMeasured(t, dir, ipxe, signed)
	t.Logf("power-on to measurements read in %s", time.Since(start).Round(100*time.Millisecond))
	l, err := attest.Parse(rep.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	if on, found := attest.SecureBootOf(l); !on || !found {
		t.Errorf("the firmware measured SecureBoot on: %v (found: %v), want on", on, found)
	}
	rep.SecureBoot = true
	if os.Getenv("EIM_ATTEST_CAPTURE") != "" {
		saveCapture(t, rep, []attest.Artifact{servedIPXE, served}, filepath.Base(kernels[len(kernels)-1]))
	}
	if err := attest.Verify(rep, []attest.Artifact{servedIPXE, served}); err != nil {
		t.Fatalf("Verify of a boot of the signed kernel: %v", err)
	}

	// The same boot checked against a kernel changed after signing (what
	// EIM would have served had the file been replaced): PCR 4 holds a
	// binary that is not it.
	changed := bytes.Clone(signed)
	changed[len(changed)/2] ^= 0xff
	other, err := attest.ArtifactOf("vmlinuz", changed)
	if err != nil {
		t.Fatal(err)
	}
	err = attest.Verify(rep, []attest.Artifact{servedIPXE, other})
	var m *attest.Mismatch
	if !errors.As(err, &m) || m.PCR != 4 || !strings.Contains(m.Reason, hex.EncodeToString(served.Digest)) {
		t.Errorf("Verify against a changed kernel: got %v, want a PCR 4 mismatch naming %x", err, served.Digest)
	}

}

// bootMeasured boots the signed kernel with the capture initramfs in a
// Secure Boot VM with a TPM, and returns what /init reported.
func bootMeasured(t *testing.T, dir string, ipxe, kernel []byte) attest.Report {
	t.Helper()
	initBin := filepath.Join(dir, "init")
	build := exec.Command("go", "build", "-o", initBin, "./testdata/capture")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the capture init: %v\n%s", err, out)
	}
	var a initramfs.Archive
	for _, d := range []string{"dev", "proc", "sys", "run", "tmp"} {
		must(t, a.AddDir(d, 0o755))
	}
	must(t, a.AddCharDevice("dev/console", 0o600, 5, 1))
	must(t, a.AddFile("init", readFile(t, initBin), 0o755))
	var initrd bytes.Buffer
	must(t, a.WriteGzip(&initrd))
	tftp := filepath.Join(dir, "tftp")
	esp := filepath.Join(dir, "esp", "EFI", "BOOT")
	must(t, os.MkdirAll(tftp, 0o755))
	must(t, os.MkdirAll(esp, 0o755))
	writeFile(t, filepath.Join(esp, "BOOTX64.EFI"), ipxe)
	writeFile(t, filepath.Join(tftp, "initrd"), initrd.Bytes())
	writeFile(t, filepath.Join(tftp, "vmlinuz"), kernel)
	// EIM's boot script does the same over HTTP (provisioning.BootHandler).
	writeFile(t, filepath.Join(tftp, "boot.ipxe"), []byte("#!ipxe\nkernel vmlinuz initrd=initrd console=ttyS0 panic=-1\ninitrd initrd\nboot\n"))
	writeFile(t, filepath.Join(dir, "vars.fd"), readFile(t, ovmfVars))

	// swtpm as the VM's TPM 2.0: a fresh state (manufactured on first
	// use), reached over a UNIX socket QEMU connects to.
	state := filepath.Join(dir, "tpm")
	must(t, os.Mkdir(state, 0o700))
	sock := filepath.Join(dir, "swtpm.sock")
	tpmLog, err := os.Create(filepath.Join(dir, "swtpm.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer tpmLog.Close()
	tpm := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+state,
		"--ctrl", "type=unixio,path="+sock, "--flags", "not-need-init")
	tpm.Stdout, tpm.Stderr = tpmLog, tpmLog
	must(t, tpm.Start())
	tpmDone := make(chan error, 1)
	go func() { tpmDone <- tpm.Wait() }()
	defer func() {
		_ = tpm.Process.Kill()
		<-tpmDone
	}()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not create its socket in 30 s: %s", readFile(t, filepath.Join(dir, "swtpm.log")))
		}
		time.Sleep(50 * time.Millisecond)
	}

	logPath := filepath.Join(dir, "serial.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{
		"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-m", "512", "-nographic", "-no-user-config", "-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + filepath.Join(dir, "vars.fd"),
		"-chardev", "socket,id=chrtpm,path=" + sock,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0",
		// The ESP: iPXE as \EFI\BOOT\BOOTX64.EFI (what a USB stick holds).
		"-drive", "file=fat:" + filepath.Join(dir, "esp") + ",format=raw,if=virtio,readonly=on",
		// QEMU's user network (inside QEMU: no traffic leaves it) with its
		// DHCP naming boot.ipxe on its TFTP server; iPXE's own virtio
		// driver (no option ROM: it would not be signed).
		"-netdev", "user,id=n0,tftp=" + tftp + ",bootfile=boot.ipxe",
		"-device", "virtio-net-pci,netdev=n0,romfile=",
	}
	// No KVM: the Secure Boot build needs SMM, which KVM in a container
	// often lacks; QEMU's emulation boots it in well under a minute.
	vm := exec.Command("qemu-system-x86_64", args...)
	vm.Stdout, vm.Stderr = logf, logf
	must(t, vm.Start())
	done := make(chan error, 1)
	go func() { done <- vm.Wait() }()
	defer func() {
		_ = vm.Process.Kill()
		<-done
	}()
	const end = "EIM-MEASURED-BOOT-END"
	deadline := time.Now().Add(4 * time.Minute)
	for {
		b, _ := os.ReadFile(logPath)
		if bytes.Contains(b, []byte(end)) {
			return parseConsole(t, string(b))
		}
		select {
		case err := <-done:
			done <- err
			b, _ = os.ReadFile(logPath)
			if bytes.Contains(b, []byte(end)) {
				return parseConsole(t, string(b))
			}
			t.Fatalf("QEMU exited (%v) before the measurements were printed:\n%s", err, tail(string(b)))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no measurements on the console within 4 minutes:\n%s", tail(string(b)))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// parseConsole decodes the measurements /init printed.
func parseConsole(t *testing.T, console string) attest.Report {
	t.Helper()
	var b64 strings.Builder
	in := false
	s := bufio.NewScanner(strings.NewReader(console))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case line == "EIM-MEASURED-BOOT-BEGIN":
			in = true
		case line == "EIM-MEASURED-BOOT-END":
			in = false
		case in:
			b64.WriteString(line)
		}
	}
	raw, err := base64.StdEncoding.DecodeString(b64.String())
	if err != nil {
		t.Fatalf("decode the console's measurements: %v", err)
	}
	var mb provisioningv1.MeasuredBoot
	if err := proto.Unmarshal(raw, &mb); err != nil {
		t.Fatalf("decode the console's measurements: %v", err)
	}
	if mb.GetTpm() != provisioningv1.MeasuredBoot_TPM_PRESENT || mb.GetError() != "" {
		t.Fatalf("the agent read tpm %v, error %q:\n%s", mb.GetTpm(), mb.GetError(), tail(console))
	}
	rep := attest.Report{PCRs: map[int][]byte{}, EventLog: mb.GetEventLog()}
	for _, p := range mb.GetPcrs() {
		rep.PCRs[int(p.GetIndex())] = p.GetSha256()
	}
	return rep
}

// saveCapture writes the boot's measurements to testdata/ovmf-swtpm.
func saveCapture(t *testing.T, rep attest.Report, served []attest.Artifact, kernel string) {
	dir := filepath.Join("testdata", "ovmf-swtpm")
	must(t, os.MkdirAll(dir, 0o755))
	writeFile(t, filepath.Join(dir, "binary_bios_measurements"), rep.EventLog)
	var pcrs strings.Builder
	idx := make([]int, 0, len(rep.PCRs))
	for i := range rep.PCRs {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		fmt.Fprintf(&pcrs, "%d %x\n", i, rep.PCRs[i])
	}
	writeFile(t, filepath.Join(dir, "pcr-sha256.txt"), []byte(pcrs.String()))
	var sv strings.Builder
	for _, a := range served {
		fmt.Fprintf(&sv, "%s %x\n", a.Name, a.Digest)
	}
	writeFile(t, filepath.Join(dir, "served.txt"), []byte(sv.String()))
	writeFile(t, filepath.Join(dir, "kernel.txt"), []byte(kernel+"\n"))
	t.Logf("wrote %s", dir)
}

// snakeoil is Debian's OVMF test key pair (enrolled in the snakeoil
// variables' db). The key is PKCS#8 encrypted with the password
// "snakeoil", which the standard library does not decrypt.
func snakeoil(t *testing.T, dir string) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	plain := filepath.Join(dir, "snakeoil.key")
	if out, err := exec.Command("openssl", "pkey", "-in", snakeoilKey, "-passin", "pass:snakeoil", "-out", plain).CombinedOutput(); err != nil {
		t.Fatalf("openssl pkey: %v\n%s", err, out)
	}
	blk, _ := pem.Decode(readFile(t, plain))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cblk, _ := pem.Decode(readFile(t, snakeoilCert))
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert, k.(crypto.Signer)
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("EIM_REQUIRE_SECUREBOOT") != "" {
		t.Fatal(why + " and EIM_REQUIRE_SECUREBOOT is set")
	}
	t.Skip(why)
}

func tail(s string) string { return s[max(0, len(s)-4000):] }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
