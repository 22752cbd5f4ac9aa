package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/schemas"
)

// PowerState is a ComputerSystem's PowerState.
type PowerState string

// The power states of the schema.
const (
	On          PowerState = "On"
	Off         PowerState = "Off"
	PoweringOn  PowerState = "PoweringOn"
	PoweringOff PowerState = "PoweringOff"
	Paused      PowerState = "Paused"
)

// ResetType is the ComputerSystem.Reset action's parameter.
type ResetType string

// The reset types of the schema (ResetType, Resource.v1).
const (
	ResetOn          ResetType = "On"
	ForceOn          ResetType = "ForceOn"
	ForceOff         ResetType = "ForceOff"
	GracefulShutdown ResetType = "GracefulShutdown"
	GracefulRestart  ResetType = "GracefulRestart"
	ForceRestart     ResetType = "ForceRestart"
	Nmi              ResetType = "Nmi"
	PushPowerButton  ResetType = "PushPowerButton"
	PowerCycle       ResetType = "PowerCycle"
	FullPowerCycle   ResetType = "FullPowerCycle"
	Suspend          ResetType = "Suspend"
	Pause            ResetType = "Pause"
	Resume           ResetType = "Resume"
)

// Boot is a boot source override (ComputerSystem.Boot).
type Boot struct {
	// Target: BootSourceOverrideTarget (None, Pxe, Cd, Hdd, BiosSetup,
	// UefiHttp…).
	Target string
	// Enabled: BootSourceOverrideEnabled (Disabled, Once, Continuous).
	Enabled string
	// Mode: BootSourceOverrideMode (UEFI, Legacy); "" when the system has
	// none.
	Mode string
	// HTTPBootURI: HttpBootUri, for UefiHttp.
	HTTPBootURI string
}

// System is what the client reads of its ComputerSystem.
type System struct {
	ID         string
	PowerState PowerState
	// ResetTypes: ResetType@Redfish.AllowableValues (or the reset
	// ActionInfo's); empty when the service does not say.
	ResetTypes []ResetType
	Boot       Boot
	// BootTargets: BootSourceOverrideTarget@Redfish.AllowableValues.
	BootTargets []string
	// HasBootMode: the system has BootSourceOverrideMode (Supermicro's
	// have not).
	HasBootMode bool
}

// System reads the system.
func (c *Client) System(ctx context.Context) (*System, error) {
	s, _, err := c.system(ctx, "read system")
	return s, err
}

func (c *Client) system(ctx context.Context, op string) (*System, *schemas.ComputerSystem, error) {
	cs, err := schemas.GetComputerSystem(c.with(ctx), c.systemURI)
	if err != nil {
		return nil, nil, c.classify(ctx, op, err)
	}
	types, err := cs.GetSupportedResetTypes()
	if err != nil {
		types = nil // no ActionInfo: the service does not say
	}
	s := &System{
		ID: cs.ID, PowerState: PowerState(cs.PowerState),
		Boot: Boot{
			Target: string(cs.Boot.BootSourceOverrideTarget), Enabled: string(cs.Boot.BootSourceOverrideEnabled),
			Mode: string(cs.Boot.BootSourceOverrideMode), HTTPBootURI: cs.Boot.HTTPBootURI,
		},
		HasBootMode: cs.Boot.BootSourceOverrideMode != "",
	}
	for _, t := range types {
		s.ResetTypes = append(s.ResetTypes, ResetType(t))
	}
	for _, t := range cs.Boot.AllowableBootSourceOverrideTargetValues {
		s.BootTargets = append(s.BootTargets, string(t))
	}
	if s.Boot.Target == "" {
		s.Boot.Target = "None"
	}
	if s.Boot.Enabled == "" {
		s.Boot.Enabled = "Disabled"
	}
	return s, cs, nil
}

// PowerState reads the system's power state.
func (c *Client) PowerState(ctx context.Context) (PowerState, error) {
	s, err := c.System(ctx)
	if err != nil {
		return "", err
	}
	return s.PowerState, nil
}

// Reset sends ComputerSystem.Reset and, when the service runs it as a
// task, waits for the task to complete. A reset type the system does not
// allow is ErrUnsupported naming those it allows; a 409 Conflict (the
// system already is where the action would take it, as Dell's iDRAC
// answers) is ErrAlreadyInState. The service acknowledges before the
// machine has changed state: read PowerState to confirm.
func (c *Client) Reset(ctx context.Context, t ResetType) error {
	_, err := c.ResetFirst(ctx, t)
	return err
}

