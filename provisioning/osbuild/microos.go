package osbuild

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"

	"github.com/eimhq/eim/agent/sysinit"
	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/provisioning/initramfs"
	"github.com/eimhq/eim/secureboot"
)

// MicroOSOptions configure BuildMicroOS.
type MicroOSOptions struct {
	Kernel *Kernel
	// Modules to carry (with their dependencies); nil: DefaultModules.
	Modules []string
	// Agent is the static eim-agent binary that becomes /init.
	Agent string
	// CACertPEM is the CA the agent listener's certificate chains to; the
	// micro-OS trusts it, and checks it is the one the boot script pins.
	CACertPEM []byte
	// Key signs the manifest; the micro-OS carries its public half.
	Key ed25519.PrivateKey
	// Dir is the boot artifacts directory the files are written to.
	Dir string
	// SecureBootKey and SecureBootCert, when set, sign the kernel (an
	// EFI-stub PE image, as Debian's is) for Secure Boot: the firmware,
	// or iPXE through the firmware's LoadImage, runs it only where the
	// certificate is enrolled in db. Signatures it had are replaced.
	SecureBootKey  crypto.Signer
	SecureBootCert *x509.Certificate
	// IPXE, when set, is an iPXE EFI binary (Debian's ipxe.efi) written
	// beside the micro-OS as ipxe.efi, signed with the Secure Boot key:
	// what UEFI HTTP boot and USB sticks start.
	IPXE string
	// BootLoader, when set, is systemd-boot (Debian's systemd-boot-efi
	// systemd-bootx64.efi), written beside the micro-OS as
	// bootartifact.BootLoaderFile, signed with the Secure Boot key: the
	// server makes the micro-OS CD image of it (bootartifact.CDFile,
	// provisioning/bootcd.go).
	BootLoader string
	// UKIStub, when set with the Secure Boot key, is systemd-stub
	// (Debian's systemd-boot-efi: linuxx64.efi.stub): the micro-OS is also
	// written as a unified kernel image (bootartifact.UKIFile), the stub
	// with the kernel, the initramfs and UKICmdline as sections, signed.
	UKIStub string
	// UKICmdline is the UKI's fixed command line (UKICmdline makes it).
	UKICmdline string
	Logger     *slog.Logger
}

// UKICmdline is the kernel command line a unified kernel image of the
// micro-OS carries, signed: what does not vary from one boot to the next
// (the server's agent URL and CA, the consoles). The per-boot enrollment
// token cannot be on it (docs/security.md).
func UKICmdline(agentURL, caFingerprint string) string {
	return "eim.url=" + agentURL + " eim.ca=sha256:" + caFingerprint + " console=ttyS0 console=tty0"
}

// IPXEFile is the name of the signed iPXE EFI binary in the boot
// artifacts directory (served at /boot/artifacts/ipxe.efi).
const IPXEFile = "ipxe.efi"

// MicroOS is what BuildMicroOS wrote.
type MicroOS struct {
	Manifest *bootartifact.Manifest
	// Modules are the module paths the initramfs carries, in load order;
	// Missing the default modules this kernel lacks.
	Modules, Missing []string
}

