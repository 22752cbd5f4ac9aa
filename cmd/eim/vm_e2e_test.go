package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// The Day-0 flow on a real (virtual) machine: the eim server through Main,
// the micro-OS and the test OS image built by "eim microos build" and "eim
// testos build", and unmodified QEMU VMs that only know how to boot from
// the network (SeaBIOS, or OVMF for UEFI, and the iPXE ROM) with an empty
// disk. It is slow (a minute or two under software emulation) and needs
// Debian's qemu-system-x86, ipxe-qemu, ipxe, ovmf, swtpm, openssl,
// linux-image-amd64, syslinux, syslinux-common, syslinux-efi, dosfstools,
// mtools and e2fsprogs, so it
// runs only with EIM_VM_TEST=1 (.ci/run sets it in a step of its own, after
// installing them).
//
// The VM uses QEMU's user-mode network: inside it, 10.0.2.2 is this
// machine's loopback, where the server listens, and the VM is given only
// URLs on 10.0.2.2. (restrict=on would forbid everything else, but it cuts
// off the host too, and guestfwd is far too slow for the downloads.)
//
// The serial console of each VM goes to a file in EIM_VM_LOG_DIR (CI
// prints them when the test fails), or in a directory kept when it fails.

// vmHost is the host's address as the VM sees it.
const vmHost = "10.0.2.2"

