// Package ipmi drives a BMC over IPMI 2.0 (RMCP+, "lanplus") by running
// Debian's ipmitool as a subprocess, as OpenStack Ironic does: power state,
// power actions and the boot device override. No Go IPMI library completed
// a session against a real BMC here (bougou/go-ipmi against OpenIPMI's
// ipmi_sim), ipmitool does.
//
// The password reaches ipmitool through its environment (-E), never its
// command line, where ps would show it. Calls to one BMC address are
// serialised, because IPMI BMCs freeze under bursts of sessions. Failures are
// *Error values of a Kind (unreachable, bad credentials, unsupported) whose
// messages never include the password.
package ipmi

import (
	"fmt"
	"strings"
)

// PowerState is the chassis power state a BMC reports.
type PowerState int

const (
	Off PowerState = iota
	On
)

func (s PowerState) String() string {
	if s == On {
		return "on"
	}
	return "off"
}

// Action is a chassis power control.
type Action string

const (
	PowerOn    Action = "on"    // power up
	PowerOff   Action = "off"   // hard power down, without asking the OS
	PowerSoft  Action = "soft"  // ACPI shutdown: the OS must answer it
	PowerReset Action = "reset" // hard reset, power stays on
	PowerCycle Action = "cycle" // power down, then up after the BMC's interval
)

func (a Action) valid() bool {
	switch a {
	case PowerOn, PowerOff, PowerSoft, PowerReset, PowerCycle:
		return true
	}
	return false
}

// BootDevice is a boot override target.
type BootDevice string

const (
	BootPXE   BootDevice = "pxe"
	BootDisk  BootDevice = "disk"
	BootCDROM BootDevice = "cdrom"
	BootBIOS  BootDevice = "bios" // the firmware's setup
	// BootNone is read back when no override is set, and set to clear one.
	BootNone BootDevice = "none"
)

func (d BootDevice) settable() bool {
	switch d {
	case BootPXE, BootDisk, BootCDROM, BootBIOS, BootNone:
		return true
	}
	return false
}

// Boot is the boot override as the BMC reports it (boot parameter 5, "boot
// flags", of the IPMI specification).
type Boot struct {
	Device BootDevice
	// Once: the override applies to the next boot only (else to all).
	Once bool
	// UEFI: an EFI boot rather than a legacy (PC compatible) one.
	UEFI bool
	// Valid is the boot flags' valid bit. Some BMCs (ipmi_sim among them)
	// never set it, although they act on the override.
	Valid bool
}

func (b Boot) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s", b.Device)
	if b.Once {
		s.WriteString(" once")
	} else {
		s.WriteString(" persistent")
	}
	if b.UEFI {
		s.WriteString(" uefi")
	}
	return s.String()
}
