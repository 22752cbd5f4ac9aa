package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
)

// A host's BMC and its power jobs (docs/oob.md), read and written through
// the oob module's API (…/hosts/{hostId}/bmc), called in process with the
// session's token. The BMC's password is write-only: the API never
// answers it, the form never shows it, and an empty password field keeps
// the stored one.

// bmcData is the host page's BMC section.
type bmcData struct {
	BMC  *eim.BMCView // nil: the host has none
	Jobs []*eim.PowerJobView
	// Note says why the section could not be read ("" it was).
	Note string
	// Form is the set form's values (the stored BMC's, or what was sent
	// and refused with Err, for the form named by ErrForm).
	Form         eim.BMCInput
	Err, ErrForm string
	Protocols    []string
	PowerActions []powerAction
}

type powerAction struct{ Value, Label string }

var powerActions = []powerAction{
	{string(eim.PowerStateOn), "Power on"},
	{string(eim.PowerStateOff), "Power off"},
	{string(eim.PowerStateReset), "Reset"},
	{string(eim.PowerStatePowerCycle), "Power cycle"},
}

// bmcOf reads the host's BMC and its latest power jobs; a failure is the
// section's note, not the page's.
func (h *Handler) bmcOf(r *http.Request, c *call, hostID string) *bmcData {
	d := &bmcData{Protocols: []string{string(eim.BMCRedfish), string(eim.BMCIPMI), string(eim.BMCAMT)}, PowerActions: powerActions}
	base := "/compute/hosts/" + url.PathEscape(hostID) + "/bmc"
	var v eim.BMCView
	err := h.apiCall(r.Context(), r, c, http.MethodGet, base, nil, &v)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		d.Form.Protocol = string(eim.BMCRedfish)
		return d
	case err != nil:
		d.Note = eim.ErrorMessage(err)
		return d
	}
	d.BMC = &v
	d.Form = eim.BMCInput{Protocol: v.Protocol, Address: v.Address, SystemID: v.SystemID, Username: v.Username, CACert: v.CACert, Insecure: v.Insecure}
	var jobs eim.PowerJobList
	if err := h.apiCall(r.Context(), r, c, http.MethodGet, base+"/jobs?pageSize=10", nil, &jobs); err != nil {
		d.Note = "power jobs: " + eim.ErrorMessage(err)
		return d
	}
	d.Jobs = jobs.Jobs
	return d
}

// setBMC creates or replaces the host's BMC from the form.
func (h *Handler) setBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return err
	}
	in := eim.BMCInput{Protocol: r.PostFormValue("protocol"), Address: strings.TrimSpace(r.PostFormValue("address")),
		SystemID: strings.TrimSpace(r.PostFormValue("systemId")), Username: r.PostFormValue("username"),
		CACert: strings.TrimSpace(r.PostFormValue("caCert")), Insecure: r.PostFormValue("insecure") != ""}
	if pw := r.PostFormValue("password"); pw != "" {
		in.Password = &pw
	}
	err := h.apiCall(r.Context(), r, c, http.MethodPut, "/compute/hosts/"+url.PathEscape(id)+"/bmc", in, nil)
	if err != nil {
		in.Password = nil // never sent back to the browser
		return h.hostFormError(w, r, c, id, "bmc", in, err)
	}
	http.Redirect(w, r, hostURL(c.project.Name, id)+"?bmc=saved#bmc", http.StatusSeeOther)
	return nil
}

func (h *Handler) deleteBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return err
	}
	if err := h.apiCall(r.Context(), r, c, http.MethodDelete, "/compute/hosts/"+url.PathEscape(id)+"/bmc", nil, nil); err != nil {
		return h.hostFormError(w, r, c, id, "bmcdelete", eim.BMCInput{}, err)
	}
	http.Redirect(w, r, hostURL(c.project.Name, id)+"?bmc=removed#bmc", http.StatusSeeOther)
	return nil
}

// powerJob asks the host's BMC for a power change (a power job).
func (h *Handler) powerJob(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return err
	}
	body := map[string]string{"desiredPowerState": r.PostFormValue("desiredPowerState")}
	if err := h.apiCall(r.Context(), r, c, http.MethodPost, "/compute/hosts/"+url.PathEscape(id)+"/bmc/jobs", body, nil); err != nil {
		return h.hostFormError(w, r, c, id, "power", eim.BMCInput{}, err)
	}
	http.Redirect(w, r, hostURL(c.project.Name, id)+"?bmc=power#bmc", http.StatusSeeOther)
	return nil
}

// hostFormError shows the host page again with the API's error beside the
// form that was sent (form: bmc, bmcdelete, power), what was typed kept.
func (h *Handler) hostFormError(w http.ResponseWriter, r *http.Request, c *call, id, form string, in eim.BMCInput, apiErr error) error {
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	d, err := h.hostData(r, c, id)
	if err != nil {
		return err
	}
	if d.BMC == nil {
		d.BMC = &bmcData{}
	}
	d.BMC.Err, d.BMC.ErrForm = eim.ErrorMessage(apiErr), form
	if form == "bmc" {
		d.BMC.Form = in
	}
	c.projects = h.readableProjects(r, c.p)
	h.render(w, r, statusOf(apiErr), "host", c.view("hosts", "Host "+d.Host.Name, d))
	return nil
}
