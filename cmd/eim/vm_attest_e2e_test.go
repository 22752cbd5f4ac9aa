package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// flash, the snakeoil variables), a TPM 2.0 (swtpm, a fresh state) and a
// USB stick (a FAT file system) holding ipxe — the signed iPXE "eim microos
// build" wrote — as \EFI\BOOT\BOOTX64.EFI. iPXE then boots
// from the network as the ROM does for the other VMs (DHCP's boot file is
// the boot script). The NIC has no option ROM: it would not be signed.
func secureBootFirmware(t *testing.T, ipxe string) firmware {
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
	sock := startSwtpm(t, dir)
	return firmware{args: []string{
		"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + ovmfSecureCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-drive", "id=esp,if=none,format=raw,readonly=on,file=fat:" + filepath.Join(dir, "esp"),
		// A removable USB stick: the micro-OS installs on the first
		// non-removable disk, the VM's empty one. No bootindex: with one,
		// OVMF would put the stick before the entry provisioning writes.
		"-device", "qemu-xhci,id=xhci", "-device", "usb-storage,bus=xhci.0,drive=esp,removable=on",
		"-global", "virtio-net-pci.romfile=",
		"-chardev", "socket,id=chrtpm,path=" + sock,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0",
	}}
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
// runs the signed iPXE, which loads the signed micro-OS kernel; the
// micro-OS reports the TPM's PCRs and the firmware's event log, and the
// instance shows attestation "Verified": the log replays to the PCRs and
// PCR 4 holds exactly the iPXE and kernel the server serves. (The VM does
// not get to RUNNING: the test OS's boot loader is not signed, so the
// firmware refuses the installed disk.)
func attestedVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int) {
	ctx := context.Background()
	uuid, serial := fmt.Sprintf("4c4c4544-0045-4910-8000-%012d", n), fmt.Sprintf("EIMVM%04d", n)
	h, err := s.admin.RegisterHost(ctx, eim.DefaultProject, client.HostRegistration{Name: name, UUID: uuid, SerialNumber: serial, AutoOnboard: true})
	if err != nil {
		t.Fatal(err)
	}
	var in eim.Instance
	if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindInstance, &eim.Instance{
		Name: name, Kind: eim.InstanceKindMetal, HostID: h.ResourceID, OSID: osID,
		SecurityFeature: "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION",
	}, &in); err != nil {
		t.Fatal(err)
	}
	vm := startVM(t, logDir, name, bootURL, uuid, serial, fw)
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
	t.Logf("%s: power-on to attestation %q: %s", name, gi.TrustedAttestationStatus, time.Since(vm.start).Round(100*time.Millisecond))
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
	vm.stop()
}
