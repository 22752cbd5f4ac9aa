package inventory

import (
	"context"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// HostRegistration pre-registers a machine by its UUID and/or serial number
// so that onboarding recognises it when it calls home.
type HostRegistration struct {
	Name, SerialNumber, UUID string
	AutoOnboard, EnableVpro  bool
	UserLvmSize              uint32
}

// HostSummary counts hosts by condition.
type HostSummary struct {
	Total       int `json:"total"`
	Error       int `json:"error"`
	Running     int `json:"running"`
	Unallocated int `json:"unallocated"`
}

var reRegisterName = regexp.MustCompile(`^[a-zA-Z-_0-9./: ]*$`)

// checkRegistration validates a registration; partial allows an empty
// UUID and serial (an update that changes neither).
func checkRegistration(reg *HostRegistration, partial bool) error {
	if n := utf8.RuneCountInString(reg.Name); n > 20 || !reRegisterName.MatchString(reg.Name) {
		return eim.Errorf(eim.EINVALID, "name: %q must match ^[a-zA-Z-_0-9./: ]*$ and be at most 20 characters", reg.Name)
	}
	if !eim.ValidSerial(reg.SerialNumber) {
		return eim.Errorf(eim.EINVALID, "serialNumber: %q must be 5 to 20 letters or digits", reg.SerialNumber)
	}
	if reg.UUID != "" && !eim.ValidUUID(reg.UUID) {
		return eim.Errorf(eim.EINVALID, "uuid: %q is not a UUID", reg.UUID)
	}
	if !partial && reg.UUID == "" && reg.SerialNumber == "" {
		return eim.Errorf(eim.EINVALID, "uuid: a uuid or a serialNumber is required")
	}
	if err := checkUUIDIdentifies(reg.UUID); err != nil {
		return err
	}
	if !partial {
		if err := checkIdentifiable(reg.SerialNumber, reg.UUID); err != nil {
			return err
		}
	}
	return nil
}

// checkUUIDIdentifies refuses a vendor placeholder UUID (all zeros, all Fs
// …): onboarding ignores it, so a host would never be found by it, and the
// store's unique index would let only one host of the fleet have it.
func checkUUIDIdentifies(uuid string) error {
	if uuid != "" && eim.PlaceholderUUID(uuid) {
		return eim.Errorf(eim.EINVALID, "uuid: %s is a vendor placeholder that many boards share, so it identifies no machine; give the host's real UUID or register it by serialNumber alone", uuid)
	}
	return nil
}

// checkIdentifiable refuses a host whose only identity is a vendor
// placeholder serial ("0123456789", "00000000" …): onboarding ignores such a
// serial, so nothing would ever find the host. With a UUID the placeholder
// is kept as given; it just identifies nothing.
func checkIdentifiable(serial, uuid string) error {
	if uuid == "" && serial != "" && eim.PlaceholderSerial(serial) {
		return eim.Errorf(eim.EINVALID, "serialNumber: %s is a vendor placeholder that many boards share, so it identifies no machine; register the host with its uuid (the serial number may stay)", serial)
	}
	return nil
}

// RegisterHost pre-registers a host: desired state REGISTERED, or ONBOARDED
// with AutoOnboard; EnableVpro asks for AMT provisioning. Without a name
// the host is named after its serial number or UUID.
func (s *Service) RegisterHost(ctx context.Context, project string, reg HostRegistration) (*eim.Host, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	h, err := NewRegisteredHost(reg)
	if err != nil {
		return nil, err
	}
	var out *eim.Host
	err = s.store.Update(ctx, project, func(tx eim.Tx) error {
		if err := checkSerialFree(ctx, tx, h.SerialNumber, h.UUID, ""); err != nil {
			return err
		}
		if err := tx.Create(ctx, h); err != nil {
			return err
		}
		r, err := expandOne(ctx, tx, h)
		out, _ = r.(*eim.Host)
		return err
	})
	if err != nil {
		return nil, s.explainUUIDConflict(ctx, project, h.UUID, err)
	}
	return out, nil
}

// explainUUIDConflict turns the conflict of a new host with a host of the
// project still being deleted (its node's cleanup not done yet) into an
// answer that says so: the UUID stays reserved until the host is removed.
// Only on this error path does it read anything.
func (s *Service) explainUUIDConflict(ctx context.Context, project, uuid string, err error) error {
	if eim.ErrorCode(err) != eim.ECONFLICT || uuid == "" {
		return err
	}
	var deleting string
	verr := s.store.View(ctx, project, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "uuid", Value: uuid}}, Limit: 1, NoTotal: true})
		if err == nil && len(items) == 1 && items[0].(*eim.Host).DesiredState == eim.HostStateDeleted {
			deleting = items[0].Base().ResourceID
		}
		return err
	})
	if verr != nil || deleting == "" {
		return err
	}
	return eim.Errorf(eim.ECONFLICT, "uuid: %s with this UUID is being deleted; retry", deleting)
}

