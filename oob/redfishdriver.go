package oob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eimhq/eim/oob/redfish"
)

// The Redfish adapter: oob/redfish speaks Redfish's vocabulary (reset
// types, BootSourceOverrideTarget values); this file maps it to the
// protocol-neutral Driver and Conn. The adapter lives here, not in
// oob/redfish, so that the protocol package does not import the module
// (which imports the store's and the API's packages) and the module can
// build its map of drivers itself.

// RedfishOptions tune the Redfish driver; zero values are the defaults of
// package redfish.
type RedfishOptions struct {
	// BasicAuth sends the credentials with each request instead of opening
	// a session per Conn.
	BasicAuth bool
	// Timeout bounds each request; TaskTimeout the wait for an
	// asynchronous action's task; TaskPoll is the interval between reads of
	// a task monitor.
	Timeout, TaskTimeout, TaskPoll time.Duration
}

// NewRedfishDriver returns the Driver of protocol REDFISH.
func NewRedfishDriver(o RedfishOptions) Driver { return redfishDriver{o} }

type redfishDriver struct{ o RedfishOptions }

// Open connects to t.Address (a URL, or host[:port] for https), logs in
// (one session per Conn, deleted by Close) and finds the system.
func (d redfishDriver) Open(ctx context.Context, t Target) (Conn, error) {
	c, err := redfish.Dial(ctx, redfish.Config{
		URL: t.Address, SystemID: t.SystemID, Username: t.Username, Password: t.Password,
		CABundle: t.CABundle, Insecure: t.Insecure, BasicAuth: d.o.BasicAuth,
		Timeout: d.o.Timeout, TaskTimeout: d.o.TaskTimeout, TaskPoll: d.o.TaskPoll,
	})
	if err != nil {
		return nil, redfishError("open", err)
	}
	return &redfishConn{c: c}, nil
}

type redfishConn struct{ c *redfish.Client }

// redfishError makes a redfish.Error an *Error of the same kind.
func redfishError(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *redfish.Error
	if !errors.As(err, &e) {
		return &Error{Kind: Failed, Op: "redfish " + op, Detail: err.Error(), Err: err}
	}
	kinds := map[redfish.Kind]ErrorKind{
		redfish.Unreachable: Unreachable, redfish.BadCredentials: BadCredentials,
		redfish.BadCertificate: BadCertificate, redfish.Unsupported: Unsupported,
		redfish.AlreadyInState: AlreadyInState, redfish.Busy: Busy, redfish.Ambiguous: Ambiguous,
	}
	return &Error{Kind: kinds[e.Kind], Op: "redfish " + e.Op + " at " + e.URL, Detail: e.Detail, Err: err}
}

// PowerState maps Redfish's PowerState; Paused (a system whose CPUs are
// halted) is powered, so ON.
func (r *redfishConn) PowerState(ctx context.Context) (PowerState, error) {
	s, err := r.c.PowerState(ctx)
	if err != nil {
		return "", redfishError("read power state", err)
	}
	switch s {
	case redfish.On, redfish.Paused:
		return PowerOn, nil
	case redfish.Off:
		return PowerOff, nil
	case redfish.PoweringOn:
		return PowerPoweringOn, nil
	case redfish.PoweringOff:
		return PowerPoweringOff, nil
	}
	return "", &Error{Kind: Failed, Op: "redfish read power state", Detail: fmt.Sprintf("the system reports PowerState %q", s)}
}

// redfishResets are the reset types that do each action, preferred first.
// Redfish has no hibernation.
var redfishResets = map[Action][]redfish.ResetType{
	ActionOn:          {redfish.ResetOn, redfish.ForceOn},
	ActionGracefulOff: {redfish.GracefulShutdown},
	ActionForceOff:    {redfish.ForceOff},
	ActionReset:       {redfish.ForceRestart},
	ActionPowerCycle:  {redfish.PowerCycle, redfish.FullPowerCycle},
	ActionSleep:       {redfish.Suspend},
	ActionHibernate:   nil,
}

// resetFor picks the reset type for a among those the system allows (all,
// when it does not say).
func resetFor(a Action, allowed []redfish.ResetType) (redfish.ResetType, bool) {
	for _, t := range redfishResets[a] {
		if len(allowed) == 0 || slices.Contains(allowed, t) {
			return t, true
		}
	}
	return "", false
}

