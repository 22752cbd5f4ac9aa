package httpapi

import (
	"net/http"
	"strings"

	"github.com/eimhq/eim"
)

// The generic operations on one API type: list, create, get, replace
// (PUT), patch, delete.

// apiType is what a route serves: a kind, or one variant of a kind that
// holds several API types (the telemetry groups and profiles, see
// eim.Variants).
type apiType struct {
	kind    eim.Kind
	variant string // "" for a kind without variants
	plural  string // the name of the list in list answers
}

func kindType(k eim.Kind) apiType { return apiType{kind: k, plural: eim.SchemaOf(k).Plural} }

func variantType(v eim.Variant) apiType {
	return apiType{kind: v.Kind, variant: v.Value, plural: v.Plural}
}

func (h *handler) list(t apiType) http.HandlerFunc {
	k := t.kind
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		q := r.URL.Query()
		lq, err := listQuery(q)
		if err != nil {
			return err
		}
		if t.variant != "" {
			// The original's lists of these types take no filter:
			// ignored, as unknown parameters are.
			lq.Filter, lq.Variant = "", t.variant
		}
		if k == eim.KindSite {
			region, err := regionScope(r)
			if err != nil {
				return err
			}
			if region != "" {
				lq.Where = append(lq.Where, eim.Cond{Field: "regionId", Value: region})
			}
		}
		page, err := h.inv.List(r.Context(), c.project, k, lq)
		if err != nil {
			return err
		}
		h.writeList(w, t.plural, page.Items, page.Total, page.HasNext)
		return nil
	})
}

func (h *handler) listSchedulesOf(k eim.Kind) http.HandlerFunc {
	plural := eim.SchemaOf(k).Plural
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		sq, err := scheduleQuery(r.URL.Query())
		if err != nil {
			return err
		}
		page, err := h.inv.ListSchedulesOf(r.Context(), c.project, k, sq)
		if err != nil {
			return err
		}
		h.writeList(w, plural, page.Items, page.Total, page.HasNext)
		return nil
	})
}

func (h *handler) create(t apiType) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		res, _, err := h.decodeBody(r, t)
		if err != nil {
			return err
		}
		if s, ok := res.(*eim.Site); ok {
			if err := setSiteRegion(r, s); err != nil {
				return err
			}
		}
		out, err := h.inv.Create(r.Context(), c.project, res)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (h *handler) get(t apiType) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		out, err := h.find(r, c, t)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// update serves PUT (replace every writable field) and PATCH (those named
// by fieldMask, or else those present in the body).
func (h *handler) update(t apiType, patch bool) http.HandlerFunc {
	k := t.kind
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		id, err := pathID(r, k)
		if err != nil {
			return err
		}
		if k == eim.KindSite && scoped(r) {
			if _, err := h.find(r, c, t); err != nil { // the site must be in the route's region
				return err
			}
		}
		res, present, err := h.decodeBody(r, t)
		if err != nil {
			return err
		}
		res.Base().ResourceID = id
		var fields []string // nil: replace all
		if patch {
			fields = present
			if m := r.URL.Query().Get("fieldMask"); m != "" {
				if fields, err = fieldMask(t.kind, t.variant, m); err != nil {
					return err
				}
			}
		} else if s, ok := res.(*eim.Site); ok {
			if err := setSiteRegion(r, s); err != nil {
				return err
			}
		}
		out, err := h.inv.Update(r.Context(), c.project, res, fields)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func (h *handler) remove(t apiType) http.HandlerFunc {
	k := t.kind
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		id, err := pathID(r, k)
		if err != nil {
			return err
		}
		if k == eim.KindSite && scoped(r) {
			if _, err := h.find(r, c, t); err != nil {
				return err
			}
		}
		if err := h.inv.DeleteVariant(r.Context(), c.project, k, t.variant, id); err != nil {
			return err
		}
		h.writeEmpty(w)
		return nil
	})
}

// find reads the resource named by the path. A site reached under a region
// (path or ?regionId) must belong to it; a resource of another variant than
// the route's is not found.
func (h *handler) find(r *http.Request, c *call, t apiType) (eim.Resource, error) {
	k := t.kind
	id, err := pathID(r, k)
	if err != nil {
		return nil, err
	}
	var region string
	if k == eim.KindSite {
		if region, err = regionScope(r); err != nil {
			return nil, err
		}
	}
	res, err := h.inv.GetVariant(r.Context(), c.project, k, t.variant, id)
	if err != nil {
		return nil, err
	}
	if s, ok := res.(*eim.Site); ok && region != "" && s.RegionID != region {
		return nil, eim.Errorf(eim.ENOTFOUND, "site %s not found in region %s", id, region)
	}
	return res, nil
}

// decodeBody reads and decodes a resource body.
func (h *handler) decodeBody(r *http.Request, t apiType) (eim.Resource, []string, error) {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return nil, nil, err
	}
	return decodeResource(t.kind, t.variant, buf.Bytes())
}

func pathID(r *http.Request, k eim.Kind) (string, error) {
	id := r.PathValue("resourceId")
	return id, checkPathID(k, "resourceId", id)
}

// checkPathID checks an ID in the path as the original did: it read the
// kind from the prefix alone, so a known prefix with a malformed tail
// (inst-XXXXXXXX) names no resource, 404, while another prefix is a 400.
func checkPathID(k eim.Kind, field, id string) error {
	if eim.ValidID(k, id) {
		return nil
	}
	if strings.HasPrefix(id, string(k)+"-") {
		return eim.Errorf(eim.ENOTFOUND, "%s: %s not found", field, clip(id))
	}
	return eim.CheckID(k, field, id)
}

// clip shortens a value echoed in an error message.
func clip(s string) string {
	const most = 40
	if len(s) <= most {
		return s
	}
	return strings.ToValidUTF8(s[:most], "") + "…"
}

// anyRegion is the regionId that scopes a site route to no region: the
// original's web UI asks /regions/*/sites/{id} for a site whose region it
// does not know, and the original never read regionId on its site
// operations.
const anyRegion = "*"

// regionScope returns the region a site route is scoped to: the path's
// {regionId} or the ?regionId query parameter; "" when neither is given or
// it is anyRegion.
func regionScope(r *http.Request) (string, error) {
	if id := r.PathValue("regionId"); id != "" {
		if id == anyRegion {
			return "", nil
		}
		return id, checkPathID(eim.KindRegion, "regionId", id)
	}
	id := r.URL.Query().Get("regionId")
	if id == "" || id == anyRegion {
		return "", nil
	}
	return id, eim.CheckID(eim.KindRegion, "regionId", id)
}

// scoped reports whether a site route names a region.
func scoped(r *http.Request) bool {
	if id := r.PathValue("regionId"); id != "" {
		return id != anyRegion
	}
	q := r.URL.Query()
	return q.Has("regionId") && q.Get("regionId") != anyRegion
}

// setSiteRegion applies the route's region to a site being written: it
// fills an absent regionId and rejects a different one.
func setSiteRegion(r *http.Request, s *eim.Site) error {
	region, err := regionScope(r)
	if err != nil || region == "" {
		return err
	}
	switch s.RegionID {
	case "":
		s.RegionID = region
	case region:
	default:
		return eim.Errorf(eim.EINVALID, "regionId: body has %s but the request names region %s", s.RegionID, region)
	}
	return nil
}