func TestVMDay0(t *testing.T) {
	if os.Getenv("EIM_VM_TEST") == "" {
		t.Skip("boots QEMU VMs: set EIM_VM_TEST=1 (and install what the test's comment lists)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "syslinux", "mcopy", "mkfs.fat", "mke2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/run installs the VM test's Debian packages)", tool)
		}
	}
	total := time.Now()
	e := startVMEnv(t)
	s, logDir, bootURL, osID := e.s, e.logDir, e.bootURL, e.osID
	ctx := context.Background()

	t.Run("provisioned", func(t *testing.T) {
		provisionVM(t, s, logDir, bootURL, osID, "provisioned", biosFirmware, 1)
	})
	t.Run("provisioned-uefi", func(t *testing.T) {
		provisionVM(t, s, logDir, bootURL, osID, "provisioned-uefi", uefiFirmware(t), 3)
	})

	t.Run("not-registered", func(t *testing.T) {
		const uuid, serial = "4c4c4544-0045-4910-8000-000000000002", "EIMVM0002"
		vm := startVM(t, logDir, "not-registered", bootURL, uuid, serial, biosFirmware)
		// The micro-OS calls home and is refused; it keeps asking (with
		// back-off) and is refused every time.
		waitConsole(t, vm, "discover failed")
		waitConsoleCount(t, vm, "discover failed", 2)
		hosts, _, err := client.ListOf[eim.Host](ctx, s.admin, eim.DefaultProject, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hosts {
			if strings.EqualFold(h.UUID, uuid) || h.SerialNumber == serial {
				t.Errorf("host %s (uuid %s, serial %s, %s) exists for a machine nobody registered", h.ResourceID, h.UUID, h.SerialNumber, h.CurrentState)
			}
		}
		for _, h := range hosts {
			if h.Name != "provisioned" && h.Name != "provisioned-uefi" {
				t.Errorf("host %s (%s): only the registered hosts may exist", h.ResourceID, h.Name)
			}
		}
		vm.stop()
	})
	// From here the deployment requires Secure Boot: the server serves
	// only EFI executables signed with its db key, and its boot script
	// loads the micro-OS as its signed unified kernel image (kernel,
	// initramfs and command line in one PE), nothing unsigned.
	s.extra = append(s.extra, "--require-secure-boot")
	s.restart()
	if body := httpGet(t, bootURLLocal(t, s)); !strings.Contains(body, "kernel artifacts/eim-microos.efi ") {
		t.Fatalf("the boot script of a deployment that requires Secure Boot does not load the UKI:\n%s", body)
	}
	t.Run("secure-boot-required-uefi", func(t *testing.T) {
		// OVMF_VARS_4M.fd has no platform key: the firmware is in setup
		// mode, which enforces nothing. The instance is known when the
		// node calls home: refused at Discover.
		refusedAtDiscoverVM(t, s, logDir, bootURL, osID, "sb-required-uefi", uefiFirmware(t), 4, "setup mode", eim.SecureBootStateSetupMode)
	})
	t.Run("secure-boot-attested-uefi", func(t *testing.T) {
		attestedVM(t, s, logDir, bootURL, osID, "sb-attested-uefi", secureBootFirmware(t, filepath.Join(s.bootDir, "ipxe.efi"), true), 5)
	})
	t.Run("secure-boot-fde-no-tpm-uefi", func(t *testing.T) {
		// Secure Boot enforced, no TPM to seal the disk key to.
		refusedVM(t, s, logDir, bootURL, osID, "sb-no-tpm-uefi", secureBootFirmware(t, filepath.Join(s.bootDir, "ipxe.efi"), false), 6,
			"No TPM for full-disk encryption", "has no TPM 2.0")
	})
	t.Logf("VM test total %s", time.Since(total).Round(time.Second))
}

// vmEnv is what the VM tests share: a server through Main whose agent URL
// is the VM's view of it, and the micro-OS and test OS built by the CLI.
type vmEnv struct {
	s       *day0Server
	cli     cliRunner
	logDir  string
	bootURL string // the iPXE script's URL, as the VM sees it
	osID    string // the test OS's profile
}

// startVMEnv starts the server (with extra flags) and builds the agent,
// the micro-OS and the test OS as an operator would.
func startVMEnv(t *testing.T, extra ...string) *vmEnv {
	t.Helper()
	logDir := vmLogDir(t)
	// Ports chosen up front: the agent URL given to nodes (the VM's view of
	// the agent listener) names the port.
	apiPort, agentPort := freePort(t), freePort(t)
	extra = slices.Clone(extra)
	for i := range extra { // flags that name the API's port
		extra[i] = strings.ReplaceAll(extra[i], "{apiPort}", strconv.Itoa(apiPort))
	}
	base := t.TempDir()
	// An extra flag may name the API's port as {apiPort} (a URL the VMs
	// are given, e.g. --oob-http-boot-url).
	for i, a := range extra {
		extra[i] = strings.ReplaceAll(a, "{apiPort}", strconv.Itoa(apiPort))
	}
	s := &day0Server{t: t, dataDir: filepath.Join(base, "data"), bootDir: filepath.Join(base, "data", "boot"),
		extra: append([]string{"--agent-url", fmt.Sprintf("https://%s:%d", vmHost, agentPort), "--log-level", "info"}, extra...)}
	// The deployment's Secure Boot db key is Debian's OVMF test key, which
	// the snakeoil variables enroll: "eim microos build" signs iPXE and
	// the kernel with it, and the Secure Boot VM's firmware runs them.
	useSnakeoilKey(t, s.dataDir)
	s.start(fmt.Sprintf("127.0.0.1:%d", apiPort), fmt.Sprintf("127.0.0.1:%d", agentPort))
	tok := writeToken(t, strings.TrimSpace(string(mustRead(t, filepath.Join(s.dataDir, adminTokenFile)))))
	cli := cliRunner{t: t, url: s.api, tokenFile: tok}

	start := time.Now()
	agentBin := buildStaticAgent(t)
	t.Logf("built eim-agent in %s", time.Since(start).Round(time.Second))
	start = time.Now()
	out := cli.must("microos", "build", "--data-dir", s.dataDir, "--agent", agentBin, "--agent-url", fmt.Sprintf("https://%s:%d", vmHost, agentPort))
	t.Logf("eim microos build (%s):\n%s", time.Since(start).Round(100*time.Millisecond), out)
	start = time.Now()
	imageURL := fmt.Sprintf("http://%s:%d/boot/artifacts/eim-testos.img.gz", vmHost, apiPort)
	// Its boot loader signed with the deployment's db key: the Secure Boot
	// VM boots the installed disk too.
	osID := strings.TrimSpace(cli.must("testos", "build", "--agent", agentBin, "--out", filepath.Join(s.bootDir, "eim-testos.img.gz"),
		"--secure-boot-data-dir", s.dataDir, "--register", "--image-url", imageURL, "-o", "id"))
	t.Logf("eim testos build --register (%s): OS profile %s", time.Since(start).Round(100*time.Millisecond), osID)
	return &vmEnv{s: s, cli: cli, logDir: logDir, bootURL: fmt.Sprintf("http://%s:%d/boot/boot.ipxe", vmHost, apiPort), osID: osID}
}

// refusedVM: an instance asking for Secure Boot and full-disk encryption,
// on a VM that cannot have them, fails provisioning before anything is
// written: the micro-OS reports what it found, and the host shows
// hostStatus and the instance "Provisioning Failed: <hostStatus>: …"
// naming why (reason).
func refusedVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int, hostStatus, reason string) {
	ctx := context.Background()
	h, in, vm := startInstanceVM(t, s, logDir, bootURL, osID, name, fw, n, sbFDE)
	deadline := time.Now().Add(5 * time.Minute)
	var gi eim.Instance
	for !strings.HasPrefix(gi.ProvisioningStatus, "Provisioning Failed") {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: instance %s did not fail with %q (%q); serial console in %s", time.Since(vm.start).Round(time.Second), in.ResourceID, hostStatus, gi.ProvisioningStatus, vm.log)
		}
		if err := vm.exited(); err != nil {
			t.Fatalf("the VM stopped: %v; serial console in %s", err, vm.log)
		}
		time.Sleep(250 * time.Millisecond)
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
	}
	want := "Provisioning Failed: " + hostStatus + ": "
	if !strings.HasPrefix(gi.ProvisioningStatus, want) || !strings.Contains(gi.ProvisioningStatus, reason) {
		t.Errorf("instance status %q, want %q… naming %q", gi.ProvisioningStatus, want, reason)
	}
	var gh eim.Host
	if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, &gh); err != nil {
		t.Fatal(err)
	}
	if gh.HostStatus != hostStatus {
		t.Errorf("host status %q, want %q", gh.HostStatus, hostStatus)
	}
	if cons := string(mustRead(t, vm.log)); strings.Contains(cons, "action=erase-disk") || strings.Contains(cons, "action=stream-image") {
		t.Errorf("the micro-OS ran actions although provisioning was refused; console in %s", vm.log)
	}
	t.Logf("%s: power-on to %q shown: %s", name, hostStatus, time.Since(vm.start).Round(100*time.Millisecond))
	vm.stop()
}

