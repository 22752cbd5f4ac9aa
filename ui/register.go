package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

type registerData struct {
	Sites []*eim.Site
	OSes  []*eim.OS
	Form  url.Values
	Error string
	Done  string // the host registered by the form
	CSV   *csvOutcome
}

func (h *Handler) registerData(r *http.Request, c *call) (*registerData, error) {
	proj := c.project.Name
	d := &registerData{Form: url.Values{}}
	sites, _, err := listAll[*eim.Site](r, h.inv, proj, eim.KindSite)
	if err != nil {
		return nil, err
	}
	oses, _, err := listAll[*eim.OS](r, h.inv, proj, eim.KindOS)
	if err != nil {
		return nil, err
	}
	d.Sites, d.OSes = sites, oses
	return d, nil
}

func (h *Handler) registerPage(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.registerData(r, c)
	if err != nil {
		return err
	}
	d.Done = r.URL.Query().Get("registered")
	h.page(w, r, c, "register", "Register hosts", d)
	return nil
}

// registerOne registers one host from the form: the registration, then
// its site, then its instance. A refused later step leaves the host
// registered and says so.
func (h *Handler) registerOne(w http.ResponseWriter, r *http.Request, c *call) error {
	proj := c.project.Name
	f := r.PostForm
	reg := inventory.HostRegistration{
		Name: strings.TrimSpace(f.Get("name")), SerialNumber: strings.TrimSpace(f.Get("serial")),
		UUID: strings.TrimSpace(f.Get("uuid")), AutoOnboard: f.Get("autoOnboard") != "",
	}
	site, osID := f.Get("site"), f.Get("os")
	fail := func(err error) error {
		if statusOf(err) == http.StatusInternalServerError {
			return err
		}
		d, derr := h.registerData(r, c)
		if derr != nil {
			return derr
		}
		d.Form, d.Error = f, eim.ErrorMessage(err)
		c.projects = h.readableProjects(r, c.p)
		h.render(w, r, statusOf(err), "register", c.view("register", "Register hosts", d))
		return nil
	}
	if reg.SerialNumber == "" && reg.UUID == "" {
		return fail(eim.Errorf(eim.EINVALID, "give a serial number, a UUID, or both"))
	}
	if site != "" && !eim.ValidID(eim.KindSite, site) {
		return fail(eim.Errorf(eim.EINVALID, "site: %q is not a site ID", site))
	}
	if osID != "" && !eim.ValidID(eim.KindOS, osID) {
		return fail(eim.Errorf(eim.EINVALID, "OS profile: %q is not an OS resource ID", osID))
	}
	hostID, err := h.apiRegister(r, c, reg)
	if err != nil {
		return fail(err)
	}
	if site != "" {
		if err := h.apiPatch(r, c, "/compute/hosts/"+url.PathEscape(hostID), &eim.Host{SiteID: site}, "siteId"); err != nil {
			return fail(eim.Errorf(eim.ErrorCode(err), "host %s is registered, but its site was refused: %s", hostID, eim.ErrorMessage(err)))
		}
	}
	if osID != "" {
		in := &eim.Instance{Kind: eim.InstanceKindMetal, Name: firstNonEmpty(reg.Name, reg.SerialNumber, strings.ToLower(reg.UUID)), HostID: hostID, OSID: osID}
		if _, err := h.apiCreate(r, c, "/compute/instances", in, "kind", "name", "hostID", "osID"); err != nil {
			return fail(eim.Errorf(eim.ErrorCode(err), "host %s is registered, but its instance was refused: %s", hostID, eim.ErrorMessage(err)))
		}
	}
	http.Redirect(w, r, "/ui/p/"+url.PathEscape(proj)+"/register?registered="+url.QueryEscape(hostID), http.StatusSeeOther)
	return nil
}

// apiRegister registers a host through the API and returns its ID.
func (h *Handler) apiRegister(r *http.Request, c *call, reg inventory.HostRegistration) (string, error) {
	body := map[string]any{"name": reg.Name, "autoOnboard": reg.AutoOnboard}
	if reg.SerialNumber != "" {
		body["serialNumber"] = reg.SerialNumber
	}
	if reg.UUID != "" {
		body["uuid"] = reg.UUID
	}
	if reg.EnableVpro {
		body["enableVpro"] = true
	}
	if reg.UserLvmSize != 0 {
		body["userLvmSize"] = reg.UserLvmSize
	}
	var out struct {
		ResourceID string `json:"resourceId"`
	}
	if err := h.apiCall(r.Context(), r, c, http.MethodPost, "/compute/hosts/register", body, &out); err != nil {
		return "", err
	}
	return out.ResourceID, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
