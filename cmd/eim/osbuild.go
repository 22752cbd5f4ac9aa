package main

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/pki"
	"github.com/eimhq/eim/provisioning/osbuild"
	"github.com/eimhq/eim/server"
)

// The commands that build what machines boot: "eim microos build" and
// "eim testos build" (see provisioning/osbuild and docs/provisioning.md).

// kernelFlags are the inputs both builds share.
type kernelFlags struct {
	kernel, modulesDir, agent string
	modules                   stringList
}

// stringList is a repeatable flag; "a,b" adds both.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// resolve finds the kernel, its modules and the agent binary.
func (k *kernelFlags) resolve() (*osbuild.Kernel, string, []string, error) {
	kern, err := osbuild.FindKernel(k.kernel, k.modulesDir)
	if err != nil {
		return nil, "", nil, err
	}
	agent := k.agent
	if agent == "" {
		agent, err = findAgent()
		if err != nil {
			return nil, "", nil, err
		}
	}
	var mods []string
	if len(k.modules) > 0 {
		mods = k.modules
	}
	return kern, agent, mods, nil
}

// findAgent looks for eim-agent beside this executable, then on PATH.
func findAgent() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "eim-agent")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("eim-agent"); err == nil {
		return p, nil
	}
	return "", usagef("no eim-agent binary beside eim or on PATH: build one (CGO_ENABLED=0 go build ./cmd/eim-agent) and pass --agent")
}

// defaultBootLoader is Debian's systemd-boot (systemd-boot-efi), the
// loader of the micro-OS CD image.
const defaultBootLoader = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

