package oob

import (
	"context"
	"errors"
	"fmt"
)

// The protocol-neutral view of a BMC that the module's jobs, polls and
// capability discovery work with. Each protocol is a package below oob
// (oob/ipmi, oob/redfish, oob/amt) with its own native API; an adapter in
// this package (one file per protocol) makes it a Driver.

// PowerState is the power state a BMC reports.
type PowerState string

const (
	PowerOn          PowerState = "ON"
	PowerOff         PowerState = "OFF"
	PowerPoweringOn  PowerState = "POWERING_ON" // Redfish's transitional states
	PowerPoweringOff PowerState = "POWERING_OFF"
	PowerSleep       PowerState = "SLEEP"     // AMT's S3
	PowerHibernate   PowerState = "HIBERNATE" // AMT's S4
)

// Action is a power action.
type Action string

const (
	ActionOn          Action = "ON"
	ActionGracefulOff Action = "GRACEFUL_OFF" // ask the OS (ACPI) to shut down
	ActionForceOff    Action = "FORCE_OFF"
	ActionReset       Action = "RESET" // hard reset; power stays on
	ActionPowerCycle  Action = "POWER_CYCLE"
	ActionSleep       Action = "SLEEP"
	ActionHibernate   Action = "HIBERNATE"
)

// BootTarget is a boot override target.
type BootTarget string

const (
	BootNone BootTarget = "NONE" // no override
	BootPXE  BootTarget = "PXE"
	// BootHTTP is UEFI HTTP boot from Boot.URL.
	BootHTTP BootTarget = "HTTP"
	BootCD   BootTarget = "CD" // a virtual or real CD
	BootDisk BootTarget = "DISK"
	BootBIOS BootTarget = "BIOS" // the firmware's setup
)

// Boot is a boot override, as set or as read back.
type Boot struct {
	Target BootTarget
	// Once: for the next boot only; else every boot (Redfish "Continuous").
	Once bool
	UEFI bool
	URL  string // for BootHTTP
}

// Capabilities are what a BMC says it allows.
type Capabilities struct {
	Actions []Action
	// ResetTypes are the BMC's own names of the power actions it allows:
	// Redfish's ResetType@Redfish.AllowableValues, the AMT device's power
	// capabilities ("Power up", "Reset to PXE"…). Added for the API's
	// capabilities.resetTypes; empty when the BMC does not say.
	ResetTypes   []string
	BootTargets  []BootTarget
	VirtualMedia bool
	// Systems are the IDs of the machines a Redfish service manages, when it
	// manages several (a Target must then choose one).
	Systems []string
}

// Target is how to reach one machine's BMC.
type Target struct {
	Protocol string // eim.BMC's protocol: REDFISH, IPMI, AMT
	Address  string // host[:port], or a URL for Redfish
	SystemID string // Redfish: the ComputerSystem, when there are several
	Username string
	Password string
	CABundle []byte // PEM; with Insecure false and no bundle, the system's roots
	Insecure bool
}

// Driver opens sessions with the BMCs of one protocol.
type Driver interface {
	Open(ctx context.Context, t Target) (Conn, error)
}

// Conn is a session with one BMC. Close logs out. A Conn is used by one
// goroutine at a time.
type Conn interface {
	PowerState(ctx context.Context) (PowerState, error)
	Power(ctx context.Context, a Action) error
	SetBoot(ctx context.Context, b Boot) error
	Boot(ctx context.Context) (Boot, error)
	Capabilities(ctx context.Context) (Capabilities, error)
	// InsertMedia boots-to-be: it inserts the image at url as a virtual CD;
	// EjectMedia removes it. Drivers without virtual media answer
	// ErrUnsupported.
	InsertMedia(ctx context.Context, url string) error
	EjectMedia(ctx context.Context) error
	Close() error
}

// ErrorKind classifies a driver's failure, for the job runner to decide
// whether to retry and for the BMC's Reachable condition.
type ErrorKind int

const (
	// Failed: any other failure (the BMC answered with an error).
	Failed ErrorKind = iota
	// Unreachable: no answer within the time allowed (retry).
	Unreachable
	// BadCredentials: the BMC refused the user name or password (do not retry).
	BadCredentials
	// BadCertificate: the BMC's TLS certificate is not trusted (do not retry).
	BadCertificate
	// Unsupported: the BMC does not allow this action or target.
	Unsupported
	// AlreadyInState: the BMC refused an action because the machine is
	// already where it would take it (e.g. Redfish 409 on GracefulShutdown
	// of a machine that is off). A success once a read confirms it.
	AlreadyInState
	// Busy: the BMC has no session to give (its limit) or is busy; retry later.
	Busy
	// Ambiguous: the Target does not name one machine (a Redfish service with
	// several systems and no SystemID).
	Ambiguous
)

func (k ErrorKind) String() string {
	switch k {
	case Unreachable:
		return "unreachable"
	case BadCredentials:
		return "bad credentials"
	case BadCertificate:
		return "untrusted certificate"
	case Unsupported:
		return "unsupported"
	case AlreadyInState:
		return "already in that state"
	case Busy:
		return "busy"
	case Ambiguous:
		return "ambiguous system"
	}
	return "failed"
}

// Error is a driver's failure. Its message is safe to show a user and to
// log: it never includes a password or a session token.
type Error struct {
	Kind   ErrorKind
	Op     string // e.g. "power on", "read power state"
	Detail string // what the BMC or the transport said
	Err    error  // the cause, when there is one
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Op, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches a sentinel of the same kind: errors.Is(err, oob.ErrUnreachable).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Detail == "" && t.Err == nil && t.Kind == e.Kind
}

// Sentinels for errors.Is.
var (
	ErrUnreachable    = &Error{Kind: Unreachable}
	ErrBadCredentials = &Error{Kind: BadCredentials}
	ErrBadCertificate = &Error{Kind: BadCertificate}
	ErrUnsupported    = &Error{Kind: Unsupported}
	ErrAlreadyInState = &Error{Kind: AlreadyInState}
	ErrBusy           = &Error{Kind: Busy}
	ErrAmbiguous      = &Error{Kind: Ambiguous}
)

// KindOf returns the kind of a driver's error (Failed for any other error).
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Failed
}
