package oscatalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// osTypeImmutable is the type of image-based OSes, updated whole (A/B).
const osTypeImmutable eim.OsType = "OS_TYPE_IMMUTABLE"

// osIndex is what a project's osUpdateAvailable values depend on: its
// immutable OS resources that name a profile and an image version, and
// the newest of each profile and architecture (the OS an update policy
// LATEST installs: see package maintenance).
type osIndex struct {
	byID   map[string]*eim.OS
	newest map[family]*eim.OS
}

// family is what a newer version must share with the OS it replaces.
type family struct{ profile, arch string }

func familyOf(o *eim.OS) family { return family{o.ProfileName, o.Architecture} }

func newIndex(oses []*eim.OS) *osIndex {
	x := &osIndex{byID: map[string]*eim.OS{}, newest: map[family]*eim.OS{}}
	for _, o := range oses {
		if o.OsType != osTypeImmutable || o.ProfileName == "" || o.ImageID == "" {
			continue
		}
		x.byID[o.ResourceID] = o
		f := familyOf(o)
		n := x.newest[f]
		if n == nil {
			x.newest[f] = o
			continue
		}
		// Ties (one version twice) go to the smaller ID, so every pass
		// names the same resource.
		if c := CompareVersions(o.ImageID, n.ImageID); c > 0 || (c == 0 && o.ResourceID < n.ResourceID) {
			x.newest[f] = o
		}
	}
	return x
}

// ids returns the IDs of the indexed OS resources.
func (x *osIndex) ids() []string {
	out := make([]string, 0, len(x.byID))
	for id := range x.byID {
		out = append(out, id)
	}
	return out
}

// want returns what osUpdateAvailable says for an instance on OS osID, and
// whether the catalog decides it at all: only for an immutable OS with a
// profile name and a version. The field of an instance on any other OS
// (a mutable one's available package updates) belongs to other modules.
func (x *osIndex) want(osID string) (string, bool) {
	o := x.byID[osID]
	if o == nil {
		return "", false
	}
	n := x.newest[familyOf(o)]
	if n == nil || n.ResourceID == o.ResourceID || CompareVersions(n.ImageID, o.ImageID) <= 0 {
		return "", true
	}
	return UpdateText(n), true
}

// UpdateText is an instance's osUpdateAvailable when newer is the newest
// version of its OS profile.
func UpdateText(newer *eim.OS) string {
	return fmt.Sprintf("%s (%s) is available: version %s", newer.Name, newer.ResourceID, newer.ImageID)
}

// instanceWriteBatch bounds the instances one transaction rewrites, so a
// new version reaching a large fleet does not hold SQLite's writer long.
const instanceWriteBatch = 200

// updateInstances brings the osUpdateAvailable of the project's instances
// on an indexed OS in line with idx: those of ids, or all when ids is nil.
// It reads only instances on an immutable OS (one query) and writes only
// those whose value changes; it returns how many it wrote.
func (m *Manager) updateInstances(ctx context.Context, project string, idx *osIndex, ids []string) (int, error) {
	if len(idx.byID) == 0 {
		return 0, nil
	}
	where := []eim.Cond{{Field: "osID", Value: idx.ids()}}
	if ids != nil {
		where = append(where, eim.Cond{Field: "resourceId", Value: ids})
	}
	var stale []string
	err := m.store.View(ctx, project, func(tx eim.Tx) error {
		stale = stale[:0]
		items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: where, NoTotal: true})
		if err != nil {
			return err
		}
		for _, r := range items {
			in := r.(*eim.Instance)
			if w, ok := idx.want(in.OSID); ok && in.OsUpdateAvailable != w && in.DesiredState != eim.InstanceStateDeleted {
				stale = append(stale, in.ResourceID)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read instances: %w", err)
	}
	written := 0
	for start := 0; start < len(stale); start += instanceWriteBatch {
		chunk := stale[start:min(start+instanceWriteBatch, len(stale))]
		n := 0
		err := m.store.Update(ctx, project, func(tx eim.Tx) error {
			n = 0
			for _, id := range chunk {
				r, err := tx.Get(ctx, eim.KindInstance, id)
				if eim.ErrorCode(err) == eim.ENOTFOUND {
					continue // deleted meanwhile
				}
				if err != nil {
					return err
				}
				in := r.(*eim.Instance)
				w, ok := idx.want(in.OSID)
				if !ok || in.OsUpdateAvailable == w || in.DesiredState == eim.InstanceStateDeleted {
					continue // changed meanwhile
				}
				if err := inventory.SetOSUpdateAvailable(ctx, tx, in, w); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return written, fmt.Errorf("write osUpdateAvailable of %s: %w", strings.Join(chunk[:min(3, len(chunk))], ", "), err)
		}
		written += n
	}
	return written, nil
}