// Power sends the reset type that does a, among those the system allows;
// none is ErrUnsupported naming what the system allows.
func (r *redfishConn) Power(ctx context.Context, a Action) error {
	op := "power " + string(a)
	candidates, known := redfishResets[a]
	if !known {
		return &Error{Kind: Unsupported, Op: "redfish " + op, Detail: "unknown action"}
	}
	if len(candidates) == 0 {
		return &Error{Kind: Unsupported, Op: "redfish " + op, Detail: "Redfish has no reset type for it"}
	}
	_, err := r.c.ResetFirst(ctx, candidates...)
	return redfishError(op, err)
}

// The boot targets of each side.
var redfishTargets = map[BootTarget]string{
	BootNone: "None", BootPXE: "Pxe", BootHTTP: "UefiHttp", BootCD: "Cd", BootDisk: "Hdd", BootBIOS: "BiosSetup",
}

// SetBoot sets the override (Once or Continuous; UEFI or Legacy mode,
// left out on systems without BootSourceOverrideMode) and checks it by
// reading it back. BootNone disables the override.
func (r *redfishConn) SetBoot(ctx context.Context, b Boot) error {
	op := "set boot " + string(b.Target)
	target, ok := redfishTargets[b.Target]
	if !ok {
		return &Error{Kind: Unsupported, Op: "redfish " + op, Detail: "unknown boot target"}
	}
	rb := redfish.Boot{Target: target, Enabled: "Continuous", Mode: "Legacy"}
	if b.Once {
		rb.Enabled = "Once"
	}
	if b.UEFI || b.Target == BootHTTP {
		rb.Mode = "UEFI"
	}
	switch b.Target {
	case BootNone:
		rb.Enabled, rb.Mode = "Disabled", ""
	case BootHTTP:
		if b.URL == "" {
			return &Error{Kind: Failed, Op: "redfish " + op, Detail: "HTTP boot needs a URL"}
		}
		rb.HTTPBootURI = b.URL
	}
	return redfishError(op, r.c.SetBoot(ctx, rb))
}

// Boot reads the override back. Targets without a neutral name (Usb,
// UefiShell…) keep their Redfish name.
func (r *redfishConn) Boot(ctx context.Context) (Boot, error) {
	rb, err := r.c.Boot(ctx)
	if err != nil {
		return Boot{}, redfishError("read boot", err)
	}
	if rb.Enabled == "Disabled" || rb.Target == "None" {
		return Boot{Target: BootNone}, nil
	}
	b := Boot{Target: BootTarget(rb.Target), Once: rb.Enabled == "Once", UEFI: rb.Mode == "UEFI"}
	if rb.Target == "UefiHttp" {
		b.URL = rb.HTTPBootURI // BMCs keep the URI when another target is set
	}
	for t, name := range redfishTargets {
		if name == rb.Target {
			b.Target = t
		}
	}
	return b, nil
}

// Capabilities are the actions some allowed reset type does, the boot
// targets among the allowable values, whether the system has a virtual CD,
// and the service's systems when it has several.
func (r *redfishConn) Capabilities(ctx context.Context) (Capabilities, error) {
	s, err := r.c.System(ctx)
	if err != nil {
		return Capabilities{}, redfishError("read capabilities", err)
	}
	var caps Capabilities
	for _, t := range s.ResetTypes {
		caps.ResetTypes = append(caps.ResetTypes, string(t))
	}
	for _, a := range []Action{ActionOn, ActionGracefulOff, ActionForceOff, ActionReset, ActionPowerCycle, ActionSleep, ActionHibernate} {
		if _, ok := resetFor(a, s.ResetTypes); ok {
			caps.Actions = append(caps.Actions, a)
		}
	}
	for _, t := range []BootTarget{BootPXE, BootHTTP, BootCD, BootDisk, BootBIOS} {
		if len(s.BootTargets) == 0 || slices.Contains(s.BootTargets, redfishTargets[t]) {
			caps.BootTargets = append(caps.BootTargets, t)
		}
	}
	if caps.VirtualMedia, err = r.c.HasVirtualCD(ctx); err != nil {
		return Capabilities{}, redfishError("read capabilities", err)
	}
	if sys := r.c.Systems(); len(sys) > 1 {
		caps.Systems = sys
	}
	return caps, nil
}

func (r *redfishConn) InsertMedia(ctx context.Context, url string) error {
	return redfishError("insert media", r.c.InsertMedia(ctx, url))
}

func (r *redfishConn) EjectMedia(ctx context.Context) error {
	return redfishError("eject media", r.c.EjectMedia(ctx))
}

func (r *redfishConn) Close() error { return redfishError("log out", r.c.Close()) }
