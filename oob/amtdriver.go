package oob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/eimhq/eim/oob/amt"
)

// The AMT adapter: oob/amt speaks the MPS's numbers (CIM power states,
// power action codes); this file maps them to Driver and Conn. The target's
// Address is the MPS's URL, its SystemID the device's AMT GUID, its
// credentials the MPS's account.
//
// AMT reached through an MPS keeps no boot override of its own: a boot
// target goes with the power action (401 "power on to PXE", 400 "reset to
// PXE", 100/101 to BIOS setup, 203/202 to an IDE-R CD). So SetBoot only
// accepts a one-time boot, which the Conn keeps and sends with its next
// power on or reset, and Boot reads what the Conn holds, not the device.

// AMTOptions tune the AMT driver.
type AMTOptions struct {
	Timeout time.Duration // each request to the MPS (0: amt.DefaultTimeout)
}

// NewAMTDriver returns the Driver of protocol AMT.
func NewAMTDriver(o AMTOptions) Driver { return amtDriver{o} }

type amtDriver struct{ o AMTOptions }

// Open logs in to the MPS at t.Address and checks it knows the device
// t.SystemID.
func (d amtDriver) Open(ctx context.Context, t Target) (Conn, error) {
	if t.SystemID == "" {
		return nil, &Error{Kind: Failed, Op: "amt open", Detail: "the device's AMT GUID (Target.SystemID) is empty"}
	}
	c, err := amt.Dial(ctx, amt.Config{URL: t.Address, GUID: t.SystemID, Username: t.Username, Password: t.Password,
		CABundle: t.CABundle, Insecure: t.Insecure, Timeout: d.o.Timeout})
	if err != nil {
		return nil, amtError("open", err)
	}
	return &amtConn{c: c}, nil
}

type amtConn struct {
	c    *amt.Client
	boot *Boot // the one-time boot to send with the next power on or reset
}

func amtError(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *amt.Error
	if !errors.As(err, &e) {
		return &Error{Kind: Failed, Op: "amt " + op, Detail: err.Error(), Err: err}
	}
	kinds := map[amt.Kind]ErrorKind{amt.Unreachable: Unreachable, amt.BadCredentials: BadCredentials,
		amt.BadCertificate: BadCertificate, amt.Busy: Busy}
	return &Error{Kind: kinds[e.Kind], Op: "amt " + e.Op + " via MPS " + e.URL, Detail: e.Detail, Err: err}
}

// amtPowerState maps a CIM power state.
func amtPowerState(s int) (PowerState, bool) {
	switch s {
	case amt.StateOn:
		return PowerOn, true
	case amt.StateSleepLight, amt.StateSleepDeep:
		return PowerSleep, true
	case amt.StateHibernate:
		return PowerHibernate, true
	case amt.StateOffHard, amt.StateOffSoft, amt.StateOffSoftGraceful, amt.StateOffHardGraceful:
		return PowerOff, true
	case amt.StatePowerCycleOffSoft, amt.StatePowerCycleOffHard, amt.StatePowerCycleSoftGrac, amt.StatePowerCycleHardGrac:
		return PowerPoweringOn, true // on its way back on
	}
	return "", false
}

func (a *amtConn) PowerState(ctx context.Context) (PowerState, error) {
	s, err := a.c.PowerState(ctx)
	if err != nil {
		return "", amtError("read power state", err)
	}
	ps, ok := amtPowerState(s)
	if !ok {
		return "", &Error{Kind: Failed, Op: "amt read power state", Detail: fmt.Sprintf("unknown CIM power state %d", s)}
	}
	return ps, nil
}

// amtActions are the action codes of each action; soft off is AMT's
// graceful one (it needs Intel LMS on the device).
var amtActions = map[Action]int{
	ActionOn: amt.ActionOn, ActionGracefulOff: amt.ActionSoftOff, ActionForceOff: amt.ActionOff,
	ActionReset: amt.ActionReset, ActionPowerCycle: amt.ActionCycle,
	ActionSleep: amt.ActionSleep, ActionHibernate: amt.ActionHibernate,
}

// amtBootActions are the combined actions: power on to, reset to.
var amtBootActions = map[BootTarget][2]int{
	BootPXE:  {amt.ActionOnToPXE, amt.ActionResetToPXE},
	BootBIOS: {amt.ActionOnToBIOS, amt.ActionResetToBIOS},
	BootCD:   {amt.ActionOnToIDERCD, amt.ActionResetToIDERCD},
}

