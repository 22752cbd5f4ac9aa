package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"

	maintenancev1 "github.com/eimhq/eim/proto/eim/maintenance/v1"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// Updaters carry out OS updates on the installed OS: a package-based
// (mutable) OS takes its update policy's sources, packages and kernel
// command line; an image-based (immutable) OS takes a new image in its
// inactive slot and boots it.
type Updaters struct {
	Mutable   MutableUpdater
	Immutable ImmutableUpdater
}

// MutableUpdater applies a package-based update. It returns whether the
// node must reboot for the update to take effect.
type MutableUpdater interface {
	Apply(ctx context.Context, u MutableUpdate, log io.Writer) (reboot bool, err error)
}

// MutableUpdate is what a TARGET policy asks of a mutable OS.
type MutableUpdate struct {
	// Sources are DEB822 stanzas.
	Sources []string
	// Packages are package names; none upgrades what is installed.
	Packages []string
	// KernelCommand is appended to the kernel command line; "" leaves it.
	KernelCommand string
}

// ImmutableUpdater installs an OS image into the inactive slot and makes
// the next boot, once, start it (so a new image that does not come up
// falls back to the old one at the following boot). After the node booted
// the new image, Commit makes it the default.
type ImmutableUpdater interface {
	// Install writes the image to the inactive slot and arranges one boot
	// from it. It returns the slot written.
	Install(ctx context.Context, img Image, log io.Writer) (slot string, err error)
	// Booted returns the slot the node runs from.
	Booted() (string, error)
	// Commit makes slot the default boot.
	Commit(ctx context.Context, slot string) error
}

// Image is an OS image to install.
type Image struct {
	URL       string
	Sha256    string
	CACertPEM string // trusted besides the system's roots; "" none
}

// Commander runs an external program and returns its combined output.
type Commander func(ctx context.Context, name string, args ...string) ([]byte, error)

// Exec runs programs for real.
func Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return b, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return b, nil
}

// Apt updates a Debian-family OS with apt: the policy's sources go to one
// sources file of EIM's own, its packages are installed or upgraded, and
// its kernel command line goes to a GRUB drop-in.
type Apt struct {
	// Run runs apt-get and update-grub; nil: Exec.
	Run Commander
	// Root is prefixed to the paths written ("" on a real node).
	Root string
}

const (
	aptSourcesFile = "/etc/apt/sources.list.d/eim-update.sources"
	grubDropIn     = "/etc/default/grub.d/90-eim-update.cfg"
	rebootRequired = "/var/run/reboot-required"
)

