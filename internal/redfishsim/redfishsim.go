// Package redfishsim is a Redfish BMC for tests: a service that follows the
// DMTF Redfish schema (service root, sessions, computer systems with their
// power, boot override and reset action, managers with virtual media,
// chassis) closely enough for real clients (it is checked against DMTF's
// redfishtool and OpenStack's sushy), in front of a pluggable Machine: an
// in-memory state machine for fleet simulation, or a QEMU VM driven through
// QMP. Each BMC can be told to misbehave the way real ones do (Faults): a
// dropped power-on, 409 when already in the requested state, a one-time boot
// read back as continuous or ignored, no boot mode, a session limit.
//
// It is a test fixture: EIM's out-of-band module is its client, and no EIM
// binary but the simulator's own command links it.
package redfishsim

import "context"

// PowerState is a ComputerSystem's PowerState.
type PowerState string

// The power states (Resource.PowerState).
const (
	PowerOn     PowerState = "On"
	PowerOff    PowerState = "Off"
	PoweringOn  PowerState = "PoweringOn"
	PoweringOff PowerState = "PoweringOff"
	Paused      PowerState = "Paused"
)

// ResetType is a ComputerSystem.Reset action's parameter.
type ResetType string

// The reset types the BMC implements (Resource.ResetType).
const (
	ResetOn          ResetType = "On"
	ForceOn          ResetType = "ForceOn"
	ForceOff         ResetType = "ForceOff"
	GracefulShutdown ResetType = "GracefulShutdown"
	GracefulRestart  ResetType = "GracefulRestart"
	ForceRestart     ResetType = "ForceRestart"
	PowerCycle       ResetType = "PowerCycle"
	PushPowerButton  ResetType = "PushPowerButton"
	Nmi              ResetType = "Nmi"
)

// ResetTypes are all the reset types the BMC implements, the default
// ResetType@Redfish.AllowableValues.
var ResetTypes = []ResetType{ResetOn, ForceOff, GracefulShutdown, GracefulRestart, ForceRestart, Nmi, ForceOn, PushPowerButton, PowerCycle}

// BootTargets is the default BootSourceOverrideTarget@Redfish.AllowableValues.
var BootTargets = []string{"None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup", "UefiHttp", "UefiShell"}

// Boot is what a machine boots from when it is switched on or reset: the
// boot source override in effect (Target "None" when there is none).
type Boot struct {
	Target      string // BootSourceOverrideTarget: None, Pxe, Cd, Hdd, UefiHttp…
	Mode        string // BootSourceOverrideMode: UEFI or Legacy ("" when the BMC has none)
	HTTPBootURI string // HttpBootUri, for UefiHttp
	Image       string // the virtual CD's image when Target is Cd and one is inserted
}

// Machine is the computer a BMC controls. The BMC decides from the machine's
// state what a reset type means (On of a machine that is on does nothing,
// PushPowerButton is PowerOn or a graceful PowerOff) and calls one of these;
// each returns once the action has started, not when it has completed: the
// transition shows in PowerState.
type Machine interface {
	PowerState(ctx context.Context) (PowerState, error)
	// PowerOn switches an off machine on, booting from boot.
	PowerOn(ctx context.Context, boot Boot) error
	// PowerOff asks the OS to shut down (graceful: the ACPI power button,
	// which an OS may ignore) or cuts the power.
	PowerOff(ctx context.Context, graceful bool) error
	// Restart reboots a running machine: graceful shuts the OS down first
	// and then switches it on; otherwise a warm reset.
	Restart(ctx context.Context, graceful bool, boot Boot) error
	// PowerCycle cuts the power and switches it on again.
	PowerCycle(ctx context.Context, boot Boot) error
	// Nmi sends a non-maskable interrupt.
	Nmi(ctx context.Context) error
}
