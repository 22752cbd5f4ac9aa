package provisioning

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/eimhq/eim/bootartifact"
	"github.com/eimhq/eim/bootiso"
)

// The micro-OS as a CD, for a BMC's virtual media (oob's virtual-media
// boot, docs/oob.md): GET /boot/artifacts/eim-microos.iso is composed
// from the artifacts directory when asked (a file of that name there is
// served instead, as is). UEFI only: El Torito's UEFI entry is an EFI
// system partition holding
//
//	\EFI\BOOT\BOOTX64.EFI        systemd-boot (systemd-bootx64.efi, signed by eim microos build)
//	\loader\loader.conf           no menu, no editor
//	\loader\entries\eim.conf      the micro-OS with its command line
//	\vmlinuz, \initramfs.img      the micro-OS kernel and initramfs, the very files the network boot loads
//
// The kernel and initramfs are on the CD rather than fetched: a site
// without PXE has no boot server, and the machine needs nothing from the
// network until the micro-OS's agent calls home (over HTTPS pinned to the
// CA fingerprint on the command line, as after a network boot). Why not
// iPXE: Debian's (2019) cannot run a script from its own medium without
// being rebuilt. Why not syslinux, as the test OS's disk: its EFI build
// does not start from a CD (it stops at an invalid opcode under OVMF).
// systemd-boot reads the CD through the firmware and starts the kernel
// through the firmware's LoadImage, so that under Secure Boot the
// kernel's signature is checked as the loader's was.
const (
	// CDName is the artifact name of the micro-OS CD image.
	CDName = bootartifact.CDFile
	// BootLoaderFile is systemd-boot in the artifacts directory,
	// written by eim microos build.
	BootLoaderFile = bootartifact.BootLoaderFile
	// CDVolumeID is the CD's volume label.
	CDVolumeID = "EIM_MICROOS"
)

// cdCmdline is the kernel command line of the CD's micro-OS: the boot
// script's, but for the initrd argument (the entry's initrd line loads it).
func (b *boot) cdCmdline(token string) string {
	args := []string{"eim.url=" + b.opts.AgentURL, "eim.ca=sha256:" + b.opts.CAFingerprint}
	if token != "" {
		args = append(args, "eim.enroll="+token)
	}
	return strings.Join(append(args, "console=ttyS0", "console=tty0"), " ")
}

// loaderConf boots the default entry at once, with no editor (a command
// line changed at the console would not be the deployment's).
const loaderConf = "timeout 0\neditor no\n"

// loaderEntry is systemd-boot's entry of the micro-OS.
func loaderEntry(cmdline string) string {
	return "title EIM micro-OS\nlinux /" + bootartifact.KernelFile + "\ninitrd /" + bootartifact.InitrdFile + "\noptions " + cmdline + "\n"
}

// cd serves the micro-OS CD image, composed of the artifacts: ranges are
// read from the files as asked (a BMC reads a virtual CD in ranges while
// the machine boots), with no copy in memory or on disk.
func (b *boot) cd(w http.ResponseWriter, r *http.Request, root *os.Root) {
	token := r.URL.Query().Get("enroll")
	if token != "" && !enrollRe.MatchString(token) {
		http.Error(w, "enroll: not a valid enrollment token", http.StatusBadRequest)
		return
	}
	parts := []struct{ name, path string }{
		{BootLoaderFile, "EFI/BOOT/BOOTX64.EFI"},
		{bootartifact.KernelFile, bootartifact.KernelFile},
		{bootartifact.InitrdFile, bootartifact.InitrdFile},
	}
	var files []bootiso.File
	var mod time.Time
	for _, p := range parts {
		f, err := root.Open(p.name)
		var fi fs.FileInfo
		if err == nil {
			defer f.Close()
			fi, err = f.Stat()
		}
		if err == nil && !fi.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				b.logger().Warn("boot: open artifact for the CD image", "name", p.name, "err", err)
			}
			http.Error(w, fmt.Sprintf("boot artifact %q not found: the CD image %s is made of the micro-OS (%s, %s) and systemd-boot (%s) of the boot artifacts directory: build them with eim microos build (Debian's systemd-boot-efi)",
				p.name, CDName, bootartifact.KernelFile, bootartifact.InitrdFile, BootLoaderFile), http.StatusNotFound)
			return
		}
		if b.opts.RequireSecureBoot {
			if err := b.signed.check(f, fi, b.opts.SecureBootCert); err != nil {
				b.logger().Warn("boot: refused a CD image with an EFI executable not signed for Secure Boot", "name", p.name, "err", err)
				http.Error(w, fmt.Sprintf("boot artifact %q: this deployment requires Secure Boot and the file is not signed with its db key (%v): build the boot artifacts with eim microos build, which signs them", p.name, err), http.StatusForbidden)
				return
			}
		}
		files = append(files, bootiso.File{Path: p.path, Data: f, Size: fi.Size()})
		if fi.ModTime().After(mod) {
			mod = fi.ModTime()
		}
	}
	entry := loaderEntry(b.cdCmdline(token))
	files = append(files,
		bootiso.File{Path: "loader/loader.conf", Data: strings.NewReader(loaderConf), Size: int64(len(loaderConf))},
		bootiso.File{Path: "loader/entries/eim.conf", Data: strings.NewReader(entry), Size: int64(len(entry))})
	im, err := bootiso.Build(CDVolumeID, files)
	if err != nil {
		b.logger().Warn("boot: compose the CD image", "err", err)
		http.Error(w, "compose the CD image: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(&progressDeadline{ResponseWriter: w, rc: http.NewResponseController(w)}, r, CDName, mod, io.NewSectionReader(im, 0, im.Size()))
}
