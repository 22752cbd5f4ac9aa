package ui

import (
	"net/http"
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

func (h *Handler) bulkOne(r *http.Request, c *call, action, id, reason, site string, power eim.PowerState) error {
	ctx := r.Context()
	proj := c.project.Name
	switch action {
	case "onboard":
		return h.inv.OnboardHost(ctx, proj, id)
	case "invalidate":
		return h.inv.InvalidateHost(ctx, proj, id, reason)
	case "delete":
		return h.inv.Delete(ctx, proj, eim.KindHost, id)
	case "site":
		_, err := h.inv.Update(ctx, proj, &eim.Host{Meta: eim.Meta{ResourceID: id}, SiteID: site}, []string{"siteId"})
		return err
	case "power":
		_, err := h.inv.Update(ctx, proj, &eim.Host{Meta: eim.Meta{ResourceID: id}, DesiredPowerState: power}, []string{"desiredPowerState"})
		return err
	case "reprovision":
		return h.reprovisionHost(r, c, id)
	}
	return eim.Errorf(eim.EINVALID, "unknown action %q", action)
}

// reprovisionHost retries the failed provisioning of the host's instance.
func (h *Handler) reprovisionHost(r *http.Request, c *call, hostID string) error {
	if h.reprov == nil {
		return eim.Errorf(eim.EUNAVAILABLE, "provisioning is not running on this server")
	}
	res, err := h.inv.Get(r.Context(), c.project.Name, eim.KindHost, hostID)
	if err != nil {
		return err
	}
	host := res.(*eim.Host)
	if host.Instance == nil {
		return eim.Errorf(eim.EPRECONDITION, "host %s has no instance to provision", hostID)
	}
	_, err = h.reprov.Reprovision(r.Context(), c.project.Name, host.Instance.ResourceID, c.p.Subject)
	return err
}
