package httpapi

import (
	"net/http"

	"github.com/eimhq/eim"
)

// The generic operations on one kind: list, create, get, replace (PUT),
// patch, delete.

func (h *handler) list(k eim.Kind) http.HandlerFunc {
	plural := eim.SchemaOf(k).Plural
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		q := r.URL.Query()
		lq, err := listQuery(q)
		if err != nil {
			return err
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
		h.writeList(w, plural, page.Items, page.Total, page.HasNext)
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

func (h *handler) create(k eim.Kind) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		res, _, err := h.decodeBody(r, k)
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

func (h *handler) get(k eim.Kind) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		out, err := h.find(r, c, k)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// update serves PUT (replace every writable field) and PATCH (those named
// by fieldMask, or else those present in the body).
func (h *handler) update(k eim.Kind, patch bool) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		id, err := pathID(r, k)
		if err != nil {
			return err
		}
		if k == eim.KindSite && scoped(r) {
			if _, err := h.find(r, c, k); err != nil { // the site must be in the route's region
				return err
			}
		}
		res, present, err := h.decodeBody(r, k)
		if err != nil {
			return err
		}
		res.Base().ResourceID = id
		var fields []string // nil: replace all
		if patch {
			fields = present
			if m := r.URL.Query().Get("fieldMask"); m != "" {
				if fields, err = fieldMask(k, m); err != nil {
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

func (h *handler) remove(k eim.Kind) http.HandlerFunc {
	return h.inProject(func(w http.ResponseWriter, r *http.Request, c *call) error {
		id, err := pathID(r, k)
		if err != nil {
			return err
		}
		if k == eim.KindSite && scoped(r) {
			if _, err := h.find(r, c, k); err != nil {
				return err
			}
		}
		if err := h.inv.Delete(r.Context(), c.project, k, id); err != nil {
			return err
		}
		h.writeEmpty(w)
		return nil
	})
}

// find reads the resource named by the path. A site reached under a region
// (path or ?regionId) must belong to it.
func (h *handler) find(r *http.Request, c *call, k eim.Kind) (eim.Resource, error) {
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
	res, err := h.inv.Get(r.Context(), c.project, k, id)
	if err != nil {
		return nil, err
	}
	if s, ok := res.(*eim.Site); ok && region != "" && s.RegionID != region {
		return nil, eim.Errorf(eim.ENOTFOUND, "site %s not found in region %s", id, region)
	}
	return res, nil
}

// decodeBody reads and decodes a resource body.
func (h *handler) decodeBody(r *http.Request, k eim.Kind) (eim.Resource, []string, error) {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return nil, nil, err
	}
	return decodeResource(k, buf.Bytes())
}

func pathID(r *http.Request, k eim.Kind) (string, error) {
	id := r.PathValue("resourceId")
	return id, eim.CheckID(k, "resourceId", id)
}

// regionScope returns the region a site route is scoped to: the path's
// {regionId} or the ?regionId query parameter; "" when neither is given.
func regionScope(r *http.Request) (string, error) {
	id := r.PathValue("regionId")
	if id == "" {
		id = r.URL.Query().Get("regionId")
	}
	if id == "" {
		return "", nil
	}
	return id, eim.CheckID(eim.KindRegion, "regionId", id)
}

// scoped reports whether a site route names a region.
func scoped(r *http.Request) bool {
	return r.PathValue("regionId") != "" || r.URL.Query().Has("regionId")
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