// ResetFirst is Reset with the first of candidates that the system allows
// (the first, when the system does not say), which it returns; none
// allowed is ErrUnsupported naming the candidates and what is allowed.
func (c *Client) ResetFirst(ctx context.Context, candidates ...ResetType) (ResetType, error) {
	if len(candidates) == 0 {
		return "", errors.New("redfish: no reset type")
	}
	op := "reset " + string(candidates[0])
	s, cs, err := c.system(ctx, op)
	if err != nil {
		return "", err
	}
	t, ok := candidates[0], len(s.ResetTypes) == 0
	for _, cand := range candidates {
		if ok {
			break
		}
		if slices.Contains(s.ResetTypes, cand) {
			t, ok = cand, true
		}
	}
	if !ok {
		return "", &Error{Kind: Unsupported, Op: op, URL: c.root,
			Detail: fmt.Sprintf("needs ResetType %s; the system allows %s", joinTypes(candidates, " or "), joinTypes(s.ResetTypes, ", "))}
	}
	op = "reset " + string(t)
	info, err := cs.Reset(schemas.ResetType(t))
	if err != nil {
		var rf *schemas.Error
		if errors.As(err, &rf) && rf.HTTPReturnedStatusCode == http.StatusConflict {
			_, detail := classifyAnswer(rf.HTTPReturnedStatusCode, rf.Code, rf.Message, extendedIDs(rf), extendedMessages(rf))
			return t, &Error{Kind: AlreadyInState, Op: op, URL: c.root, Status: http.StatusConflict, Detail: c.redact(detail), cause: err}
		}
		return t, c.classify(ctx, op, err)
	}
	return t, c.follow(ctx, op, info)
}

func joinTypes(ts []ResetType, sep string) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, sep)
}

// SetBoot sets the boot source override and reads it back. A target the
// system does not list in its allowable values is ErrUnsupported naming
// them; the mode is left out for a system without BootSourceOverrideMode.
// A read back that differs from what was set is an error (Failed) naming
// both, except that Once read back as Continuous (a known BMC quirk) is
// accepted: the caller sees it in Boot and clears the override after use.
func (c *Client) SetBoot(ctx context.Context, b Boot) error {
	op := "set boot " + b.Target
	s, _, err := c.system(ctx, op)
	if err != nil {
		return err
	}
	if b.Target != "None" && len(s.BootTargets) > 0 && !slices.Contains(s.BootTargets, b.Target) {
		return &Error{Kind: Unsupported, Op: op, URL: c.root,
			Detail: fmt.Sprintf("the system allows boot targets %s", strings.Join(s.BootTargets, ", "))}
	}
	patch := map[string]any{"BootSourceOverrideTarget": b.Target, "BootSourceOverrideEnabled": b.Enabled}
	if b.Mode != "" && s.HasBootMode {
		patch["BootSourceOverrideMode"] = b.Mode
	}
	if b.Target == "UefiHttp" {
		patch["HttpBootUri"] = b.HTTPBootURI
	}
	resp, err := c.with(ctx).Patch(c.systemURI, map[string]any{"Boot": patch})
	if err != nil {
		return c.classify(ctx, op, err)
	}
	if resp.StatusCode == http.StatusAccepted {
		info := schemas.ParseTaskMonitorInfo(c.with(ctx), resp)
		schemas.DeferredCleanupHTTPResponse(resp)
		if err := c.follow(ctx, op, info); err != nil {
			return err
		}
	} else {
		schemas.DeferredCleanupHTTPResponse(resp)
	}
	got, err := c.System(ctx)
	if err != nil {
		return err
	}
	want := b
	if !s.HasBootMode {
		want.Mode = ""
	} else if want.Mode == "" {
		want.Mode = got.Boot.Mode
	}
	if want.Target != "UefiHttp" {
		want.HTTPBootURI = got.Boot.HTTPBootURI
	}
	have := got.Boot
	if want.Enabled == "Once" && have.Enabled == "Continuous" {
		have.Enabled = "Once"
	}
	if b.Enabled == "Disabled" {
		// Targets need not read back once the override is off.
		if have.Enabled == "Disabled" {
			return nil
		}
	} else if have == want {
		return nil
	}
	return &Error{Kind: Failed, Op: op, URL: c.root,
		Detail: fmt.Sprintf("read back %s, want %s", bootString(got.Boot), bootString(b))}
}

func bootString(b Boot) string {
	s := b.Target + " " + b.Enabled
	if b.Mode != "" {
		s += " " + b.Mode
	}
	if b.HTTPBootURI != "" {
		s += " " + b.HTTPBootURI
	}
	return s
}

// Boot reads the boot source override.
func (c *Client) Boot(ctx context.Context) (Boot, error) {
	s, err := c.System(ctx)
	if err != nil {
		return Boot{}, err
	}
	return s.Boot, nil
}

// jsonDecode decodes a JSON answer of at most 4 MiB.
func jsonDecode(resp *http.Response, v any) error {
	if resp == nil || resp.Body == nil {
		return errors.New("empty answer")
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	return nil
}
