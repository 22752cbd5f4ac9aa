package inventory

import (
	"context"
	"fmt"

	"github.com/eimhq/eim"
)

// The writes of a project's deletion (the tenant module's cascade): each
// call does a bounded batch in one transaction and says how much is left,
// so that a cascade is resumable at any point and never holds the writer
// for long (another project's writes go between its batches).

// RevokeNodeCredentials revokes the node credentials of up to limit
// hosts of the project that still have some (the secret cleared, the
// generation bumped, as an invalidation does), so that their nodes are
// refused at once; it returns how many it revoked and how many hosts
// still have credentials.
func (s *Service) RevokeNodeCredentials(ctx context.Context, project string, limit int) (done, left int, err error) {
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
			if h.NodeSecretHash == "" {
				continue
			}
			if done == limit {
				left++
				continue
			}
			w := &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, NodeCredGen: h.NodeCredGen + 1}
			// Over the credentials read: new ones issued meanwhile run this
			// again.
			if err := tx.UpdateFieldsIf(ctx, w, []eim.Cond{{Field: "node_cred_gen", Value: h.NodeCredGen}}, "node_secret_hash", "node_cred_gen"); err != nil {
				return err
			}
			done++
		}
		return nil
	})
	return done, left, err
}

// DeleteAllOf deletes up to limit resources of kind k in the project and
// returns how many it deleted and how many are left. Hosts and instances are deleted in two
// phases, as by Delete: their desired state becomes DELETED and a manager
// (the reaper) removes them; what is left counts them until it has.
// Regions lose their parent first. The cascade's order keeps every other
// reference out of the way; one that is not fails the call.
func (s *Service) DeleteAllOf(ctx context.Context, project string, k eim.Kind, limit int) (done, left int, err error) {
	if err := checkProject(project); err != nil {
		return 0, 0, err
	}
	if eim.SchemaOf(k) == nil {
		return 0, 0, eim.Errorf(eim.EINVALID, "unknown kind %q", k)
	}
	err = s.store.Update(ctx, project, func(tx eim.Tx) error {
		done, left = 0, 0
		items, _, err := tx.List(ctx, k, eim.Query{NoTotal: true})
		if err != nil {
			return err
		}
		// Regions lose their parents first: children before parents would
		// need an order, cutting the links none.
		for _, r := range items {
			if reg, ok := r.(*eim.Region); ok && reg.ParentID != "" && done < limit {
				if err := tx.UpdateFields(ctx, &eim.Region{Meta: eim.Meta{ResourceID: reg.ResourceID}}, "parentId"); err != nil {
					return err
				}
				reg.ParentID = ""
			}
		}
		for _, r := range items {
			switch r := r.(type) {
			case *eim.Host:
				left++
				if r.DesiredState == eim.HostStateDeleted || done == limit {
					continue
				}
				if err := s.deleteHost(ctx, tx, r); err != nil {
					return fmt.Errorf("host %s: %w", r.ResourceID, err)
				}
				done++
				continue
			case *eim.Instance:
				left++
				if r.DesiredState == eim.InstanceStateDeleted || done == limit {
					continue
				}
				if err := s.setInstanceState(ctx, tx, r, eim.InstanceStateDeleted); err != nil {
					return fmt.Errorf("instance %s: %w", r.ResourceID, err)
				}
				done++
				continue
			}
			if done == limit {
				left++
				continue
			}
			if err := tx.Delete(ctx, k, r.Base().ResourceID); err != nil {
				if eim.ErrorCode(err) == eim.ENOTFOUND {
					continue // gone with what it depended on
				}
				return fmt.Errorf("%s %s: %w", k, r.Base().ResourceID, err)
			}
			done++
		}
		return nil
	})
	return done, left, err
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
