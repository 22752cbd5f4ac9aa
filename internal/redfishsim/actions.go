package redfishsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
)

// decodeObject reads a request body that must be a JSON object (an empty
// body is an empty object: clients post actions without parameters so).
func decodeObject(r *http.Request) (map[string]json.RawMessage, *apiError) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, errMalformed()
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
		return nil, errMalformed()
	}
	return obj, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readOnlySystem are the ComputerSystem's properties a PATCH cannot set.
var readOnlySystem = []string{"@odata.id", "@odata.type", "Id", "Name", "SystemType", "Manufacturer", "Model",
	"SerialNumber", "UUID", "PowerState", "BiosVersion", "Status", "Actions", "Links"}

// patchSystem sets the boot override (and AssetTag). All or nothing: any
// bad property fails the request with every problem listed.
func (b *BMC) patchSystem(w http.ResponseWriter, r *http.Request, s *system) *apiError {
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	faults := b.Faults()
	if im := r.Header.Get("If-Match"); im != "" && !matches(im, etag(b.systemResource(r.Context(), s))) {
		return errPrecondition()
	}
	var msgs []message
	str := func(pointer, name string, raw json.RawMessage) (string, bool) {
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			msgs = append(msgs, msgTypeError(pointer, name, string(raw)))
			return "", false
		}
		return v, true
	}
	var (
		assetTag                           *string
		target, enabled, mode, httpBootURI *string
	)
	for _, k := range sortedKeys(body) {
		raw := body[k]
		switch {
		case k == "AssetTag":
			if v, ok := str("#/AssetTag", k, raw); ok {
				assetTag = &v
			}
		case k == "Boot":
			var boot map[string]json.RawMessage
			if err := json.Unmarshal(raw, &boot); err != nil || boot == nil {
				msgs = append(msgs, msgTypeError("#/Boot", "Boot", string(raw)))
				continue
			}
			for _, bk := range sortedKeys(boot) {
				ptr := "#/Boot/" + bk
				v, ok := "", false
				switch bk {
				case "BootSourceOverrideTarget", "BootSourceOverrideEnabled", "HttpBootUri":
					v, ok = str(ptr, bk, boot[bk])
				case "BootSourceOverrideMode":
					if faults.NoBootMode {
						msgs = append(msgs, msgPropertyUnknown(ptr, bk))
						continue
					}
					v, ok = str(ptr, bk, boot[bk])
				case "BootSourceOverrideTarget@Redfish.AllowableValues", "BootSourceOverrideEnabled@Redfish.AllowableValues",
					"BootSourceOverrideMode@Redfish.AllowableValues":
					msgs = append(msgs, msgNotWritable(ptr, bk))
					continue
				default:
					msgs = append(msgs, msgPropertyUnknown(ptr, bk))
					continue
				}
				if !ok {
					continue
				}
				switch bk {
				case "BootSourceOverrideTarget":
					if !slices.Contains(s.targets, v) {
						msgs = append(msgs, msgNotInList(ptr, bk, v))
						continue
					}
					target = &v
				case "BootSourceOverrideEnabled":
					if !slices.Contains([]string{"Disabled", "Once", "Continuous"}, v) {
						msgs = append(msgs, msgNotInList(ptr, bk, v))
						continue
					}
					enabled = &v
				case "BootSourceOverrideMode":
					if v != "UEFI" && v != "Legacy" {
						msgs = append(msgs, msgNotInList(ptr, bk, v))
						continue
					}
					mode = &v
				case "HttpBootUri":
					if u, err := url.Parse(v); v != "" && (err != nil || u.Scheme == "" || u.Host == "") {
						msgs = append(msgs, message{id: "PropertyValueFormatError",
							text:       fmt.Sprintf("The value '%s' for the property %s is not a format that the property can accept.", v, bk),
							args:       []string{v, bk},
							related:    []string{ptr},
							resolution: "Correct the value for the property in the request body and resubmit the request if the operation failed."})
						continue
					}
					httpBootURI = &v
				}
			}
		case slices.Contains(readOnlySystem, k):
			msgs = append(msgs, msgNotWritable("#/"+k, k))
		default:
			msgs = append(msgs, msgPropertyUnknown("#/"+k, k))
		}
	}
	if len(msgs) > 0 {
		return newError(http.StatusBadRequest, msgs...)
	}
	s.mu.Lock()
	if assetTag != nil {
		s.assetTag = *assetTag
	}
	if target != nil {
		s.target = *target
	}
	if enabled != nil {
		s.enabled = *enabled
		if s.enabled == "Once" && faults.OnceAsContinuous {
			s.enabled = "Continuous"
		}
	}
	if mode != nil {
		s.mode = *mode
	}
	if httpBootURI != nil {
		s.httpBootURI = *httpBootURI
	}
	s.mu.Unlock()
	writeResource(w, b.systemResource(r.Context(), s))
	return nil
}