// refusedAtDiscoverVM: an instance asking for Secure Boot and full-disk
// encryption, known before its VM boots without Secure Boot enforced. The
// micro-OS reports its firmware's state at Discover and is refused there,
// as the original's onboarding does: the host shows "SecureBoot status
// mismatch", its onboarding status the reason, and the state read; the
// node gets no credentials, no workflow is made and nothing touches its
// disk.
func refusedAtDiscoverVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int, reason string, state eim.SecureBootState) {
	ctx := context.Background()
	h, in, vm := startInstanceVM(t, s, logDir, bootURL, osID, name, fw, n, sbFDE)
	deadline := time.Now().Add(5 * time.Minute)
	var gh eim.Host
	for gh.HostStatus != eim.SecureBootMismatch {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: host %s does not show %q (%q, onboarding %q); serial console in %s",
				time.Since(vm.start).Round(time.Second), h.ResourceID, eim.SecureBootMismatch, gh.HostStatus, gh.OnboardingStatus, vm.log)
		}
		if err := vm.exited(); err != nil {
			t.Fatalf("the VM stopped: %v; serial console in %s", err, vm.log)
		}
		time.Sleep(250 * time.Millisecond)
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, &gh); err != nil {
			t.Fatal(err)
		}
	}
	want := "SecureBoot status mismatch: instance " + in.ResourceID + " asks for " + string(sbFDE)
	if gh.HostStatusIndicator != eim.StatusError || !strings.HasPrefix(gh.OnboardingStatus, want) || !strings.Contains(gh.OnboardingStatus, reason) {
		t.Errorf("host status %s, onboarding status %q; want ERROR and %q… naming %q", gh.HostStatusIndicator, gh.OnboardingStatus, want, reason)
	}
	if gh.SecureBootState != state || gh.SecureBootStateTimestamp == 0 {
		t.Errorf("host secureBootState %q at %d, want %s with a time", gh.SecureBootState, gh.SecureBootStateTimestamp, state)
	}
	if gh.CurrentState == eim.HostStateOnboarded {
		t.Errorf("the refused node was onboarded")
	}
	// The node is told why, and asks again later.
	waitConsole(t, vm, "SecureBoot status mismatch")
	var gi eim.Instance
	if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(gi.ProvisioningStatus, "Provisioning") {
		t.Errorf("instance provisioning status %q: the node refused at Discover reached provisioning", gi.ProvisioningStatus)
	}
	if cons := string(mustRead(t, vm.log)); strings.Contains(cons, "action=erase-disk") || strings.Contains(cons, "action=stream-image") {
		t.Errorf("the micro-OS ran actions although it was refused; console in %s", vm.log)
	}
	t.Logf("%s: power-on to %q shown at Discover: %s", name, eim.SecureBootMismatch, time.Since(vm.start).Round(100*time.Millisecond))
	vm.stop()
}