// Power sends the action, combined with the pending one-time boot for a
// power on or a reset. An action the device's capabilities do not list is
// ErrUnsupported naming those they do.
func (a *amtConn) Power(ctx context.Context, act Action) error {
	op := "power " + string(act)
	code, ok := amtActions[act]
	if !ok {
		return &Error{Kind: Unsupported, Op: "amt " + op, Detail: "unknown action"}
	}
	usesBoot := a.boot != nil && (act == ActionOn || act == ActionReset)
	if usesBoot {
		pair := amtBootActions[a.boot.Target]
		code = pair[0]
		if act == ActionReset {
			code = pair[1]
		}
	}
	caps, err := a.c.Capabilities(ctx)
	if err != nil {
		return amtError(op, err)
	}
	if !slices.Contains(mapValues(caps), code) {
		return &Error{Kind: Unsupported, Op: "amt " + op,
			Detail: fmt.Sprintf("the device does not offer action %d; it offers %s", code, capsString(caps))}
	}
	if err := a.c.PowerAction(ctx, code); err != nil {
		return amtError(op, err)
	}
	if usesBoot {
		a.boot = nil // used
	}
	return nil
}

func mapValues(m map[string]int) []int {
	v := make([]int, 0, len(m))
	for _, n := range m {
		v = append(v, n)
	}
	return v
}

func capsString(caps map[string]int) string {
	s := make([]string, 0, len(caps))
	for k, v := range caps {
		s = append(s, fmt.Sprintf("%s (%d)", k, v))
	}
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// SetBoot keeps a one-time boot for the next power on or reset; BootNone
// forgets it. A persistent override, HTTP boot or disk is ErrUnsupported.
func (a *amtConn) SetBoot(_ context.Context, b Boot) error {
	op := "amt set boot " + string(b.Target)
	if b.Target == BootNone {
		a.boot = nil
		return nil
	}
	if _, ok := amtBootActions[b.Target]; !ok {
		return &Error{Kind: Unsupported, Op: op, Detail: "AMT through an MPS boots once to PXE, BIOS or CD (IDE-R) only"}
	}
	if !b.Once {
		return &Error{Kind: Unsupported, Op: op, Detail: "AMT through an MPS has no persistent boot override, only a one-time boot with a power on or reset"}
	}
	kept := b
	a.boot = &kept
	return nil
}

// Boot is the one-time boot the Conn holds (NONE after it was used).
func (a *amtConn) Boot(context.Context) (Boot, error) {
	if a.boot == nil {
		return Boot{Target: BootNone}, nil
	}
	return *a.boot, nil
}

// Capabilities maps the device's power capabilities.
func (a *amtConn) Capabilities(ctx context.Context) (Capabilities, error) {
	caps, err := a.c.Capabilities(ctx)
	if err != nil {
		return Capabilities{}, amtError("read capabilities", err)
	}
	codes := mapValues(caps)
	var out Capabilities
	for name := range caps {
		out.ResetTypes = append(out.ResetTypes, name)
	}
	sort.Strings(out.ResetTypes)
	for _, act := range []Action{ActionOn, ActionGracefulOff, ActionForceOff, ActionReset, ActionPowerCycle, ActionSleep, ActionHibernate} {
		if slices.Contains(codes, amtActions[act]) {
			out.Actions = append(out.Actions, act)
		}
	}
	for _, t := range []BootTarget{BootPXE, BootCD, BootBIOS} {
		if slices.Contains(codes, amtBootActions[t][0]) {
			out.BootTargets = append(out.BootTargets, t)
		}
	}
	return out, nil
}

// InsertMedia: IDE-R needs a redirection session, which the MPS's REST API
// does not open.
func (a *amtConn) InsertMedia(context.Context, string) error {
	return &Error{Kind: Unsupported, Op: "amt insert media", Detail: "no virtual media through the MPS's REST API"}
}

func (a *amtConn) EjectMedia(context.Context) error {
	return &Error{Kind: Unsupported, Op: "amt eject media", Detail: "no virtual media through the MPS's REST API"}
}

func (a *amtConn) Close() error { return amtError("close", a.c.Close()) }
