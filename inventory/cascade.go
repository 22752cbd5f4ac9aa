package inventory

import (
	"context"
	"fmt"
	"slices"

	"github.com/eimhq/eim"
)

// The writes of a project's deletion (the tenant module's cascade): each
// call does a bounded batch in one transaction and says how much is left,
// so that a cascade is resumable at any point and never holds the writer
// for long (another project's writes go between its batches).

// DeauthorizeHosts deauthorizes up to limit hosts of the project, so
// that their nodes are refused from then on, and returns how many it
// changed and how many are still to do. A host whose node was onboarded
// (current ONBOARDED or UNTRUSTED) is invalidated (desired UNTRUSTED, as
// the original's "deauthorize": onboarding refuses its device and
// finishes the invalidation); one waiting to be onboarded goes back to
// desired REGISTERED (its device is answered "registered", without
// credentials). Either way its credentials are revoked at once (the
// secret cleared, the generation bumped). Hosts being deleted are left
// as they are.
func (s *Service) DeauthorizeHosts(ctx context.Context, project string, limit int) (done, left int, err error) {
	if err := checkProject(project); err != nil {
		return 0, 0, err
	}
	err = s.store.Update(ctx, project, func(tx eim.Tx) error {
		done, left = 0, 0
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{NoTotal: true})
		if err != nil {
			return err
		}
		for _, r := range items {
			h := r.(*eim.Host)
			w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, DesiredState: deauthorized(h), NodeCredGen: h.NodeCredGen}
			if h.NodeSecretHash != "" {
				w.NodeCredGen++
			}
			if w.DesiredState == h.DesiredState && w.NodeCredGen == h.NodeCredGen {
				continue
			}
			if done == limit {
				left++
				continue
			}
			// Over the state and credentials read: a change meanwhile (new
			// credentials issued) runs this again.
			when := []eim.Cond{{Field: "desiredState", Value: h.DesiredState}, {Field: "currentState", Value: h.CurrentState},
				{Field: "node_cred_gen", Value: h.NodeCredGen}}
			if err := tx.UpdateFieldsIf(ctx, w, when, "desiredState", "node_secret_hash", "node_cred_gen"); err != nil {
				return err
			}
			done++
		}
		return nil
	})
	return done, left, err
}

// deauthorized is the desired state of h once deauthorized.
func deauthorized(h *eim.Host) eim.HostState {
	switch {
	case h.DesiredState == eim.HostStateDeleted || h.DesiredState == eim.HostStateUntrusted:
		return h.DesiredState
	case h.CurrentState == eim.HostStateOnboarded || h.CurrentState == eim.HostStateUntrusted:
		return eim.HostStateUntrusted
	case h.DesiredState == eim.HostStateOnboarded:
		return eim.HostStateRegistered
	}
	return h.DesiredState
}

// DeleteAllOf deletes up to limit resources of kind k in the project and
// returns how many it deleted and how many are left. Hosts and instances
// are deleted in two phases, as by Delete: their desired state becomes
// DELETED and a manager (the reaper) removes them; what is left counts
// them until it has. Regions first lose their children (whose parent
// link is cut). The cascade's order keeps every other reference out of
// the way; one that is not fails the call.
func (s *Service) DeleteAllOf(ctx context.Context, project string, k eim.Kind, limit int) (done, left int, err error) {
	if err := checkProject(project); err != nil {
		return 0, 0, err
	}
	if eim.SchemaOf(k) == nil {
		return 0, 0, eim.Errorf(eim.EINVALID, "unknown kind %q", k)
	}
	err = s.store.Update(ctx, project, func(tx eim.Tx) error {
		done, left = 0, 0
		// A batch reads only what it deletes: those of a two-phase kind not
		// being deleted yet.
		q := eim.Query{Limit: limit, NoTotal: true}
		switch k {
		case eim.KindHost:
			q.Where = []eim.Cond{{Field: "desiredState", Value: statesBut(eim.HostState("").Values(), string(eim.HostStateDeleted))}}
		case eim.KindInstance:
			q.Where = []eim.Cond{{Field: "desiredState", Value: statesBut(eim.InstanceState("").Values(), string(eim.InstanceStateDeleted))}}
		}
		items, _, err := tx.List(ctx, k, q)
		if err != nil {
			return err
		}
		if k == eim.KindRegion && len(items) > 0 {
			if err := cutChildren(ctx, tx, items); err != nil {
				return err
			}
		}
		for _, r := range items {
			switch r := r.(type) {
			case *eim.Host:
				if err := s.deleteHost(ctx, tx, r); err != nil {
					return fmt.Errorf("host %s: %w", r.ResourceID, err)
				}
			case *eim.Instance:
				if err := s.setInstanceState(ctx, tx, r, eim.InstanceStateDeleted); err != nil {
					return fmt.Errorf("instance %s: %w", r.ResourceID, err)
				}
			default:
				if err := tx.Delete(ctx, k, r.Base().ResourceID); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
					return fmt.Errorf("%s %s: %w", k, r.Base().ResourceID, err)
				}
			}
			done++
		}
		left, err = tx.Count(ctx, k, eim.Query{})
		return err
	})
	return done, left, err
}