// reset is the ComputerSystem.Reset action: 204 once the action has
// started (or was dropped, or the system already is in that state).
func (b *BMC) reset(w http.ResponseWriter, r *http.Request, s *system) *apiError {
	const action = "ComputerSystem.Reset"
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	for _, k := range sortedKeys(body) {
		if k != "ResetType" {
			return errActionParamUnknown(action, k)
		}
	}
	raw, ok := body["ResetType"]
	if !ok {
		return errActionParamMissing(action, "ResetType")
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return errActionParamType(action, "ResetType", string(raw))
	}
	if !slices.Contains(s.resetTypes, ResetType(v)) {
		return errActionParamValue(action, "ResetType", v)
	}
	if b.taskFailing() {
		writeAccepted(w, b.asyncTask("ComputerSystem.Reset", errTaskAborted("ComputerSystem.Reset")))
		return nil
	}
	if aerr := b.doReset(r.Context(), s, ResetType(v)); aerr != nil {
		return aerr
	}
	if t := b.asyncTask("ComputerSystem.Reset", nil); t != nil {
		writeAccepted(w, t)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// doReset decides from the machine's state what a reset type means, does
// it and records it.
func (b *BMC) doReset(ctx context.Context, s *system, t ResetType) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	faults := b.Faults()
	a := Action{System: s.id, Type: t, Result: "done"}
	defer func() { b.record(a) }()
	state, err := s.machine.PowerState(ctx)
	if err != nil {
		a.Result = "error"
		return errInternal(err)
	}
	off := state == PowerOff
	already := func() *apiError {
		if faults.ConflictInState {
			a.Result = "conflict"
			return errAlreadyInState(state)
		}
		a.Result = "already"
		return nil
	}
	run := func(f func() error) *apiError {
		if err := f(); err != nil {
			a.Result = "error"
			return errInternal(err)
		}
		return nil
	}
	powerOn := func() *apiError {
		if b.takeDrop() {
			a.Result = "dropped"
			return nil
		}
		switch state {
		case PoweringOff: // lost, as on many BMCs: the shutdown goes on
			a.Result = "dropped"
			return nil
		case PowerOff:
			a.Boot = s.consumeBoot(faults)
			return run(func() error { return s.machine.PowerOn(ctx, a.Boot) })
		}
		return already()
	}
	// restart of an off machine: iDRAC refuses, others switch it on.
	restartOff := func() *apiError {
		if faults.ConflictInState {
			return already()
		}
		a.Boot = s.consumeBoot(faults)
		return run(func() error { return s.machine.PowerOn(ctx, a.Boot) })
	}
	switch t {
	case ResetOn, ForceOn:
		return powerOn()
	case PushPowerButton:
		if off || state == PoweringOff {
			return powerOn()
		}
		return run(func() error { return s.machine.PowerOff(ctx, true) })
	case ForceOff:
		if off {
			return already()
		}
		return run(func() error { return s.machine.PowerOff(ctx, false) })
	case GracefulShutdown:
		if off || state == PoweringOff {
			return already()
		}
		return run(func() error { return s.machine.PowerOff(ctx, true) })
	case GracefulRestart, ForceRestart:
		if off {
			return restartOff()
		}
		a.Boot = s.consumeBoot(faults)
		return run(func() error { return s.machine.Restart(ctx, t == GracefulRestart, a.Boot) })
	case PowerCycle:
		a.Boot = s.consumeBoot(faults)
		if off {
			return run(func() error { return s.machine.PowerOn(ctx, a.Boot) })
		}
		return run(func() error { return s.machine.PowerCycle(ctx, a.Boot) })
	case Nmi:
		if state != PowerOn {
			return already()
		}
		return run(func() error { return s.machine.Nmi(ctx) })
	}
	return errActionParamValue("ComputerSystem.Reset", "ResetType", string(t))
}

// consumeBoot is the boot a power-on or reset starts: the override in
// effect, a one-time one cleared (DSP2046: Once returns to Disabled after
// the boot). Called with s.mu held.
func (s *system) consumeBoot(faults Faults) Boot {
	if s.enabled == "Disabled" || s.target == "None" {
		return Boot{Target: "None"}
	}
	boot := Boot{Target: s.target, HTTPBootURI: s.httpBootURI}
	if !faults.NoBootMode {
		boot.Mode = s.mode
	}
	if s.target == "Cd" && s.inserted {
		boot.Image = s.image
	}
	if s.enabled == "Once" {
		s.enabled = "Disabled"
		if faults.OnceIgnored {
			return Boot{Target: "None"}
		}
	}
	return boot
}

// insertMedia is VirtualMedia.InsertMedia: Image (required), Inserted,
// WriteProtected, TransferMethod, TransferProtocolType, UserName, Password.
func (b *BMC) insertMedia(w http.ResponseWriter, r *http.Request, s *system) *apiError {
	const action = "VirtualMedia.InsertMedia"
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	image, inserted, writeProtected := "", true, true
	for _, k := range sortedKeys(body) {
		raw := body[k]
		switch k {
		case "Image", "UserName", "Password", "TransferMethod", "TransferProtocolType":
			var v string
			if err := json.Unmarshal(raw, &v); err != nil {
				return errActionParamType(action, k, string(raw))
			}
			switch k {
			case "Image":
				u, err := url.Parse(v)
				if err != nil || u.Scheme == "" || (u.Host == "" && u.Scheme != "file") {
					return newError(http.StatusBadRequest, message{id: "ActionParameterValueFormatError",
						text:       fmt.Sprintf("The value '%s' for the parameter %s in the action %s has an invalid format.", v, k, action),
						args:       []string{v, k, action},
						related:    []string{"#/" + k},
						resolution: "Correct the value for the parameter in the request body and resubmit the request if the operation failed."})
				}
				image = v
			case "TransferMethod":
				if v != "Stream" && v != "Upload" {
					return errActionParamValue(action, k, v)
				}
			case "TransferProtocolType":
				if !slices.Contains([]string{"CIFS", "FTP", "SFTP", "HTTP", "HTTPS", "NFS", "SCP", "TFTP", "OEM"}, v) {
					return errActionParamValue(action, k, v)
				}
			}
		case "Inserted", "WriteProtected":
			var v bool
			if err := json.Unmarshal(raw, &v); err != nil {
				return errActionParamType(action, k, string(raw))
			}
			if k == "Inserted" {
				inserted = v
			} else {
				writeProtected = v
			}
		default:
			return errActionParamUnknown(action, k)
		}
	}
	if image == "" {
		return errActionParamMissing(action, "Image")
	}
	if b.taskFailing() {
		writeAccepted(w, b.asyncTask("VirtualMedia.InsertMedia", errTaskAborted("VirtualMedia.InsertMedia")))
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inserted {
		return errInUse() // eject first, as BMCs ask
	}
	s.image, s.inserted, s.writeProtected = image, inserted, writeProtected
	if t := b.asyncTask("VirtualMedia.InsertMedia", nil); t != nil {
		writeAccepted(w, t)
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ejectMedia is VirtualMedia.EjectMedia (no parameters).
func (b *BMC) ejectMedia(w http.ResponseWriter, r *http.Request, s *system) *apiError {
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	for _, k := range sortedKeys(body) {
		return errActionParamUnknown("VirtualMedia.EjectMedia", k)
	}
	s.mu.Lock()
	s.image, s.inserted, s.writeProtected = "", false, true
	s.mu.Unlock()
	if e, ok := s.machine.(CDEjector); ok {
		if err := e.EjectCD(r.Context()); err != nil {
			return errInternal(fmt.Errorf("eject the machine's CD: %w", err))
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
