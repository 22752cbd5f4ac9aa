package attest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/eimhq/eim/secureboot"
)

// KernelImagePCR is the PCR systemd-stub extends with the sections of the
// unified kernel image (UKI) it runs, before it runs the kernel: a value
// computable from the image alone, unlike PCR 4's digest of the whole PE.
const KernelImagePCR = 11

// stubSections are the sections systemd-stub 252 (Debian bookworm's
// systemd-boot-efi, what eim microos build puts in the UKI) measures into
// PCR 11, in the order it measures them, whatever their order in the file:
// its unified sections, less .pcrsig (it holds signatures of the expected
// PCR 11 values, so it cannot be part of them). Sections it does not know,
// such as the .uname that later versions measure, are not measured.
var stubSections = []string{".linux", ".osrel", ".cmdline", ".initrd", ".splash", ".dtb", ".pcrpkey"}

// evIPL is EV_IPL, the event type systemd-stub logs its measurements as.
const evIPL = 0xd

// KernelImage is what systemd-stub measures into PCR 11 when it runs a
// UKI: the sections it measures, by name in its order, and the value PCR
// 11 holds after them (from zero: nothing else extends PCR 11 before the
// kernel runs).
type KernelImage struct {
	Sections []string
	PCR      []byte
}

// KernelImageOf computes what systemd-stub measures of the unified kernel
// image im: for each section it knows that the image has, with a
// VirtualSize not 0, in its order, the section's name with its
// terminating NUL, then the section's contents as loaded (VirtualSize
// bytes), each extended into PCR 11 as its SHA-256 digest. nil when the
// image has no .linux section (it is not a UKI).
func KernelImageOf(im *secureboot.Image) *KernelImage {
	if _, ok := im.SectionInMemory(".linux"); !ok {
		return nil
	}
	k := &KernelImage{PCR: make([]byte, 32)}
	extend := func(data []byte) {
		d := sha256.Sum256(data)
		h := sha256.New()
		h.Write(k.PCR)
		h.Write(d[:])
		k.PCR = h.Sum(nil)
	}
	for _, name := range stubSections {
		data, ok := im.SectionInMemory(name)
		if !ok {
			continue
		}
		k.Sections = append(k.Sections, name)
		extend(append([]byte(name), 0))
		extend(data)
	}
	return k
}

// CheckKernelImage checks PCR 11 of a boot that ran one of the served
// unified kernel images: the UKI PCR 4 measured last (the one the boot
// ended in; earlier ones, if any, handed over to it or failed) must have
// left PCR 11 where its sections put it. pcrs are the values the node
// reported (the replay has checked them against the log), the log's own
// replay where a value is missing. A boot that ran no UKI of served is not
// checked here (a kernel booted by iPXE measures nothing into PCR 11).
// ran names the UKI whose PCR 11 was compared ("" none).
func CheckKernelImage(l *Log, pcrs map[int][]byte, served []Artifact) (ran string, err error) {
	var uki *Artifact
	for _, e := range l.Events {
		if e.PCR != BootCodePCR || e.Type != EvEFIBootServicesApp {
			continue
		}
		for i := range served {
			if served[i].KernelImage != nil && bytes.Equal(served[i].Digest, e.Digests[AlgSHA256]) {
				uki = &served[i]
			}
		}
	}
	if uki == nil {
		return "", nil
	}
	got, measured := replayed(l, KernelImagePCR)
	if v, ok := pcrs[KernelImagePCR]; ok {
		got = v
	}
	want := uki.KernelImage
	if !measured {
		return uki.Name, &Mismatch{PCR: KernelImagePCR, Reason: fmt.Sprintf("the unified kernel image %s ran, but nothing was measured into PCR 11 (its stub measures %s there)",
			uki.Name, strings.Join(want.Sections, ", "))}
	}
	if !bytes.Equal(got, want.PCR) {
		return uki.Name, &Mismatch{PCR: KernelImagePCR, Reason: fmt.Sprintf("the TPM's value %x is not what the sections of the unified kernel image %s measure (%x: %s; the log measured %s)",
			got, uki.Name, want.PCR, strings.Join(want.Sections, ", "), orNone(measuredNames(l)))}
	}
	return uki.Name, nil
}

// replayed is the value the log's events extend PCR pcr to from zero, and
// whether it measures the PCR at all.
func replayed(l *Log, pcr int) ([]byte, bool) {
	v, measured := make([]byte, 32), false
	for _, e := range l.Events {
		if e.PCR != pcr || e.Type == EvNoAction {
			continue
		}
		measured = true
		h := sha256.New()
		h.Write(v)
		h.Write(e.Digests[AlgSHA256])
		v = h.Sum(nil)
	}
	return v, measured
}

// measuredNames lists what the log says was measured into PCR 11, for a
// mismatch's message: systemd-stub describes both events of a section
// (its name, its contents) by the section's name, in UTF-16 or ASCII
// (listed once); other events show as their digest's first bytes.
func measuredNames(l *Log) []string {
	var out []string
	for _, e := range l.Events {
		if e.PCR != KernelImagePCR || e.Type == EvNoAction {
			continue
		}
		name := eventText(e.Data)
		if e.Type == evIPL && strings.HasPrefix(name, ".") && len(name) <= 8 && name == printable([]byte(name)) {
			if len(out) == 0 || out[len(out)-1] != name {
				out = append(out, name)
			}
			continue
		}
		out = append(out, "sha256:"+hex.EncodeToString(e.Digests[AlgSHA256])[:12]+"…")
	}
	return out
}

// eventText reads an event's description: UTF-16LE when every other
// byte is zero, else bytes; without terminating NULs.
func eventText(d []byte) string {
	wide := len(d) >= 2 && len(d)%2 == 0
	for i := 1; wide && i < len(d); i += 2 {
		wide = d[i] == 0
	}
	if wide {
		n := make([]byte, 0, len(d)/2)
		for i := 0; i < len(d); i += 2 {
			n = append(n, d[i])
		}
		d = n
	}
	return strings.TrimRight(string(d), "\x00")
}
