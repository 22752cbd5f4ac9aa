package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The audit log: a project's records newest first, selected by an AIP-160
// filter over resourceId, kind, principal, action, time and seq (checked
// as the API checks it: the same inventory call), paged, each with the
// fields it wrote, old → new. Live like the other pages: the change feed
// says when to fetch the page again.

type auditData struct {
	Filter, FilterError string
	Rows                []auditRow
	Total               int
	Offset              int
	Prev, Next          string
	Examples            []string
}

type auditRow struct {
	Time, Principal, Action string
	Kind, ResourceID, Link  string
	PrincipalFilter         string // a link to the records of the principal
	ResourceFilter          string // … of the resource
	Changes                 []auditChange
}

type auditChange struct{ Field, Old, New string }

const auditPageSize = 50

func (h *Handler) audit(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	d := &auditData{Filter: q.Get("filter"), Examples: []string{
		`principal="user:*"`, `action="DELETED"`, `kind="host" AND time>="2026-01-01T00:00:00Z"`,
	}}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > inventory.MaxOffset {
			return eim.Errorf(eim.EINVALID, "offset: want 0 to %d", inventory.MaxOffset)
		}
		d.Offset = n
	}
	recs, total, err := h.inv.Audit(r.Context(), c.project.Name, inventory.AuditQuery{Filter: d.Filter, PageSize: auditPageSize, Offset: d.Offset})
	status := http.StatusOK
	switch {
	case err == nil:
	case eim.ErrorCode(err) == eim.EINVALID:
		d.FilterError, status = eim.ErrorMessage(err), http.StatusBadRequest
	default:
		return err
	}
	d.Total = total
	base := "/ui/p/" + url.PathEscape(c.project.Name) + "/audit"
	link := func(filter string, offset int) string {
		v := url.Values{}
		if filter != "" {
			v.Set("filter", filter)
		}
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		if len(v) == 0 {
			return base
		}
		return base + "?" + v.Encode()
	}
	for _, rec := range recs {
		row := auditRow{Time: eimTime(rec.Time), Principal: rec.Principal, Action: rec.Action, Kind: string(rec.Kind), ResourceID: rec.ResourceID,
			Link:            h.resourceLink(c, rec.Kind, rec.ResourceID, rec.Action),
			PrincipalFilter: link("principal="+strconv.Quote(rec.Principal), 0),
			ResourceFilter:  link("resourceId="+strconv.Quote(rec.ResourceID), 0)}
		names := make([]string, 0, len(rec.Changes))
		for n := range rec.Changes {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			ch := rec.Changes[n]
			row.Changes = append(row.Changes, auditChange{Field: n, Old: jsonText(ch.Old), New: jsonText(ch.New)})
		}
		d.Rows = append(d.Rows, row)
	}
	if d.Offset > 0 {
		d.Prev = link(d.Filter, max(0, d.Offset-auditPageSize))
	}
	if next := d.Offset + len(recs); next < total && next <= inventory.MaxOffset {
		d.Next = link(d.Filter, next)
	}
	v := c.view("audit", "Audit log", d)
	v.Live, v.LiveAll = true, true
	h.render(w, r, status, "audit", v)
	return nil
}

// resourceLink is the page of a resource an audit record names, "" when
// it has none (or is gone).
func (h *Handler) resourceLink(c *call, k eim.Kind, id, action string) string {
	if action == string(eim.OpDeleted) {
		return ""
	}
	p := "/ui/p/" + url.PathEscape(c.project.Name)
	switch k {
	case eim.KindHost:
		return p + "/hosts/" + url.PathEscape(id)
	case eim.KindRegion, eim.KindSite:
		return p + "/locations"
	case eim.KindSingleSchedule, eim.KindRepeatedSchedule:
		return p + "/schedules"
	case "project":
		return p + "/settings"
	}
	if _, ok := resourceKindOf(string(k)); ok {
		return p + "/resources/" + url.PathEscape(string(k)) + "/" + url.PathEscape(id)
	}
	return ""
}

// jsonText is a recorded value as the page shows it: a string without its
// quotes, anything else as compact JSON, "—" for none.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "—"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return `""`
		}
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
