package attest_test

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/eimhq/eim/attest"
	"github.com/eimhq/eim/attest/attesttest"
	"github.com/eimhq/eim/secureboot"
	"github.com/eimhq/eim/secureboot/petest"
)

// debianStub is systemd-stub as Debian's systemd-boot-efi (252) ships it,
// what eim microos build makes the micro-OS's UKI of.
const debianStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

// A unified kernel image built in the test as eim microos build builds
// one (secureboot.AddSections of a stub: .osrel, .cmdline, .uname, .initrd,
// .linux, in that order) gives the PCR 11 that systemd-stub 252's
// measurements replay to: each section it knows, in its own order (.linux,
// .osrel, .cmdline, .initrd; not .uname, which it does not know), its name
// with the NUL, then its contents. A boot that ran that UKI verifies with
// PCR 11 compared; an expectation tampered with, a stub that measured
// other contents or another section, or nothing at all, is a mismatch
// naming PCR 11; a boot that ran no UKI has no PCR 11 compared.
func TestKernelImagePCR(t *testing.T) {
	stubs := map[string][]byte{"synthetic stub": petest.Stub(7)}
	if b, err := os.ReadFile(debianStub); err == nil {
		stubs["Debian's systemd-stub"] = b
	} else {
		t.Logf("%s not installed (Debian's systemd-boot-efi): the synthetic stub only", debianStub)
	}
	kernel, initrd := bytes.Repeat([]byte("kernel"), 3000), bytes.Repeat([]byte("initramfs"), 5000)
	osrel, cmdline, uname := []byte("ID=eim-microos\n"), []byte("eim.url=https://eim.example:8443 eim.ca=sha256:ab12 console=ttyS0"), []byte("6.1.0-28-amd64")
	for name, stub := range stubs {
		t.Run(name, func(t *testing.T) {
			uki, err := secureboot.AddSections(stub,
				secureboot.Section{Name: ".osrel", Data: osrel}, secureboot.Section{Name: ".cmdline", Data: cmdline},
				secureboot.Section{Name: ".uname", Data: uname}, secureboot.Section{Name: ".initrd", Data: initrd},
				secureboot.Section{Name: ".linux", Data: kernel})
			if err != nil {
				t.Fatal(err)
			}
			art, err := attest.ArtifactOf("eim-microos.efi", uki)
			if err != nil {
				t.Fatal(err)
			}
			if art.KernelImage == nil {
				t.Fatal("ArtifactOf of a UKI: no KernelImage")
			}
			if want := []string{".linux", ".osrel", ".cmdline", ".initrd"}; !slices.Equal(art.KernelImage.Sections, want) {
				t.Errorf("measured sections: got %v, want %v", art.KernelImage.Sections, want)
			}
			ipxe, err := attest.ArtifactOf("ipxe.efi", petest.Minimal(1))
			if err != nil {
				t.Fatal(err)
			}
			if ipxe.KernelImage != nil {
				t.Errorf("iPXE (no .linux) has a KernelImage: %+v", ipxe.KernelImage)
			}
			served := []attest.Artifact{ipxe, art}
			stubMeasured := []attesttest.Section{{Name: ".linux", Data: kernel}, {Name: ".osrel", Data: osrel}, {Name: ".cmdline", Data: cmdline}, {Name: ".initrd", Data: initrd}}
			b := attesttest.NewUKIBoot(stubMeasured, ipxe.Digest, art.Digest)
			rep := attest.Report{PCRs: b.PCRs, EventLog: b.EventLog, SecureBoot: true}
			checked, err := attest.Check(rep, served)
			if err != nil || checked.KernelImage != "eim-microos.efi" {
				t.Fatalf("got %+v, %v; want verified with PCR 11 of eim-microos.efi compared", checked, err)
			}
			if !bytes.Equal(b.PCRs[attest.KernelImagePCR], art.KernelImage.PCR) {
				t.Errorf("expected PCR 11 %x, the stub's measurements leave %x", art.KernelImage.PCR, b.PCRs[attest.KernelImagePCR])
			}

			// The expectation tampered with: PCR 11 named, both values shown.
			tampered := art
			tampered.KernelImage = &attest.KernelImage{Sections: art.KernelImage.Sections, PCR: bytes.Clone(art.KernelImage.PCR)}
			tampered.KernelImage.PCR[0] ^= 1
			wantMismatch(t, attest.Verify(rep, []attest.Artifact{ipxe, tampered}), 11,
				"PCR 11: the TPM's value", "is not what the sections of the unified kernel image eim-microos.efi measure", "the log measured .linux, .osrel, .cmdline, .initrd")

			// The TPM and the log agree (the replay holds) on another
			// initramfs than the served UKI's.
			other := slices.Clone(stubMeasured)
			other[3] = attesttest.Section{Name: ".initrd", Data: []byte("another initramfs")}
			b2 := attesttest.NewUKIBoot(other, ipxe.Digest, art.Digest)
			wantMismatch(t, attest.Verify(attest.Report{PCRs: b2.PCRs, EventLog: b2.EventLog, SecureBoot: true}, served), 11, "eim-microos.efi")
			// A stub that measures .uname too (a later systemd than the one
			// the image was built with).
			b3 := attesttest.NewUKIBoot(append(slices.Clone(stubMeasured), attesttest.Section{Name: ".uname", Data: uname}), ipxe.Digest, art.Digest)
			wantMismatch(t, attest.Verify(attest.Report{PCRs: b3.PCRs, EventLog: b3.EventLog, SecureBoot: true}, served), 11, "the log measured .linux, .osrel, .cmdline, .initrd, .uname")
			// The UKI ran and nothing was measured into PCR 11.
			b4 := attesttest.NewUKIBoot(nil, ipxe.Digest, art.Digest)
			wantMismatch(t, attest.Verify(attest.Report{PCRs: b4.PCRs, EventLog: b4.EventLog, SecureBoot: true}, served), 11, "nothing was measured into PCR 11")

			// A boot that ran iPXE and a kernel, no UKI: PCR 11 not compared.
			vmlinuz, err := attest.ArtifactOf("vmlinuz", petest.Minimal(2))
			if err != nil {
				t.Fatal(err)
			}
			b5 := attesttest.NewBoot(ipxe.Digest, vmlinuz.Digest)
			checked, err = attest.Check(attest.Report{PCRs: b5.PCRs, EventLog: b5.EventLog, SecureBoot: true}, append(served, vmlinuz))
			if err != nil || checked.KernelImage != "" {
				t.Errorf("a boot without a UKI: got %+v, %v; want verified, no PCR 11 compared", checked, err)
			}
		})
	}
}