// sbFDE is the security feature that asks for Secure Boot and full-disk
// encryption.
const sbFDE = eim.SecurityFeature("SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION")

// startInstanceVM registers a host for a VM with the n-th identity,
// creates its instance of the test OS with the security feature, and powers
// the VM on with an empty disk.
func startInstanceVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int, feature eim.SecurityFeature) (*eim.Host, eim.Instance, *vm) {
	t.Helper()
	ctx := context.Background()
	uuid, serial := fmt.Sprintf("4c4c4544-0045-4910-8000-%012d", n), fmt.Sprintf("EIMVM%04d", n)
	h, err := s.admin.RegisterHost(ctx, eim.DefaultProject, client.HostRegistration{Name: name, UUID: uuid, SerialNumber: serial, AutoOnboard: true})
	if err != nil {
		t.Fatal(err)
	}
	var in eim.Instance
	if err := s.admin.Create(ctx, eim.DefaultProject, eim.KindInstance, &eim.Instance{
		Name: name, Kind: eim.InstanceKindMetal, HostID: h.ResourceID, OSID: osID, SecurityFeature: feature,
	}, &in); err != nil {
		t.Fatal(err)
	}
	return h, in, startVM(t, logDir, name, bootURL, uuid, serial, fw)
}

// provisionVM registers a host for a VM with the n-th identity, powers the
// VM on with an empty disk and waits until the API shows the host
// onboarded and running and its instance RUNNING.
func provisionVM(t *testing.T, s *day0Server, logDir, bootURL, osID, name string, fw firmware, n int) {
	ctx := context.Background()
	h, in, vm := startInstanceVM(t, s, logDir, bootURL, osID, name, fw, n, "")
	var hostOK, instOK bool
	deadline := time.Now().Add(5 * time.Minute)
	for !(hostOK && instOK) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: host %s onboarded %v, instance %s running %v; serial console in %s",
				time.Since(vm.start).Round(time.Second), h.ResourceID, hostOK, in.ResourceID, instOK, vm.log)
		}
		if err := vm.exited(); err != nil {
			t.Fatalf("the VM stopped: %v; serial console in %s", err, vm.log)
		}
		var gh eim.Host
		var gi eim.Instance
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindHost, h.ResourceID, &gh); err != nil {
			t.Fatal(err)
		}
		if err := s.admin.Get(ctx, eim.DefaultProject, eim.KindInstance, in.ResourceID, &gi); err != nil {
			t.Fatal(err)
		}
		hostOK = gh.CurrentState == eim.HostStateOnboarded && gh.HostStatus == "Running"
		instOK = gi.CurrentState == eim.InstanceStateRunning
		if strings.HasPrefix(gi.ProvisioningStatus, "Provisioning Failed") {
			t.Fatalf("instance %s: %s; serial console in %s", in.ResourceID, gi.ProvisioningStatus, vm.log)
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(vm.start)
	// RUNNING comes from the installed OS's agent reporting in; the console
	// shows the way there: the micro-OS provisioned the disk, the machine
	// rebooted, the firmware booted the disk, and the agent in node mode
	// reported in.
	waitConsole(t, vm, "reported in")
	cons := string(mustRead(t, vm.log))
	order := append([]string{"micro-OS checked against the signed manifest", "action succeeded", "action=stream-image"},
		append(fw.diskBoot, "first boot", "reported in")...)
	at := 0
	for _, want := range order {
		i := strings.Index(cons[at:], want)
		if i < 0 {
			t.Fatalf("serial console lacks %q after offset %d (in order: %q); console in %s", want, at, order, vm.log)
		}
		at += i
	}
	// What set-boot-order did, as the provisioning log has it.
	log, err := s.admin.ProvisioningLog(ctx, eim.DefaultProject, in.ResourceID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var output strings.Builder
	for _, e := range log.Entries {
		if e.Name == "set-boot-order" {
			output.WriteString(e.Output)
		}
	}
	if !strings.Contains(output.String(), fw.bootOrder) {
		t.Errorf("set-boot-order printed %q, want %q", output.String(), fw.bootOrder)
	}
	t.Logf("%s: power-on to instance RUNNING (host onboarded, node agent reported in): %s", name, took.Round(100*time.Millisecond))
	t.Logf("%s: phases (from power-on, by the guest's clock): %s", name, phases(cons, vm.start))
	vm.stop()
}

// firmware is how a VM boots: QEMU's arguments, and what its console shows
// when it boots the provisioned disk.
type firmware struct {
	args     []string
	diskBoot []string
	// bootOrder is what set-boot-order prints.
	bootOrder string
}

// biosFirmware is QEMU's default SeaBIOS: the disk first, then the
// network (the empty disk is skipped, the provisioned one boots); the test
// OS boots through syslinux's GPT MBR.
var biosFirmware = firmware{
	args:      []string{"-boot", "order=cn"},
	diskBoot:  []string{"Booting from Hard Disk", "SYSLINUX"},
	bootOrder: "no EFI firmware (legacy BIOS)",
}

// uefiFirmware is OVMF with a writable copy of its variables: the disk has
// no boot entry until provisioning writes one (set-boot-order, through
// efivarfs), which the firmware then boots first; the test OS boots through
// syslinux for UEFI.
func uefiFirmware(t *testing.T) firmware {
	t.Helper()
	const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatalf("OVMF (.ci/run installs Debian's ovmf): %v", err)
	}
	mine := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
	if err := os.WriteFile(mine, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return firmware{
		args: []string{"-machine", "q35",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
			"-drive", "if=pflash,format=raw,unit=1,file=" + mine,
			"-boot", "order=cn"},
		// The firmware boots the entry provisioning wrote, by its label.
		diskBoot:  []string{`BdsDxe: starting Boot`, `"EIM eim-test-os"`},
		bootOrder: `added boot entry`,
	}
}

// vmLogDir is EIM_VM_LOG_DIR, or a directory removed when the test passes.
func vmLogDir(t *testing.T) string {
	if d := os.Getenv("EIM_VM_LOG_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d, err := os.MkdirTemp("", "eim-vm-logs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serial consoles kept in %s", d)
			return
		}
		os.RemoveAll(d)
	})
	return d
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildStaticAgent builds eim-agent as the micro-OS needs it: static,
// without symbols (a smaller initramfs to download).
func buildStaticAgent(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "eim-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "github.com/eimhq/eim/cmd/eim-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build eim-agent: %v\n%s", err, b)
	}
	return out
}

