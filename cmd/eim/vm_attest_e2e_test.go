package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/pki"
)

// Debian's OVMF built for Secure Boot, its variables with the snakeoil
// key enrolled (PK, KEK, db), and that key pair (docs/security.md).
const (
	ovmfSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfSnakeVars  = "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd"
	snakeoilKey    = "/usr/share/ovmf/PkKek-1-snakeoil.key"
	snakeoilCert   = "/usr/share/ovmf/PkKek-1-snakeoil.pem"
)

// useSnakeoilKey puts the snakeoil pair in the data directory as the
// deployment's Secure Boot db key, before the server's first start (an
// operator's own key, as docs/security.md says). The key is PKCS#8
// encrypted with the password "snakeoil": openssl writes it plain.
func useSnakeoilKey(t *testing.T, dataDir string) {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dataDir, pki.SecureBootKeyFile)
	if out, err := exec.Command("openssl", "pkey", "-in", snakeoilKey, "-passin", "pass:snakeoil", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("openssl pkey of %s (.ci/run installs Debian's ovmf and openssl): %v\n%s", snakeoilKey, err, out)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, pki.SecureBootCertFile), mustRead(t, snakeoilCert), 0o644); err != nil {
		t.Fatal(err)
	}
}

// secureBootFirmware is OVMF with Secure Boot enforced (SMM, secure
// flash, the snakeoil variables), a TPM 2.0 when withTPM (swtpm, a fresh state) and a
// USB stick (a FAT file system) holding ipxe — the signed iPXE "eim microos
// build" wrote — as \EFI\BOOT\BOOTX64.EFI. iPXE then boots
// from the network as the ROM does for the other VMs (DHCP's boot file is
// the boot script). The NIC has no option ROM: it would not be signed.
func secureBootFirmware(t *testing.T, ipxe string, withTPM bool) firmware {
	t.Helper()
	for _, f := range []string{ovmfSecureCode, ovmfSnakeVars, ipxe} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the Secure Boot VM needs %s: %v", f, err)
		}
	}
	if _, err := exec.LookPath("swtpm"); err != nil {
		t.Fatalf("swtpm is not installed (.ci/run installs Debian's swtpm)")
	}
	dir := t.TempDir()
	vars := filepath.Join(dir, "OVMF_VARS.fd")
	if err := os.WriteFile(vars, mustRead(t, ovmfSnakeVars), 0o644); err != nil {
		t.Fatal(err)
	}
	esp := filepath.Join(dir, "esp", "EFI", "BOOT")
	if err := os.MkdirAll(esp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(esp, "BOOTX64.EFI"), mustRead(t, ipxe), 0o644); err != nil {
		t.Fatal(err)
	}
	fw := firmware{args: []string{
		"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfSecureCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-drive", "id=esp,if=none,format=raw,readonly=on,file=fat:" + filepath.Join(dir, "esp"),
		// A removable USB stick: the micro-OS installs on the first
		// non-removable disk, the VM's empty one. No bootindex: with one,
		// OVMF would put the stick before the entry provisioning writes.
		"-device", "qemu-xhci,id=xhci", "-device", "usb-storage,bus=xhci.0,drive=esp,removable=on",
		"-global", "virtio-net-pci.romfile=",
	}}
	if withTPM {
		sock := startSwtpm(t, dir)
		fw.args = append(fw.args, "-chardev", "socket,id=chrtpm,path="+sock,
			"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0")
	}
	return fw
}

// startSwtpm runs swtpm as a TPM 2.0 with its state in dir until the test
// ends, and returns its control socket.
func startSwtpm(t *testing.T, dir string) string {
	t.Helper()
	state := filepath.Join(dir, "tpm")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "swtpm.sock")
	logf, err := os.Create(filepath.Join(dir, "swtpm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("swtpm", "socket", "--tpm2", "--tpmstate", "dir="+state, "--ctrl", "type=unixio,path="+sock, "--flags", "not-need-init")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		logf.Close()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm did not create its socket within 30 s: %s", mustRead(t, filepath.Join(dir, "swtpm.log")))
		}
	}
}