func (c *cli) microos(args []string) error {
	if len(args) == 0 || args[0] != "build" {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(c.stdout, "Usage:\n  eim microos build [--data-dir D] [--out DIR] [--kernel F] [--modules-dir D] [--module M …] [--agent F] [--ipxe-efi F] [--systemd-boot F] [--agent-url URL [--uki-stub F]]\n")
			return nil
		}
		return usagef("microos: unknown verb %q (build)", args[0])
	}
	fs := c.flagSet("eim microos build", "eim microos build [flags]",
		"Builds the micro-OS machines network-boot into: the kernel (vmlinuz), an initramfs whose /init\n"+
			"is the static eim-agent (initramfs.img), and manifest.json with its signature (manifest.json.sig),\n"+
			"written to the server's boot artifacts directory. The initramfs carries the server's CA and the\n"+
			"public half of its artifact-signing key (both from the data directory); the micro-OS checks what\n"+
			"it booted against the signed manifest. The same inputs give the same bytes.\n"+
			"The kernel, and iPXE's EFI binary (ipxe.efi, for UEFI HTTP boot and USB sticks), are signed for\n"+
			"Secure Boot with the deployment's db key (secureboot-db.key in the data directory; see eim\n"+
			"secureboot export and docs/security.md). So is systemd-boot (systemd-bootx64.efi), the loader of\n"+
			"the micro-OS CD image the server makes for a BMC's virtual media (eim-microos.iso).\n"+
			"With --agent-url (the server's), it also writes the micro-OS as a signed unified kernel image\n"+
			"(eim-microos.efi: systemd-stub with the kernel, the initramfs and a fixed command line inside),\n"+
			"which the boot script loads when the server requires Secure Boot, so that nothing unsigned is loaded.")
	var (
		dataDir, out, ipxe, loader, stub, agentURL string
		k                                          kernelFlags
	)
	fs.StringVar(&dataDir, "data-dir", defaultDataDir, "the server's data directory (ca.crt, artifacts.key)")
	fs.StringVar(&out, "out", "", "boot artifacts directory to write (default <data-dir>/boot, the server's default --boot-artifacts)")
	fs.StringVar(&k.kernel, "kernel", "", "kernel image (default: the newest /boot/vmlinuz-*, from Debian's linux-image-amd64)")
	fs.StringVar(&k.modulesDir, "modules-dir", "", "the kernel's modules (default /lib/modules/<release>)")
	fs.Var(&k.modules, "module", "kernel module to carry, with its dependencies (repeatable, or a,b,c; default: VM, common NIC and disk drivers, ext4, vfat)")
	fs.StringVar(&k.agent, "agent", "", "static eim-agent binary (default: beside eim, or on PATH)")
	fs.StringVar(&ipxe, "ipxe-efi", defaultIPXE, "iPXE EFI binary to sign and write as ipxe.efi (Debian's ipxe package; \"\" or a missing default: none)")
	fs.StringVar(&loader, "systemd-boot", defaultBootLoader, "systemd-boot EFI binary to sign and write as systemd-bootx64.efi, the loader of the micro-OS CD image (Debian's systemd-boot-efi; \"\" or a missing default: none, and no CD image)")
	fs.StringVar(&agentURL, "agent-url", "", "the server's --agent-url (what nodes call): the unified kernel image's signed command line carries it; \"\": no UKI")
	fs.StringVar(&stub, "uki-stub", defaultUKIStub, "systemd-stub to make the unified kernel image of (Debian's systemd-boot-efi)")
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	loaderNote := ""
	if loader == defaultBootLoader {
		if _, err := os.Stat(loader); err != nil {
			loader, loaderNote = "", "  (no "+defaultBootLoader+": no systemd-bootx64.efi written, no CD image for virtual media; Debian's systemd-boot-efi has it)\n"
		}
	}
	ukiNote := ""
	switch {
	case agentURL == "":
		stub, ukiNote = "", "  (no --agent-url: no unified kernel image written; a server with --require-secure-boot boots only that)\n"
	case server.CheckAgentURL(agentURL) != nil:
		return usagef("microos build: %v", server.CheckAgentURL(agentURL))
	case stub == "":
		return usagef("microos build: --agent-url makes a unified kernel image: --uki-stub must name systemd-stub")
	}
	ipxeNote := ""
	if ipxe == defaultIPXE {
		if _, err := os.Stat(ipxe); err != nil {
			ipxe, ipxeNote = "", "  (no "+defaultIPXE+": no ipxe.efi written; Debian's ipxe package has it)\n"
		}
	}
	if err := wantArgs("microos build", pos, 0, "no arguments"); err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(dataDir, "boot")
	}
	ca, err := os.ReadFile(filepath.Join(dataDir, pki.CACertFile))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no %s in %s: start the server once (it creates its CA), or pass --data-dir", pki.CACertFile, dataDir)
	}
	if err != nil {
		return err
	}
	key, err := pki.LoadArtifactKey(dataDir)
	if err != nil {
		return err
	}
	sb, err := pki.LoadSecureBootKey(dataDir)
	if err != nil {
		return err
	}
	kern, agent, mods, err := k.resolve()
	if err != nil {
		return err
	}
	cmdline := ""
	if stub != "" {
		blk, _ := pem.Decode(ca)
		if blk == nil {
			return fmt.Errorf("%s: no PEM certificate", pki.CACertFile)
		}
		sum := sha256.Sum256(blk.Bytes)
		cmdline = osbuild.UKICmdline(strings.TrimSuffix(agentURL, "/"), hex.EncodeToString(sum[:]))
	}
	res, err := osbuild.BuildMicroOS(osbuild.MicroOSOptions{
		Kernel: kern, Modules: mods, Agent: agent, CACertPEM: ca, Key: key, Dir: out,
		SecureBootKey: sb.Key, SecureBootCert: sb.Cert, IPXE: ipxe, BootLoader: loader,
		UKIStub: stub, UKICmdline: cmdline,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "micro-OS for kernel %s (%d modules) in %s, signed with key %s:\n", kern.Release, len(res.Modules), out, bootartifact.KeyID(key.Public().(ed25519.PublicKey)))
	for _, f := range res.Manifest.Files {
		fmt.Fprintf(c.stdout, "  %-14s %10d bytes  sha256 %s\n", f.Name, f.Size, f.SHA256)
	}
	if ipxe != "" {
		fmt.Fprintf(c.stdout, "  %-14s signed from %s\n", osbuild.IPXEFile, ipxe)
	}
	fmt.Fprintf(c.stdout, "  EFI executables signed for Secure Boot by %q (%s)\n", sb.Cert.Subject.CommonName, certFingerprint(sb.Cert))
	if loader != "" {
		fmt.Fprintf(c.stdout, "  %-14s signed from %s (the loader of the CD image %s)\n", bootartifact.BootLoaderFile, loader, bootartifact.CDFile)
	}
	if stub != "" {
		fmt.Fprintf(c.stdout, "  %-14s unified kernel image of %s, command line %q\n", bootartifact.UKIFile, stub, cmdline)
	}
	fmt.Fprint(c.stdout, ipxeNote, loaderNote, ukiNote)
	if len(res.Missing) > 0 {
		fmt.Fprintf(c.stdout, "  (default modules this kernel lacks: %s)\n", strings.Join(res.Missing, " "))
	}
	return nil
}

