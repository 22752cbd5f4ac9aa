// Package sysinit is what eim-agent does as a machine's first process (PID
// 1) in an initramfs: in the micro-OS EIM network-boots, and in the small
// test OS it can install. It mounts the kernel's file systems, finds the
// consoles, loads the kernel modules the initramfs carries (network and
// disk drivers), configures the network with DHCP, finds partitions by
// label, applies a minimal cloud-init-style first boot and reboots. It
// assumes nothing else on the machine: no shell, no mount(8), no udev.
//
// Only Config builds on every system (eim writes it); the rest is Linux's.
package sysinit

import (
	"encoding/json"
	"fmt"
	"os"
)

// ConfigPath is where an initramfs built by EIM keeps its Config.
const ConfigPath = "/etc/eim/init.json"

// Modes of an initramfs.
const (
	// ModeMicroOS onboards and provisions the machine (eim-agent discover).
	ModeMicroOS = "microos"
	// ModeNode is the installed test OS: the agent in node mode.
	ModeNode = "node"
)

// Config tells init what its initramfs is for. The builders write it.
type Config struct {
	Mode string `json:"mode"`
	// KernelRelease is the release of the kernel the modules are for; they
	// are under /lib/modules/<release>/.
	KernelRelease string `json:"kernelRelease"`
	// Modules are the kernel modules to load, in order (dependencies
	// first), as paths relative to /lib/modules/<release>/.
	Modules []string `json:"modules,omitempty"`
	// RootLabel (node mode) is the label of the installed system's file
	// system: it holds the configuration provisioning wrote and the
	// agent's state.
	RootLabel string `json:"rootLabel,omitempty"`
}

// Marshal encodes c as the file holds it.
func (c Config) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// LoadConfig reads the Config at path.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("init config: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("init config %s: %w", path, err)
	}
	switch c.Mode {
	case ModeMicroOS, ModeNode:
	default:
		return c, fmt.Errorf("init config %s: mode %q, want %q or %q", path, c.Mode, ModeMicroOS, ModeNode)
	}
	return c, nil
}

// SeedDir is where provisioning writes the cloud-init NoCloud seed
// (meta-data, user-data) in the installed system.
const SeedDir = "var/lib/cloud/seed/nocloud"