// attestedVM: an instance asking for Secure Boot and full-disk encryption
// on a VM whose firmware enforces Secure Boot and has a TPM. The firmware
// runs the signed iPXE, which loads the micro-OS's signed unified kernel
// image (the server requires Secure Boot); the micro-OS reports the TPM's
// PCRs and the firmware's event log, quoted by the TPM over the server's
// nonce (which only that TPM could unwrap: its EK and AK), and the
// instance shows attestation "Verified": the quote holds (its key then
// pinned to the host), the log replays to the PCRs and PCR 4 holds
// exactly the iPXE and UKI the server serves. The workflow
// encrypts the installed root (LUKS2, its key sealed to the TPM's PCR 7),
// the firmware boots the installed disk's signed loader, the test OS
// unlocks its root with the TPM and reports in: RUNNING, Verified kept,
// and the disk checked from outside (checkEncryptedDisk).
func attestedVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int) {
	ctx := context.Background()
	_, in, vm := startInstanceVM(t, s, logDir, bootURL, osID, name, fw, n, sbFDE)
	deadline := time.Now().Add(8 * time.Minute)
	var gi eim.Instance
	for {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: instance %s has no attestation status (provisioning: %q); serial console in %s",
				time.Since(vm.start).Round(time.Second), in.ResourceID, gi.ProvisioningStatus, vm.log)
		}
		if err := vm.exited(); err != nil {
			t.Fatalf("the VM stopped: %v; serial console in %s", err, vm.log)
		}
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
		if gi.TrustedAttestationStatus != "" {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if gi.TrustedAttestationStatus != "Verified" || gi.TrustedAttestationStatusIndicator != eim.StatusIdle {
		t.Errorf("attestation %q %s, want Verified IDLE; serial console in %s", gi.TrustedAttestationStatus, gi.TrustedAttestationStatusIndicator, vm.log)
	}
	// "Verified" exactly is the quote path (an unquoted boot would say
	// "Verified, not quoted: …"): the micro-OS's TPM quoted its PCRs over
	// the server's nonce, and its attestation key is now pinned to the
	// host, as the audit log records.
	page, err := s.admin.Audit(ctx, eim.DefaultProject, `kind = "attestationkey" AND resourceId = "`+in.HostID+`"`, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].Action != string(eim.OpCreated) {
		t.Errorf("audit records of the host's attestation key: got %+v, want the pin (CREATED): the boot was not quoted", page.Records)
	}
	// PCR 11 compared: systemd-stub measured the UKI's sections, and
	// they are what the server's eim-microos.efi holds (the workflow's
	// log says what the check compared).
	plog, err := s.admin.ProvisioningLog(ctx, eim.DefaultProject, in.ResourceID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	const pcr11 = "measured boot: Verified (PCR 4 holds only binaries EIM serves; PCR 11 is what the sections of the unified kernel image eim-microos.efi measure)"
	if !slices.ContainsFunc(plog.Entries, func(e eim.WorkflowLogEntry) bool { return e.Message == pcr11 }) {
		t.Errorf("the provisioning log does not say PCR 11 was compared (want %q): %+v", pcr11, plog.Entries)
	}
	// The host shows the Secure Boot state its node reported.
	var gh eim.Host
	if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, in.HostID, &gh); err != nil {
		t.Fatal(err)
	}
	if gh.SecureBootState != eim.SecureBootStateEnabled || gh.SecureBootStateTimestamp == 0 {
		t.Errorf("host secureBootState %q at %d, want ENABLED with a time", gh.SecureBootState, gh.SecureBootStateTimestamp)
	}
	t.Logf("%s: power-on to attestation %q (quoted by the TPM, its key pinned, PCR 11 compared): %s", name, gi.TrustedAttestationStatus, time.Since(vm.start).Round(100*time.Millisecond))
	if cons := string(mustRead(t, vm.log)); !strings.Contains(cons, "EIM: booting the micro-OS, a signed unified kernel image") {
		t.Errorf("iPXE did not boot the micro-OS's unified kernel image; serial console in %s", vm.log)
	}
	// Secure Boot enforced, as the instance asks: provisioning goes on,
	// and the firmware boots the installed disk (its boot loader signed
	// by "eim testos build --secure-boot-data-dir").
	for gi.CurrentState != eim.InstanceStateRunning {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: instance %s is %s (%q), not RUNNING; serial console in %s",
				time.Since(vm.start).Round(time.Second), in.ResourceID, gi.CurrentState, gi.ProvisioningStatus, vm.log)
		}
		if strings.HasPrefix(gi.ProvisioningStatus, "Provisioning Failed") {
			t.Fatalf("instance %s: %s; serial console in %s", in.ResourceID, gi.ProvisioningStatus, vm.log)
		}
		if err := vm.exited(); err != nil {
			t.Fatalf("the VM stopped: %v; serial console in %s", err, vm.log)
		}
		time.Sleep(250 * time.Millisecond)
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
	}
	if gi.TrustedAttestationStatus != "Verified" {
		t.Errorf("attestation %q once RUNNING, want Verified kept", gi.TrustedAttestationStatus)
	}
	t.Logf("%s: power-on to instance RUNNING: %s", name, time.Since(vm.start).Round(100*time.Millisecond))
	// Full-disk encryption: the installed OS unlocked its root with the
	// key its TPM unsealed, nobody typing anything.
	if cons := string(mustRead(t, vm.log)); !strings.Contains(cons, "unlocked the encrypted root with the TPM") {
		t.Errorf("the installed OS did not say it unlocked its encrypted root with the TPM; serial console in %s", vm.log)
	}
	vm.stop()
	checkEncryptedDisk(t, s, vm.disk, in.ResourceID)
}