// checkSerialFree refuses a second host identified only by a serial number
// another host of the project already has: onboarding could not tell them
// apart. (UUIDs are unique within a project; the store enforces that.
// Other projects may register the same machine: onboarding settles it.) A
// placeholder serial identifies nothing, so any number of hosts may share
// it; checkIdentifiable makes sure they have UUIDs, which keeps them out of
// the store's unique index on serial numbers (it covers hosts without one).
func checkSerialFree(ctx context.Context, tx eim.Tx, serial, uuid, self string) error {
	if eim.PlaceholderSerial(serial) {
		return nil
	}
	items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "serialNumber", Value: serial}}, Limit: 2})
	if err != nil {
		return err
	}
	for _, r := range items {
		h := r.(*eim.Host)
		if h.ResourceID == self {
			continue
		}
		if uuid == "" || h.UUID == "" {
			return eim.Errorf(eim.ECONFLICT, "serialNumber: host %s already has serial number %s", h.ResourceID, serial)
		}
	}
	return nil
}

// UpdateRegistration changes a registered host: a new name, its desired
// state (ONBOARDED with AutoOnboard, else REGISTERED), EnableVpro,
// UserLvmSize; a UUID or serial number may be added where the host has none
// but never changed.
func (s *Service) UpdateRegistration(ctx context.Context, project, id string, reg HostRegistration) (*eim.Host, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := checkKindID(eim.KindHost, id); err != nil {
		return nil, err
	}
	if err := checkRegistration(&reg, true); err != nil {
		return nil, err
	}
	var out *eim.Host
	err := s.store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		old := r.(*eim.Host)
		h := clone(old)
		if reg.Name != "" {
			h.Name = reg.Name
		}
		if reg.UUID != "" && !strings.EqualFold(reg.UUID, h.UUID) {
			if h.UUID != "" {
				return eim.Errorf(eim.EINVALID, "uuid: cannot be changed (host %s has uuid %s)", id, h.UUID)
			}
			h.UUID = reg.UUID
		}
		if reg.SerialNumber != "" && reg.SerialNumber != h.SerialNumber {
			if h.SerialNumber != "" {
				return eim.Errorf(eim.EINVALID, "serialNumber: cannot be changed (host %s has serial number %s)", id, h.SerialNumber)
			}
			if err := checkIdentifiable(reg.SerialNumber, h.UUID); err != nil {
				return err
			}
			if err := checkSerialFree(ctx, tx, reg.SerialNumber, h.UUID, id); err != nil {
				return err
			}
			h.SerialNumber = reg.SerialNumber
		}
		// As the original: the registration's desired state is REGISTERED,
		// or ONBOARDED with autoOnboard, whatever it was.
		to := eim.HostStateRegistered
		if reg.AutoOnboard {
			to = eim.HostStateOnboarded
		}
		if err := checkHostTransition(h, to); err != nil {
			return err
		}
		h.DesiredState = to
		if reg.EnableVpro {
			h.DesiredAmtState = eim.AmtStateProvisioned
		}
		if reg.UserLvmSize != 0 {
			h.UserLvmSize = reg.UserLvmSize
		}
		if err := eim.Validate(h); err != nil {
			return err
		}
		if err := writeDesired(ctx, tx, old, h, "name", "uuid", "serialNumber", "desiredState", "desiredAmtState", "userLvmSize"); err != nil {
			return err
		}
		x, err := expandOne(ctx, tx, h)
		out, _ = x.(*eim.Host)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// OnboardHost sets a host's desired state to ONBOARDED.
func (s *Service) OnboardHost(ctx context.Context, project, id string) error {
	return s.setHostState(ctx, project, id, eim.HostStateOnboarded, nil)
}

// InvalidateHost marks a host untrusted (desired UNTRUSTED) with a note
// saying why; its managers revoke its credentials.
func (s *Service) InvalidateHost(ctx context.Context, project, id, note string) error {
	return s.setHostState(ctx, project, id, eim.HostStateUntrusted, func(h *eim.Host) {
		if note != "" {
			h.Note = note
		}
	})
}

func (s *Service) setHostState(ctx context.Context, project, id string, to eim.HostState, edit func(*eim.Host)) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := checkKindID(eim.KindHost, id); err != nil {
		return err
	}
	return s.store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		old := r.(*eim.Host)
		if err := checkHostTransition(old, to); err != nil {
			return err
		}
		h := clone(old)
		h.DesiredState = to
		if edit != nil {
			edit(h)
		}
		if err := eim.Validate(h); err != nil {
			return err
		}
		// Nothing that changes: no write, no event.
		return writeDesired(ctx, tx, old, h, "desiredState", "note")
	})
}