// statesBut returns the values of an enum but one, and "" (unset).
func statesBut(values []string, but string) []string {
	out := []string{""}
	for _, v := range values {
		if v != but {
			out = append(out, v)
		}
	}
	return out
}

// cutChildren cuts the link of the children of regions to them: children
// before parents would need an order, cutting the links none.
func cutChildren(ctx context.Context, tx eim.Tx, regions []eim.Resource) error {
	ids := make([]string, len(regions))
	for i, r := range regions {
		ids[i] = r.Base().ResourceID
	}
	children, _, err := tx.List(ctx, eim.KindRegion, eim.Query{Where: []eim.Cond{{Field: "parentId", Value: ids}}, NoTotal: true})
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := tx.UpdateFields(ctx, &eim.Region{Meta: eim.Meta{ResourceID: c.Base().ResourceID}}, "parentId"); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
	}
	return nil
}

// EnsureDefaultProvider creates the project's default provider
// (DefaultProviderName, showing its settings) when it has none, and
// returns its ID.
func (s *Service) EnsureDefaultProvider(ctx context.Context, project string) (string, error) {
	p, err := s.store.FindProject(ctx, project)
	if err != nil {
		return "", err
	}
	if err := s.syncDefaultProvider(ctx, project, p.Settings); err != nil {
		return "", err
	}
	return s.FindDefaultProvider(ctx, project)
}

// FindDefaultProvider returns the ID of the project's default provider,
// or "" when it has none.
func (s *Service) FindDefaultProvider(ctx context.Context, project string) (string, error) {
	id := ""
	err := s.store.View(ctx, project, func(tx eim.Tx) error {
		items, _, err := tx.List(ctx, eim.KindProvider, eim.Query{Where: []eim.Cond{{Field: "name", Value: DefaultProviderName}}, Limit: 1, NoTotal: true})
		if err == nil && len(items) == 1 {
			id = items[0].Base().ResourceID
		}
		return err
	})
	return id, err
}

// FollowTelemetryGroup writes g's name, collector kind and inputs over the
// project's telemetry group id (of g's type) if unchanged says the group
// is still as it was written, and reports whether it wrote: a default
// following its definition without undoing a user's change, also one
// made meanwhile (the write is made over the version read). A group gone
// is not an error (false).
func (s *Service) FollowTelemetryGroup(ctx context.Context, project, id string, unchanged func(*eim.TelemetryGroup) bool, g *eim.TelemetryGroup) (bool, error) {
	if err := checkProject(project); err != nil {
		return false, err
	}
	if err := checkKindID(eim.KindTelemetryGroup, id); err != nil {
		return false, err
	}
	wrote := false
	err := s.store.Update(ctx, project, func(tx eim.Tx) error {
		wrote = false
		r, err := tx.Get(ctx, eim.KindTelemetryGroup, id)
		if err != nil {
			return err
		}
		cur := r.(*eim.TelemetryGroup)
		if cur.Type != g.Type || !unchanged(cur) {
			return nil
		}
		nr := clone(cur)
		nr.Name, nr.CollectorKind, nr.Groups = g.Name, g.CollectorKind, slices.Clone(g.Groups)
		if err := eim.Validate(nr); err != nil {
			return err
		}
		normalizeEnums(nr)
		if err := tx.Update(ctx, nr); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return false, nil
	}
	return wrote, err
}