// checkEncryptedDisk checks from outside, with cryptsetup, the disk of an
// instance of SECURE_BOOT_AND_FULL_DISK_ENCRYPTION after its run: the root
// partition is LUKS2 with two keyslots (the TPM's, the recovery key's) and
// the systemd-tpm2 token of the TPM's, and the recovery key the API gives
// an administrator opens it.
func checkEncryptedDisk(t *testing.T, s *day0Server, disk, instanceID string) {
	t.Helper()
	start := time.Now()
	if _, err := exec.LookPath("cryptsetup"); err != nil {
		t.Fatal("cryptsetup is not installed (.ci/run installs Debian's cryptsetup-bin)")
	}
	// The root partition (the test OS's second GPT entry) as a file of
	// its own: cryptsetup reads a LUKS2 header at the start.
	b := mustRead(t, disk)
	ent := b[2*512+128:]
	first, last := binary.LittleEndian.Uint64(ent[32:]), binary.LittleEndian.Uint64(ent[40:])
	if first == 0 || last < first || int((last+1)*512) > len(b) {
		t.Fatalf("disk %s: no second partition in its GPT (%d–%d)", disk, first, last)
	}
	part := filepath.Join(t.TempDir(), "root.img")
	if err := os.WriteFile(part, b[first*512:(last+1)*512], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("cryptsetup", "--disable-locks", "luksDump", part).CombinedOutput()
	if err != nil {
		t.Fatalf("cryptsetup luksDump of the installed root: %v\n%s", err, out)
	}
	dump := string(out)
	ctx := context.Background()
	// The key as an administrator reads it: eim instance recovery-key.
	cli := cliRunner{t: t, url: s.api, tokenFile: writeToken(t, strings.TrimSpace(string(mustRead(t, filepath.Join(s.dataDir, adminTokenFile)))))}
	var k client.RecoveryKey
	cli.json(&k, "instance", "recovery-key", instanceID)
	if k.RecoveryKey == "" || k.InstanceID != instanceID {
		t.Fatalf("eim instance recovery-key %s: got %+v", instanceID, k)
	}
	for _, re := range []string{`(?m)^Version:\s+2$`, `(?m)^Label:\s+eim-root$`, `(?m)^UUID:\s+` + regexp.QuoteMeta(k.VolumeUUID) + `$`,
		`(?m)^\s+0: luks2$`, `(?m)^\s+1: luks2$`, `(?m)^\s+0: systemd-tpm2$`, `(?m)^\s+cipher:\s+aes-xts-plain64$`} {
		if !regexp.MustCompile(re).MatchString(dump) {
			t.Errorf("cryptsetup luksDump of the installed root does not match %s:\n%s", re, dump)
		}
	}
	if regexp.MustCompile(`(?m)^\s+2: luks2$`).MatchString(dump) {
		t.Errorf("more than two keyslots:\n%s", dump)
	}
	open := func(key string) error {
		cmd := exec.Command("cryptsetup", "--disable-locks", "open", "--test-passphrase", "--key-file", "-", part)
		cmd.Stdin = strings.NewReader(key)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := open(k.RecoveryKey); err != nil {
		t.Errorf("cryptsetup open --test-passphrase with the escrowed recovery key: %v", err)
	}
	if err := open("not-" + k.RecoveryKey); err == nil {
		t.Error("cryptsetup opens the root with a wrong key")
	}
	// The read is in the audit log, by the administrator.
	page, err := s.admin.Audit(ctx, eim.DefaultProject, `kind = "recoverykey" AND action = "READ" AND resourceId = "`+instanceID+`"`, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 {
		t.Errorf("audit records of the recovery key's read: %d, want 1", len(page.Records))
	}
	t.Logf("the installed root is LUKS2 (volume %s) and opens with the escrowed recovery key (checked in %s)", k.VolumeUUID, time.Since(start).Round(100*time.Millisecond))
}