// vm is a running QEMU virtual machine.
type vm struct {
	cmd   *exec.Cmd
	log   string
	disk  string // the raw disk image
	start time.Time
	done  chan error
	err   error
}

// startVM powers on a VM with an empty disk, the SMBIOS identity and the
// network boot URL, its serial console going to logDir/name.log. It is
// stopped at cleanup.
func startVM(t *testing.T, logDir, name, bootURL, uuid, serial string, fw firmware) *vm {
	t.Helper()
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk.raw")
	// An empty disk: the firmware finds nothing to boot on it and boots
	// from the network, until provisioning wrote the OS.
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 256<<20); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(logDir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	args := []string{
		"-m", "512", "-nographic", "-no-user-config",
		"-smbios", "type=1,serial=" + serial + ",uuid=" + uuid,
		"-drive", "file=" + disk + ",format=raw,if=virtio",
		"-netdev", "user,id=n0,bootfile=" + bootURL,
		"-device", "virtio-net-pci,netdev=n0",
		// A hardware random number generator, as real machines have
		// (RDRAND, TPM): without one the kernel's takes minutes to seed.
		"-device", "virtio-rng-pci",
	}
	args = append(args, fw.args...)
	cmd := exec.Command("qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = logf, logf, nil
	v := &vm{cmd: cmd, log: logPath, disk: disk, done: make(chan error, 1)}
	v.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start qemu: %v", err)
	}
	go func() { v.done <- cmd.Wait() }()
	t.Cleanup(v.stop)
	t.Logf("VM %s: qemu-system-x86_64 %s (serial console: %s)", name, strings.Join(args, " "), logPath)
	return v
}