// BuildMicroOS writes the micro-OS into opts.Dir: vmlinuz (the kernel as
// it is), initramfs.img (gzip'd newc cpio: /init is the agent, then its
// configuration, the CA, the artifact-signing public key and the kernel
// modules) and the signed manifest of both (manifest.json and
// manifest.json.sig). Each file is replaced atomically, the manifest last.
func BuildMicroOS(opts MicroOSOptions) (*MicroOS, error) {
	if opts.Kernel == nil || opts.Agent == "" || len(opts.CACertPEM) == 0 || opts.Key == nil || opts.Dir == "" {
		return nil, errors.New("micro-OS: kernel, agent, CA, signing key and output directory are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := CheckStatic(opts.Agent); err != nil {
		return nil, err
	}
	pub, err := bootartifact.MarshalPublicKey(opts.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	mods, missing, err := modules(opts.Kernel, opts.Modules)
	if err != nil {
		return nil, err
	}
	a, paths, err := baseInitramfs(opts.Kernel, opts.Agent, mods, sysinit.Config{Mode: sysinit.ModeMicroOS},
		"EIM micro-OS")
	if err != nil {
		return nil, err
	}
	if err := a.AddFile("etc/eim/ca.crt", opts.CACertPEM, 0o644); err != nil {
		return nil, err
	}
	if err := a.AddFile("etc/eim/artifacts.pub", pub, 0o644); err != nil {
		return nil, err
	}
	var initrd bytes.Buffer
	if err := a.WriteGzip(&initrd); err != nil {
		return nil, fmt.Errorf("micro-OS initramfs: %w", err)
	}
	kernel, err := os.ReadFile(opts.Kernel.Image)
	if err != nil {
		return nil, fmt.Errorf("micro-OS kernel: %w", err)
	}
	var ipxe []byte
	if opts.SecureBootKey != nil {
		if kernel, err = secureboot.Sign(kernel, opts.SecureBootCert, opts.SecureBootKey); err != nil {
			return nil, fmt.Errorf("micro-OS kernel %s: sign for Secure Boot: %w (a kernel built with CONFIG_EFI_STUB is a PE image)", opts.Kernel.Image, err)
		}
		if opts.IPXE != "" {
			b, err := os.ReadFile(opts.IPXE)
			if err != nil {
				return nil, fmt.Errorf("iPXE: %w", err)
			}
			if ipxe, err = secureboot.Sign(b, opts.SecureBootCert, opts.SecureBootKey); err != nil {
				return nil, fmt.Errorf("iPXE %s: sign for Secure Boot: %w", opts.IPXE, err)
			}
		}
	} else if opts.IPXE != "" || opts.UKIStub != "" {
		return nil, errors.New("micro-OS: iPXE and the unified kernel image are written only signed: give the Secure Boot key")
	}
	var uki []byte
	if opts.UKIStub != "" {
		if uki, err = buildUKI(opts, kernel, initrd.Bytes()); err != nil {
			return nil, err
		}
	}
	var loader []byte
	if opts.BootLoader != "" {
		if loader, err = os.ReadFile(opts.BootLoader); err != nil {
			return nil, fmt.Errorf("boot loader: %w", err)
		}
		if opts.SecureBootKey != nil {
			if loader, err = secureboot.Sign(loader, opts.SecureBootCert, opts.SecureBootKey); err != nil {
				return nil, fmt.Errorf("boot loader %s: sign for Secure Boot: %w", opts.BootLoader, err)
			}
		}
	}
	m := &bootartifact.Manifest{Version: bootartifact.Version, KernelRelease: opts.Kernel.Release}
	for _, f := range []struct {
		name string
		data []byte
	}{{bootartifact.KernelFile, kernel}, {bootartifact.InitrdFile, initrd.Bytes()}, {bootartifact.UKIFile, uki}} {
		if f.data == nil {
			continue
		}
		d, err := bootartifact.Describe(f.name, bytes.NewReader(f.data))
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, d)
	}
	for _, f := range a.Files() {
		d, err := bootartifact.Describe(f.Name, bytes.NewReader(f.Data))
		if err != nil {
			return nil, err
		}
		m.InitrdFiles = append(m.InitrdFiles, d)
	}
	body, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("micro-OS: %w", err)
	}
	if ipxe != nil {
		if err := WriteFileAtomic(filepath.Join(opts.Dir, IPXEFile), ipxe, 0o644); err != nil {
			return nil, fmt.Errorf("micro-OS: %w", err)
		}
	}
	if loader != nil {
		if err := WriteFileAtomic(filepath.Join(opts.Dir, bootartifact.BootLoaderFile), loader, 0o644); err != nil {
			return nil, fmt.Errorf("micro-OS: %w", err)
		}
	}
	if uki != nil {
		if err := WriteFileAtomic(filepath.Join(opts.Dir, bootartifact.UKIFile), uki, 0o644); err != nil {
			return nil, fmt.Errorf("micro-OS: %w", err)
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{bootartifact.KernelFile, kernel},
		{bootartifact.InitrdFile, initrd.Bytes()},
		{bootartifact.SignatureName, bootartifact.Sign(opts.Key, body)},
		{bootartifact.FileName, body},
	} {
		if err := WriteFileAtomic(filepath.Join(opts.Dir, f.name), f.data, 0o644); err != nil {
			return nil, fmt.Errorf("micro-OS: %w", err)
		}
	}
	log.Info("built the micro-OS", "dir", opts.Dir, "kernel", opts.Kernel.Release, "initramfs_bytes", initrd.Len(), "modules", len(paths))
	return &MicroOS{Manifest: m, Modules: paths, Missing: missing}, nil
}

// buildUKI makes the signed unified kernel image of the micro-OS: the
// stub with .osrel, .cmdline, .uname, .initrd and .linux (the kernel as
// signed for Secure Boot, in case the stub has the firmware load it), the
// sections systemd-stub looks for (UAPI "Unified Kernel Image"), signed
// as a whole. Under Secure Boot the stub ignores any other command line.
func buildUKI(opts MicroOSOptions, kernel, initrd []byte) ([]byte, error) {
	if opts.UKICmdline == "" {
		return nil, errors.New("micro-OS: the unified kernel image needs its command line (the server's agent URL and CA)")
	}
	stub, err := os.ReadFile(opts.UKIStub)
	if err != nil {
		return nil, fmt.Errorf("unified kernel image: %w (Debian's systemd-boot-efi has the stub)", err)
	}
	osrel := fmt.Sprintf("NAME=\"EIM micro-OS\"\nID=eim\nPRETTY_NAME=\"EIM micro-OS (Linux %s)\"\n", opts.Kernel.Release)
	uki, err := secureboot.AddSections(stub,
		secureboot.Section{Name: ".osrel", Data: []byte(osrel)},
		secureboot.Section{Name: ".cmdline", Data: []byte(opts.UKICmdline)},
		secureboot.Section{Name: ".uname", Data: []byte(opts.Kernel.Release)},
		secureboot.Section{Name: ".initrd", Data: initrd},
		secureboot.Section{Name: ".linux", Data: kernel},
	)
	if err != nil {
		return nil, fmt.Errorf("unified kernel image of %s: %w", opts.UKIStub, err)
	}
	if uki, err = secureboot.Sign(uki, opts.SecureBootCert, opts.SecureBootKey); err != nil {
		return nil, fmt.Errorf("unified kernel image: sign for Secure Boot: %w", err)
	}
	return uki, nil
}

// modules resolves the module names (nil: the defaults, of which those
// the kernel lacks are skipped).
func modules(k *Kernel, names []string) ([]Module, []string, error) {
	if names == nil {
		return k.Modules(DefaultModules, false)
	}
	return k.Modules(names, true)
}

// baseInitramfs is what every initramfs eim builds holds: the agent as
// /init, the console device the kernel opens for it, the mount points,
// the kernel modules and the init configuration (cfg with the kernel
// release and the modules filled in).
func baseInitramfs(k *Kernel, agent string, mods []Module, cfg sysinit.Config, name string) (*initramfs.Archive, []string, error) {
	bin, err := os.ReadFile(agent)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	var a initramfs.Archive
	errs := []error{
		a.AddFile("init", bin, 0o755),
		a.AddCharDevice("dev/console", 0o600, 5, 1),
		a.AddCharDevice("dev/null", 0o666, 1, 3),
		a.AddDir("proc", 0o555),
		a.AddDir("sys", 0o555),
		a.AddDir("run", 0o755),
		a.AddDir("tmp", 0o1777),
		a.AddDir("sysroot", 0o755),
		a.AddDir("etc/ssl/certs", 0o755),
		a.AddFile("etc/os-release", []byte(fmt.Sprintf("NAME=%q\nID=eim\nPRETTY_NAME=%q\n", name, name+" (Linux "+k.Release+")")), 0o644),
		a.AddFile("etc/hostname", []byte("eim\n"), 0o644),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	var paths []string
	for _, m := range mods {
		if err := a.AddFile(path.Join("lib/modules", k.Release, m.Path), m.Data, 0o644); err != nil {
			return nil, nil, err
		}
		paths = append(paths, m.Path)
	}
	cfg.KernelRelease, cfg.Modules = k.Release, paths
	b, err := cfg.Marshal()
	if err != nil {
		return nil, nil, err
	}
	if err := a.AddFile(sysinit.ConfigPath, b, 0o644); err != nil {
		return nil, nil, err
	}
	return &a, paths, nil
}

// WriteFileAtomic replaces path with data (a temporary file in the same
// directory, synced, then renamed), so a server never serves half a file.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