// writeDesired writes those of fields (host fields the API sets) that
// differ between old, the host read in tx, and h: over the host's state
// and identity as read, which its rules decided on (a transition depends
// on the current state; a UUID or serial number is only added, and
// onboarding may add one too).
func writeDesired(ctx context.Context, tx eim.Tx, old, h *eim.Host, fields ...string) error {
	changed := changedFields(old, h, fields)
	if len(changed) == 0 {
		return nil
	}
	when := []eim.Cond{{Field: "desiredState", Value: old.DesiredState}, {Field: "currentState", Value: old.CurrentState}}
	for _, f := range []string{"uuid", "serialNumber"} {
		if contains(changed, f) {
			v := old.UUID
			if f == "serialNumber" {
				v = old.SerialNumber
			}
			when = append(when, eim.Cond{Field: f, Value: v})
		}
	}
	if err := tx.UpdateFieldsIf(ctx, h, when, changed...); err != nil {
		return err
	}
	return nil
}

// InvalidateInstance sets an instance's desired state to UNTRUSTED.
func (s *Service) InvalidateInstance(ctx context.Context, project, id string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := checkKindID(eim.KindInstance, id); err != nil {
		return err
	}
	return s.store.Update(ctx, project, func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindInstance, id)
		if err != nil {
			return err
		}
		return s.setInstanceState(ctx, tx, r.(*eim.Instance), eim.InstanceStateUntrusted)
	})
}

// HostSummary counts the hosts matching filter: all of them, those whose
// host status indicator is ERROR, those whose host status is "Running",
// and those without a site. Each is one COUNT query.
func (s *Service) HostSummary(ctx context.Context, project, filter string) (*HostSummary, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	var sum HostSummary
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		for _, c := range []struct {
			n     *int
			where []eim.Cond
		}{
			{&sum.Total, nil},
			{&sum.Error, []eim.Cond{{Field: "hostStatusIndicator", Value: string(eim.StatusError)}}},
			{&sum.Running, []eim.Cond{{Field: "hostStatus", Value: StatusRunning}}},
			{&sum.Unallocated, []eim.Cond{{Field: "siteId", Value: nil}}},
		} {
			n, err := tx.Count(ctx, eim.KindHost, eim.Query{Filter: filter, Where: c.where})
			if err != nil {
				return err
			}
			*c.n = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &sum, nil
}

// CountHosts counts, for each filter, the hosts matching it ("" = all),
// in one read transaction: what a dashboard of host states asks.
func (s *Service) CountHosts(ctx context.Context, project string, filters []string) ([]int, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	out := make([]int, len(filters))
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		for i, f := range filters {
			n, err := tx.Count(ctx, eim.KindHost, eim.Query{Filter: f})
			if err != nil {
				return err
			}
			out[i] = n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CountHostsBy counts, for each filter, the hosts matching it ("" = all)
// per value of field (a stored text, enum or reference field; an absent
// reference counts under ""), one grouped query each, in one read
// transaction: the hosts of every site at once, say.
func (s *Service) CountHostsBy(ctx context.Context, project, field string, filters []string) ([]map[string]int, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	out := make([]map[string]int, len(filters))
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		for i, f := range filters {
			groups, err := tx.CountBy(ctx, eim.KindHost, eim.Query{Filter: f}, field)
			if err != nil {
				return err
			}
			out[i] = make(map[string]int, len(groups))
			for _, g := range groups {
				out[i][g.Values[0]] += g.Count
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