// rePackage is a Debian package name (Debian Policy 5.6.1), with an
// optional architecture qualifier. A name starting with "-" would be an
// option to apt-get, so this check is also a safety one.
var rePackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?$`)

// ParsePackages splits a policy's package list (one name per line) and
// checks each name.
func ParsePackages(s string) ([]string, error) {
	var out []string
	for i, line := range strings.Split(s, "\n") {
		p := strings.TrimSpace(line)
		if p == "" {
			continue
		}
		if !rePackage.MatchString(p) {
			return nil, fmt.Errorf("update packages, line %d: %q is not a package name (versions are not allowed)", i+1, p)
		}
		out = append(out, p)
	}
	return out, nil
}

// reKernelOption is one kernel command line option as GRUB's shell
// variable can hold it: no quotes, no shell expansion.
var reKernelOption = regexp.MustCompile(`^[A-Za-z0-9_.,:=/@+-]+$`)

// Apply implements MutableUpdater.
func (a *Apt) Apply(ctx context.Context, u MutableUpdate, log io.Writer) (bool, error) {
	run := a.Run
	if run == nil {
		run = Exec
	}
	step := func(name string, args ...string) error {
		fmt.Fprintf(log, "$ %s %s\n", name, strings.Join(args, " "))
		out, err := run(ctx, name, args...)
		log.Write(out)
		return err
	}
	for _, p := range u.Packages {
		if !rePackage.MatchString(p) {
			return false, fmt.Errorf("package %q: not a package name", p)
		}
	}
	opts := strings.Fields(u.KernelCommand)
	for _, o := range opts {
		if !reKernelOption.MatchString(o) {
			return false, fmt.Errorf("kernel command option %q: only letters, digits and _.,:=/@+- are allowed", o)
		}
	}

	sources := a.Root + aptSourcesFile
	if len(u.Sources) > 0 {
		var b bytes.Buffer
		b.WriteString("# Written by eim-agent from the node's OS update policy; replaced at every update.\n")
		for i, s := range u.Sources {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(strings.TrimRight(s, "\n") + "\n")
		}
		if err := writeFileAtomic(sources, b.Bytes(), 0o644, 0o755); err != nil {
			return false, fmt.Errorf("apt sources: %w", err)
		}
		fmt.Fprintf(log, "wrote %d source(s) to %s\n", len(u.Sources), aptSourcesFile)
	} else if err := os.Remove(sources); err == nil {
		fmt.Fprintf(log, "removed %s: the policy has no sources\n", aptSourcesFile)
	}
	if err := step("apt-get", "update"); err != nil {
		return false, err
	}
	dpkgOpts := []string{"-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}
	if len(u.Packages) == 0 {
		if err := step("apt-get", append(append([]string{}, dpkgOpts...), "upgrade")...); err != nil {
			return false, err
		}
	} else {
		args := append(append(append([]string{}, dpkgOpts...), "install", "--"), u.Packages...)
		if err := step("apt-get", args...); err != nil {
			return false, err
		}
	}

	reboot := false
	dropIn := a.Root + grubDropIn
	old, _ := os.ReadFile(dropIn)
	var want []byte
	if len(opts) > 0 {
		want = fmt.Appendf(nil, "# Written by eim-agent from the node's OS update policy.\nGRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} %s\"\n", strings.Join(opts, " "))
	}
	if !bytes.Equal(old, want) {
		if want == nil {
			if err := os.Remove(dropIn); err != nil && !errors.Is(err, os.ErrNotExist) {
				return false, fmt.Errorf("kernel command: %w", err)
			}
		} else if err := writeFileAtomic(dropIn, want, 0o644, 0o755); err != nil {
			return false, fmt.Errorf("kernel command: %w", err)
		}
		if err := step("update-grub"); err != nil {
			return false, err
		}
		fmt.Fprintf(log, "kernel command line set to %q; effective after a reboot\n", strings.Join(opts, " "))
		reboot = true
	}
	if _, err := os.Stat(a.Root + rebootRequired); err == nil {
		fmt.Fprintf(log, "%s exists: the update needs a reboot\n", rebootRequired)
		reboot = true
	}
	return reboot, nil
}

// ABSlots is the A/B layout of an image-based OS: two root slots, and the
// boot loader entry of each. It is read from /etc/eim/ab.json, written by
// the OS image's build.
type ABSlots struct {
	// Slots maps a slot name ("a", "b") to its block device.
	Slots map[string]string `json:"slots"`
	// Entries maps a slot name to its GRUB menu entry ID.
	Entries map[string]string `json:"entries"`
	// GrubEnv is the GRUB environment block ("/boot/grub/grubenv" when
	// "").
	GrubEnv string `json:"grubEnv,omitempty"`
}

// LoadABSlots reads and checks an A/B layout file.
func LoadABSlots(path string) (ABSlots, error) {
	var l ABSlots
	b, err := os.ReadFile(path)
	if err != nil {
		return l, fmt.Errorf("A/B layout: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("A/B layout %s: %w", path, err)
	}
	if len(l.Slots) != 2 {
		return l, fmt.Errorf("A/B layout %s: want 2 slots, have %d", path, len(l.Slots))
	}
	for name := range l.Slots {
		if l.Entries[name] == "" {
			return l, fmt.Errorf("A/B layout %s: slot %q has no boot entry", path, name)
		}
	}
	return l, nil
}

// ABImage updates an image-based OS with two root slots: it streams the
// image into the slot it does not run from (checking its SHA-256), points
// GRUB's next boot, once, at that slot (grub-reboot's mechanism), and
// after a good boot makes it the default (grub-set-default's).
type ABImage struct {
	Layout ABSlots
	// Cmdline is the kernel command line, read for "eim.slot=NAME" ("" reads
	// /proc/cmdline).
	Cmdline string
	// Run runs grub-editenv and partprobe; nil: Exec.
	Run Commander
}

// Booted implements ImmutableUpdater: the slot named by eim.slot= on the
// kernel command line.
func (u *ABImage) Booted() (string, error) {
	line := u.Cmdline
	if line == "" {
		b, err := os.ReadFile("/proc/cmdline")
		if err != nil {
			return "", fmt.Errorf("booted slot: %w", err)
		}
		line = string(b)
	}
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, "eim.slot="); ok {
			if _, known := u.Layout.Slots[v]; !known {
				return "", fmt.Errorf("booted slot %q is not in the A/B layout", v)
			}
			return v, nil
		}
	}
	return "", errors.New("booted slot: no eim.slot= on the kernel command line")
}

func (u *ABImage) run() Commander {
	if u.Run != nil {
		return u.Run
	}
	return Exec
}

func (u *ABImage) grubEnv() string {
	if u.Layout.GrubEnv != "" {
		return u.Layout.GrubEnv
	}
	return "/boot/grub/grubenv"
}

// Install implements ImmutableUpdater.
func (u *ABImage) Install(ctx context.Context, img Image, log io.Writer) (string, error) {
	booted, err := u.Booted()
	if err != nil {
		return "", err
	}
	var target string
	for name := range u.Layout.Slots {
		if name != booted {
			target = name
		}
	}
	dev := u.Layout.Slots[target]
	fmt.Fprintf(log, "running from slot %s; writing the image to slot %s (%s)\n", booted, target, dev)
	m := &Machine{Command: u.Run}
	err = m.Run(ctx, &provisioningv1.Action{Name: "update-image", Spec: &provisioningv1.Action_StreamImage{StreamImage: &provisioningv1.StreamImage{
		Url: img.URL, Sha256: img.Sha256, Device: dev, CaCertPem: img.CACertPEM,
	}}}, log)
	if err != nil {
		return "", err
	}
	out, err := u.run()(ctx, "grub-editenv", u.grubEnv(), "set", "next_entry="+u.Layout.Entries[target])
	log.Write(out)
	if err != nil {
		return "", fmt.Errorf("boot slot %s once: %w", target, err)
	}
	fmt.Fprintf(log, "the next boot starts slot %s once\n", target)
	return target, nil
}

// Commit implements ImmutableUpdater.
func (u *ABImage) Commit(ctx context.Context, slot string) error {
	entry, ok := u.Layout.Entries[slot]
	if !ok {
		return fmt.Errorf("commit slot %q: not in the A/B layout", slot)
	}
	if _, err := u.run()(ctx, "grub-editenv", u.grubEnv(), "set", "saved_entry="+entry); err != nil {
		return fmt.Errorf("commit slot %s: %w", slot, err)
	}
	return nil
}

// mutableUpdate turns a policy into a MutableUpdate.
func mutableUpdate(p *maintenancev1.UpdatePolicy) (MutableUpdate, error) {
	pkgs, err := ParsePackages(p.GetPackages())
	if err != nil {
		return MutableUpdate{}, err
	}
	return MutableUpdate{Sources: p.GetSources(), Packages: pkgs, KernelCommand: p.GetKernelCommand()}, nil
}