// exited returns the VM's exit, or nil while it runs.
func (v *vm) exited() error {
	select {
	case err := <-v.done:
		if err == nil {
			err = fmt.Errorf("exited")
		}
		v.err = err
		v.done <- err
	default:
	}
	return v.err
}

// stop powers the VM off (kills its QEMU process) and waits for it.
func (v *vm) stop() {
	if v.exited() != nil {
		return
	}
	_ = v.cmd.Process.Kill()
	v.err = <-v.done
	if v.err == nil {
		v.err = fmt.Errorf("stopped")
	}
	v.done <- v.err
}

// phases are the times since start at which the console shows the
// milestones of Day 0 (the guest's clock comes from the host's through the
// emulated RTC).
func phases(console string, start time.Time) string {
	marks := []struct{ name, msg string }{
		{"micro-OS init", `msg="EIM agent starting as init"`},
		{"network up", `msg="network up"`},
		{"onboarded", `msg=onboarded`},
		{"image streamed", `action=stream-image`},
		{"workflow done", `action=set-boot-order`},
		{"test OS init", `msg="EIM agent starting as init"`},
		{"reported in", `msg="reported in"`},
	}
	var out []string
	at := 0
	for _, m := range marks {
		i := strings.Index(console[at:], m.msg)
		if i < 0 {
			break
		}
		at += i + len(m.msg)
		k := strings.LastIndex(console[:at], "time=")
		if k < 0 {
			continue
		}
		ts, _, _ := strings.Cut(console[k+len("time="):], " ")
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		out = append(out, fmt.Sprintf("%s %.1fs", m.name, tm.Sub(start).Seconds()))
	}
	return strings.Join(out, ", ")
}

// waitConsole waits until the serial console shows s.
func waitConsole(t *testing.T, v *vm, s string) {
	t.Helper()
	waitConsoleCount(t, v, s, 1)
}

// waitConsoleCount waits until the serial console shows s n times.
func waitConsoleCount(t *testing.T, v *vm, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, _ := os.ReadFile(v.log)
		if bytes.Count(b, []byte(s)) >= n {
			return
		}
		if err := v.exited(); err != nil {
			t.Fatalf("the VM stopped before its console showed %q %d times: %v; console in %s", s, n, err, v.log)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console did not show %q %s times within 3 minutes; console in %s", s, strconv.Itoa(n), v.log)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// bootURLLocal is the boot script's URL as this machine reaches it.
func bootURLLocal(t *testing.T, s *day0Server) string {
	t.Helper()
	return s.api + "/boot/boot.ipxe"
}

// httpGet returns the body of a GET that must answer 200.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return string(b)
}
