package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/eimhq/eim"
)

// Bulk actions on the hosts selected in the list, each host on its own:
// one refused host does not stop the others, and the answer lists what
// happened to each.

// maxBulk is the most hosts one action takes: a page of the list.
const maxBulk = 100

type bulkResult struct {
	ID, Link, Outcome string
	OK                bool
}

type bulkData struct {
	Action  string
	Results []bulkResult
	Back    string
	Failed  int
}

var bulkActions = map[string]string{
	"onboard": "Onboard", "invalidate": "Invalidate", "delete": "Delete",
	"site": "Set site", "reprovision": "Reprovision", "power": "Power action",
}

func (h *Handler) bulk(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	proj := c.project.Name
	action := r.PostFormValue("action")
	ids := r.PostForm["id"]
	if _, ok := bulkActions[action]; !ok {
		return eim.Errorf(eim.EINVALID, "action: choose one of onboard, invalidate, delete, set site, reprovision, power action")
	}
	if len(ids) == 0 {
		return eim.Errorf(eim.EINVALID, "select at least one host")
	}
	if len(ids) > maxBulk {
		return eim.Errorf(eim.EINVALID, "at most %d hosts at once", maxBulk)
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	site := r.PostFormValue("site")
	power := eim.PowerState(r.PostFormValue("power"))
	switch action {
	case "invalidate":
		if reason == "" {
			return eim.Errorf(eim.EINVALID, "reason: say why the hosts are invalidated (it is kept in their note)")
		}
	case "site":
		if site != "" && !eim.ValidID(eim.KindSite, site) {
			return eim.Errorf(eim.EINVALID, "site: %q is not a site ID", site)
		}
	case "power":
		switch power {
		case eim.PowerStateOn, eim.PowerStateOff, eim.PowerStateReset, eim.PowerStatePowerCycle:
		default:
			return eim.Errorf(eim.EINVALID, "power: choose on, off, reset or power cycle")
		}
	}
	d := &bulkData{Action: bulkActions[action], Back: r.PostFormValue("back")}
	if safeNext(d.Back) == "" {
		d.Back = hostsURL(proj, nil)
	}
	for _, id := range ids {
		err := eim.CheckID(eim.KindHost, "id", id)
		if err == nil {
			err = h.bulkOne(r, c, action, id, reason, site, power)
		}
		res := bulkResult{ID: id, Link: hostURL(proj, id), OK: err == nil, Outcome: "done"}
		if err != nil {
			res.Outcome = eim.ErrorMessage(err)
			if statusOf(err) == http.StatusInternalServerError {
				h.log.Error("ui: bulk action", "action", action, "host", id, "error", err)
				res.Outcome = "failed on the server; it has been logged"
			}
			d.Failed++
		}
		d.Results = append(d.Results, res)
		if ctx.Err() != nil {
			break
		}
	}
	h.page(w, r, c, "bulk", d.Action+": results", d)
	return nil
}

// bulkOne applies action to one host through the API, as any client
// would: the API's checks and audit records apply to each host.
func (h *Handler) bulkOne(r *http.Request, c *call, action, id, reason, site string, power eim.PowerState) error {
	ctx := r.Context()
	path := "/compute/hosts/" + url.PathEscape(id)
	switch action {
	case "onboard":
		return h.apiCall(ctx, r, c, http.MethodPatch, path+"/onboard", nil, nil)
	case "invalidate":
		return h.apiCall(ctx, r, c, http.MethodPut, path+"/invalidate?note="+url.QueryEscape(reason), nil, nil)
	case "delete":
		return h.apiCall(ctx, r, c, http.MethodDelete, path, nil, nil)
	case "site":
		return h.apiPatch(r, c, path, &eim.Host{SiteID: site}, "siteId")
	case "power":
		return h.apiPatch(r, c, path, &eim.Host{DesiredPowerState: power}, "desiredPowerState")
	case "reprovision":
		return h.reprovisionHost(r, c, id)
	}
	return eim.Errorf(eim.EINVALID, "unknown action %q", action)
}

// reprovisionHost retries the failed provisioning of the host's instance
// through the API.
func (h *Handler) reprovisionHost(r *http.Request, c *call, hostID string) error {
	var host struct {
		Instance *struct {
			ResourceID string `json:"resourceId"`
		} `json:"instance"`
	}
	if err := h.apiCall(r.Context(), r, c, http.MethodGet, "/compute/hosts/"+url.PathEscape(hostID), nil, &host); err != nil {
		return err
	}
	if host.Instance == nil || host.Instance.ResourceID == "" {
		return eim.Errorf(eim.EPRECONDITION, "host %s has no instance to provision", hostID)
	}
	return h.apiCall(r.Context(), r, c, http.MethodPost, "/compute/instances/"+url.PathEscape(host.Instance.ResourceID)+"/reprovision", struct{}{}, nil)
}
