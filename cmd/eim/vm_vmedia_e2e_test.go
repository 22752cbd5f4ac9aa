package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/redfishsim"
)

// mediaURLFlag gives the server the CD image's URL as the Redfish test
// BMC, on this machine, fetches it (startVMEnv fills in the API's port).
const mediaURLFlag = "--oob-virtual-media-url=http://127.0.0.1:{apiPort}/boot/artifacts/eim-microos.iso"

// bmcMediaRedfish: Day 0 from virtual media, for a site without PXE. The
// VM is UEFI (OVMF) with an empty disk and a user-mode network that
// offers no boot file: it cannot boot from the network. `eim host
// provision --boot virtual-media` has the Redfish test BMC insert EIM's
// micro-OS CD image (the server composes it: eim-microos.iso), which the
// BMC downloads and starts the VM with as its CD, booted once; the
// micro-OS calls home, the job ejects the image (from the running VM
// too) and clears the override, and the VM goes through Day 0 to
// RUNNING, rebooting into the installed disk, not the CD. The BMC's
// VirtualMedia resource is read at the end: nothing inserted.
func bmcMediaRedfish(t *testing.T, e *vmEnv, n int) {
	ctx := context.Background()
	name := "bmc-vmedia"
	if _, err := os.Stat(filepath.Join(e.s.bootDir, "systemd-bootx64.efi")); err != nil {
		t.Fatalf("eim microos build wrote no systemd-boot, of which the CD image is made (.ci/run installs Debian's systemd-boot-efi): %v", err)
	}
	// The host asks to be off until it is provisioned: no network-boot
	// job starts by itself when its BMC is given.
	uuid, serial, h, in := registerForBMC(t, e, name, n, func(h *eim.Host) {
		if err := e.s.admin.Patch(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, map[string]any{"desiredPowerState": "POWER_STATE_OFF"}, nil); err != nil {
			t.Fatal(err)
		}
	})
	console := filepath.Join(e.logDir, name+".log")
	logf, err := os.Create(console)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	dir := t.TempDir()
	const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	if err := os.WriteFile(filepath.Join(dir, "vars.fd"), mustRead(t, vars), 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 256<<20); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "qmp.sock")
	cmd := []string{"qemu-system-x86_64", "-machine", "q35", "-m", "512", "-nographic", "-no-user-config",
		"-smbios", "type=1,serial=" + serial + ",uuid=" + uuid,
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + filepath.Join(dir, "vars.fd"),
		// The disk after the CD: once the CD is ejected, the firmware
		// boots the installed disk (a bootindex of the CD alone would
		// leave the disk out of the firmware's boot order).
		"-drive", "file=" + disk + ",format=raw,if=none,id=disk0",
		"-device", "virtio-blk-pci,drive=disk0,bootindex=1",
		"-netdev", "user,id=n0", // no bootfile: no network boot
		"-device", "virtio-net-pci,netdev=n0",
		"-device", "virtio-rng-pci",
		"-qmp", "unix:" + sock + ",server=on,wait=off"}
	q, err := redfishsim.NewQEMU(redfishsim.QEMUConfig{QMP: sock, Command: cmd, Stdout: logf, Stderr: logf, CDDevice: "cd0dev",
		// A Cd boot: the downloaded image as a CD drive the firmware boots first.
		BootArgs: func(b redfishsim.Boot) []string {
			u, err := url.Parse(b.Image)
			if b.Target != "Cd" || err != nil || u.Scheme != "file" {
				return nil
			}
			return []string{"-drive", "if=none,id=cd0,media=cdrom,readonly=on,format=raw,file=" + u.Path,
				"-device", "ide-cd,drive=cd0,id=cd0dev,bootindex=0"}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	bmc, err := redfishsim.New(redfishsim.Config{Username: redfishUser, Password: redfishPassword,
		Systems: []redfishsim.SystemConfig{{Machine: q, UUID: uuid, SerialNumber: serial}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := redfishsim.Serve(bmc, "127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	vm := &redfishVM{bmc: bmc, q: q, srv: srv, console: console}
	vm.putBMC(t, e, h.ResourceID)

	start := time.Now()
	jobID := strings.TrimSpace(e.cli.must("host", "provision", h.ResourceID, "--boot", "virtual-media", "-o", "id"))
	waitDay0(t, e, h, in, console, func() error { return nil })
	day0 := time.Since(start)
	j := waitJob(t, e, h.ResourceID, jobID, 5*time.Minute)
	var kinds []string
	for _, s := range j.Steps {
		kinds = append(kinds, s.Kind)
		if !s.Done {
			t.Errorf("job %s: step %s not done: %+v", j.JobID, s.Kind, s)
		}
	}
	if got := strings.Join(kinds, ","); got != "INSERT_MEDIA,SET_BOOT,BOOT_POWER,CALL_HOME,EJECT_MEDIA,CLEAR_BOOT" {
		t.Fatalf("job %s: steps %s, want a virtual-media job's", j.JobID, got)
	}
	if !strings.HasSuffix(j.Steps[0].Image, "/boot/artifacts/eim-microos.iso") || j.Steps[1].Boot != "CD" || !j.Steps[1].Once || j.Steps[2].Action != "ON" {
		t.Errorf("job %s: image %q, boot %s once %v, power %s; want EIM's CD image, a one-time CD boot, a power-on", j.JobID, j.Steps[0].Image, j.Steps[1].Boot, j.Steps[1].Once, j.Steps[2].Action)
	}
	t.Logf("job %s: %s", j.JobID, j.Steps[3].Note)

	// The BMC's own view: the virtual CD holds nothing, the override is off.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CertPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("GET", srv.URL+"/redfish/v1/Managers/BMC/VirtualMedia/Cd", nil)
	req.SetBasicAuth(redfishUser, redfishPassword)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var media struct {
		Inserted bool
		Image    *string
	}
	err = json.NewDecoder(resp.Body).Decode(&media)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the BMC's VirtualMedia/Cd: %d, %v", resp.StatusCode, err)
	}
	if media.Inserted || (media.Image != nil && *media.Image != "") {
		t.Errorf("the BMC's virtual CD after the job: Inserted %v, Image %v; want ejected", media.Inserted, *media.Image)
	}
	if target, enabled, _, _ := bmc.BootOverride("1"); target != "None" && enabled != "Disabled" {
		t.Errorf("the BMC's override after the job: %s %s, want cleared", target, enabled)
	}
	boots := q.Boots()
	if len(boots) == 0 || boots[0].Boot.Target != "Cd" {
		t.Errorf("the VM's boots %+v: want the first from the CD", boots)
	}
	cons := string(mustRead(t, console))
	if strings.Contains(cons, "Start PXE") || strings.Contains(cons, "iPXE") {
		t.Errorf("the VM tried a network boot; console in %s", console)
	}
	// Provisioning rebooted the VM into the installed disk (the CD ejected
	// from the running VM); the micro-OS started once.
	if c := strings.Count(cons, "micro-OS checked against the signed manifest"); c != 1 {
		t.Errorf("the micro-OS started %d times, want once (the CD booted again after the eject?); console in %s", c, console)
	}
	t.Logf("%s: `eim host provision --boot virtual-media` to instance RUNNING: %s", name, day0.Round(100*time.Millisecond))
}
