package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The enrollment lobby (docs/enrollment.md): the devices that called home
// with the project's enrollment token and match no host, by state, newest
// first, paged; a writer approves one (a name, a site, labels: its host's
// metadata) or denies it with a reason, and sees the project's
// auto-approval rules.

type lobbyData struct {
	State   string
	States  []string
	Rows    []*eim.EnrollmentRequest
	Total   int
	Offset  int
	Prev    string
	Next    string
	Rules   []*eim.EnrollmentRule
	Sites   []*eim.Site
	NoLobby string // why the lobby cannot be shown ("" it can)
}

const lobbyPageSize = 50

func (h *Handler) lobby(w http.ResponseWriter, r *http.Request, c *call) error {
	d := &lobbyData{States: []string{"", string(eim.EnrollmentPending), string(eim.EnrollmentApproved), string(eim.EnrollmentDenied)}}
	v := c.view("lobby", "Enrollment lobby", d)
	if h.store == nil {
		d.NoLobby = "this process has no store to read the lobby from"
		h.render(w, r, http.StatusOK, "lobby", v)
		return nil
	}
	q := r.URL.Query()
	d.State = strings.ToUpper(q.Get("state"))
	if d.State != "" && !eim.EnrollmentState(d.State).Valid() {
		return eim.Errorf(eim.EINVALID, "state: %q must be PENDING, APPROVED or DENIED", q.Get("state"))
	}
	if s := q.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > inventory.MaxOffset {
			return eim.Errorf(eim.EINVALID, "offset: want 0 to %d", inventory.MaxOffset)
		}
		d.Offset = n
	}
	rows, total, err := h.store.ListEnrollmentRequests(r.Context(), c.project.Name, eim.EnrollmentQuery{State: eim.EnrollmentState(d.State), Limit: lobbyPageSize, Offset: d.Offset})
	if err != nil {
		return err
	}
	d.Rows, d.Total = rows, total
	base := "/ui/p/" + url.PathEscape(c.project.Name) + "/lobby"
	link := func(offset int) string {
		v := url.Values{}
		if d.State != "" {
			v.Set("state", d.State)
		}
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		if len(v) == 0 {
			return base
		}
		return base + "?" + v.Encode()
	}
	if d.Offset > 0 {
		d.Prev = link(max(0, d.Offset-lobbyPageSize))
	}
	if next := d.Offset + len(rows); next < total {
		d.Next = link(next)
	}
	if d.Rules, err = h.store.ListEnrollmentRules(r.Context(), c.project.Name); err != nil {
		return err
	}
	if c.canWrite {
		page, err := h.inv.List(r.Context(), c.project.Name, eim.KindSite, inventory.ListQuery{OrderBy: "name", PageSize: inventory.MaxPageSize})
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			d.Sites = append(d.Sites, it.(*eim.Site))
		}
	}
	v.Live, v.LiveAll = true, true
	h.render(w, r, http.StatusOK, "lobby", v)
	return nil
}

// decideLobby approves or denies a request (the form's "decision").
func (h *Handler) decideLobby(w http.ResponseWriter, r *http.Request, c *call) error {
	if h.store == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "this process has no store to write the lobby to")
	}
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindEnrollment, "id", id); err != nil {
		return err
	}
	actor := eim.UserActor(c.p.Subject)
	ctx := eim.WithActor(r.Context(), actor)
	switch r.PostFormValue("decision") {
	case "approve":
		a := eim.EnrollmentApproval{Name: strings.TrimSpace(r.PostFormValue("name")), SiteID: r.PostFormValue("site"), Metadata: eim.Metadata{}}
		for i, line := range strings.FieldsFunc(r.PostFormValue("labels"), func(r rune) bool { return r == ',' || r == '\n' }) {
			k, val, ok := strings.Cut(strings.TrimSpace(line), "=")
			if !ok || k == "" {
				return eim.Errorf(eim.EINVALID, "labels[%d]: %q must be key=value", i, strings.TrimSpace(line))
			}
			a.Metadata = append(a.Metadata, eim.MetadataItem{Key: strings.TrimSpace(k), Value: strings.TrimSpace(val)})
		}
		if _, err := inventory.ApproveEnrollment(ctx, h.store, c.project.Name, id, actor, "", a, time.Now()); err != nil {
			return err
		}
	case "deny":
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if len(reason) > eim.MaxEnrollmentReason {
			return eim.Errorf(eim.EINVALID, "reason: at most %d bytes", eim.MaxEnrollmentReason)
		}
		if _, err := h.store.DecideEnrollment(ctx, c.project.Name, id, eim.EnrollmentDecision{State: eim.EnrollmentDenied, By: actor, Reason: reason, At: time.Now()}, nil); err != nil {
			return err
		}
	default:
		return eim.Errorf(eim.EINVALID, "decision: must be approve or deny")
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(c.project.Name)+"/lobby", http.StatusSeeOther)
	return nil
}