func (c *cli) testos(args []string) error {
	if len(args) == 0 || args[0] != "build" {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			fmt.Fprint(c.stdout, "Usage:\n  eim testos build --out FILE.img.gz [--register --image-url URL [--name N]] [--kernel F] [--module M …] [--agent F] [--secure-boot-data-dir D]\n")
			return nil
		}
		return usagef("testos: unknown verb %q (build)", args[0])
	}
	fs := c.flagSet("eim testos build", "eim testos build --out FILE [flags]",
		"Builds a small bootable disk image for testing the Day 0 flow on machines and VMs (BIOS and\n"+
			"UEFI): the kernel and an initramfs whose /init is eim-agent in node mode (it applies the first-\n"+
			"boot seed and runs with the agent configuration provisioning wrote), syslinux as boot loader on\n"+
			"an EFI System Partition (GPT), and an ext4 root file system for what provisioning writes. With\n"+
			"--register it creates an OS profile for it (imageUrl, sha256) through the API and prints its ID.")
	c.globalFlags(fs)
	var (
		out, imageURL, name, sbDir string
		register                   bool
		k                          kernelFlags
	)
	fs.StringVar(&out, "out", "", "image file to write; gzip'd when it ends in .gz (e.g. eim-data/boot/eim-testos.img.gz, served at /boot/artifacts/)")
	fs.BoolVar(&register, "register", false, "create an OS profile for the image")
	fs.StringVar(&imageURL, "image-url", "", "URL machines download the image from (the OS profile's imageUrl)")
	fs.StringVar(&name, "name", "eim-test-os", "name of the OS profile")
	fs.StringVar(&k.kernel, "kernel", "", "kernel image (default: the newest /boot/vmlinuz-*)")
	fs.StringVar(&k.modulesDir, "modules-dir", "", "the kernel's modules (default /lib/modules/<release>)")
	fs.Var(&k.modules, "module", "kernel module to carry (repeatable; default as eim microos build)")
	fs.StringVar(&k.agent, "agent", "", "static eim-agent binary (default: beside eim, or on PATH)")
	fs.StringVar(&sbDir, "secure-boot-data-dir", "", "sign the UEFI boot loader for Secure Boot with the deployment's db key of this data directory (secureboot-db.key; default: unsigned)")
	pos, err := c.parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	if err := wantArgs("testos build", pos, 0, "no arguments"); err != nil {
		return err
	}
	if out == "" {
		return usagef("testos build: --out is required")
	}
	if register {
		u, err := url.Parse(imageURL)
		if imageURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("testos build --register: --image-url must be the http(s) URL machines download %s from", filepath.Base(out))
		}
	}
	kern, agent, mods, err := k.resolve()
	if err != nil {
		return err
	}
	opts := osbuild.TestOSOptions{Kernel: kern, Modules: mods, Agent: agent, Out: out, Logger: slog.New(slog.DiscardHandler)}
	if sbDir != "" {
		// Only a key that exists: a mistyped directory must not get one.
		if _, err := os.Stat(filepath.Join(sbDir, pki.SecureBootKeyFile)); err != nil {
			return fmt.Errorf("testos build --secure-boot-data-dir: %w (the server's first start, or eim microos build, makes the key)", err)
		}
		sb, err := pki.LoadSecureBootKey(sbDir)
		if err != nil {
			return err
		}
		opts.SecureBootKey, opts.SecureBootCert = sb.Key, sb.Cert
	}
	img, err := osbuild.BuildTestOS(c.ctx, opts)
	if err != nil {
		return err
	}
	if !register {
		fmt.Fprintf(c.stdout, "test OS image %s: %d bytes (disk %d bytes), sha256 %s\n", img.Path, img.Size, img.RawSize, img.SHA256)
		return nil
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	prof := &eim.OS{
		Name: name, ImageURL: imageURL, Sha256: img.SHA256, ProfileName: name, Architecture: "x86_64",
		Description: fmt.Sprintf("EIM test OS: Linux %s with eim-agent in node mode", kern.Release),
		OsType:      "OS_TYPE_IMMUTABLE", OsProvider: "OS_PROVIDER_KIND_INFRA",
	}
	var created eim.OS
	if err := cl.Create(c.ctx, c.g.project, eim.KindOS, prof, &created); err != nil {
		return fmt.Errorf("register the OS profile: %w", err)
	}
	if c.g.output == "id" {
		fmt.Fprintln(c.stdout, created.ResourceID)
		return nil
	}
	fmt.Fprintf(c.stdout, "test OS image %s: %d bytes, sha256 %s\nOS profile %s (%s): imageUrl %s\n", img.Path, img.Size, img.SHA256, created.ResourceID, created.Name, created.ImageURL)
	return nil
}
