package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
)

// Edge workloads (docs/workloads.md): containers the workloads module
// runs on the devices a label selector picks. The pages read and write
// through that module's API (…/edgeworkloads), called in process with the
// session's token as every form is, so its checks (roles, the spec's
// validation, the project's privileged policy) are the ones that apply.

type edgeWorkloadRow struct {
	*eim.EdgeWorkloadView
	Selector string
	Counts   *eim.EdgeWorkloadCounts
	CountErr string
	Link     string
}

type edgeWorkloadsData struct {
	Rows       []edgeWorkloadRow
	Total      int
	Offset     int
	Prev, Next string
	Msg        string
	// Name and Spec are what the apply form was sent (kept when the API
	// refused it), Err the API's answer.
	Name, Spec, Err string
	Warnings        []string
}

const edgeWorkloadsPageSize = 25

func edgeWorkloadsURL(c *call) string {
	return "/ui/p/" + url.PathEscape(c.project.Name) + "/edgeworkloads"
}

func edgeWorkloadURL(c *call, name string) string {
	return edgeWorkloadsURL(c) + "/" + url.PathEscape(name)
}

func needWorkloads(c *call) error {
	if !c.modules["workloads"] {
		return eim.Errorf(eim.ENOTFOUND, "the workloads module does not run in this deployment")
	}
	return nil
}

// selectorText says which devices a spec selects, in words.
func selectorText(s *eim.EdgeWorkloadSpec) string {
	if s.Device != "" {
		return "device " + s.Device
	}
	sel := s.DeviceSelector
	if sel == nil {
		return "—"
	}
	var parts []string
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+sel.MatchLabels[k])
	}
	for _, e := range sel.MatchExpressions {
		p := e.Key + " " + e.Operator
		if len(e.Values) > 0 {
			p += " (" + strings.Join(e.Values, ", ") + ")"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "every device"
	}
	return strings.Join(parts, ", ")
}

func (h *Handler) edgeWorkloadsData(r *http.Request, c *call) (*edgeWorkloadsData, error) {
	if err := needWorkloads(c); err != nil {
		return nil, err
	}
	d := &edgeWorkloadsData{}
	if s := r.URL.Query().Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 10000 {
			return nil, eim.Errorf(eim.EINVALID, "offset: want 0 to 10000")
		}
		d.Offset = n
	}
	var list struct {
		EdgeWorkloads []*eim.EdgeWorkloadView `json:"edgeWorkloads"`
		TotalElements int                     `json:"totalElements"`
		HasNext       bool                    `json:"hasNext"`
	}
	q := url.Values{"pageSize": {strconv.Itoa(edgeWorkloadsPageSize)}, "offset": {strconv.Itoa(d.Offset)}}
	if err := h.apiCall(r.Context(), r, c, http.MethodGet, "/edgeworkloads?"+q.Encode(), nil, &list); err != nil {
		return nil, err
	}
	d.Total = list.TotalElements
	for _, ew := range list.EdgeWorkloads {
		row := edgeWorkloadRow{EdgeWorkloadView: ew, Selector: selectorText(&ew.Spec), Link: edgeWorkloadURL(c, ew.Name)}
		var st eim.EdgeWorkloadStatusView
		if err := h.apiCall(r.Context(), r, c, http.MethodGet, "/edgeworkloads/"+url.PathEscape(ew.Name)+"/status", nil, &st); err != nil {
			row.CountErr = eim.ErrorMessage(err) // the rest of the table stands without it
		} else {
			row.Counts = &st.Devices
		}
		d.Rows = append(d.Rows, row)
	}
	if d.Offset > 0 {
		d.Prev = edgeWorkloadsURL(c) + "?offset=" + strconv.Itoa(max(0, d.Offset-edgeWorkloadsPageSize))
	}
	if list.HasNext {
		d.Next = edgeWorkloadsURL(c) + "?offset=" + strconv.Itoa(d.Offset+len(list.EdgeWorkloads))
	}
	return d, nil
}

func (h *Handler) edgeWorkloads(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.edgeWorkloadsData(r, c)
	if err != nil {
		return err
	}
	if n := r.URL.Query().Get("deleted"); n != "" {
		d.Msg = "Workload " + n + " deleted: its devices remove its pod."
	}
	v := c.view("edgeworkloads", "Edge workloads", d)
	v.Live, v.LiveAll = true, true
	h.render(w, r, http.StatusOK, "edgeworkloads", v)
	return nil
}

// specJSON turns a pasted spec into JSON: JSON as it is, YAML converted.
func specJSON(doc string) (json.RawMessage, error) {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return nil, eim.Errorf(eim.EINVALID, "spec: paste the workload's spec (JSON or YAML)")
	}
	b, err := templateJSON(doc)
	if err != nil {
		// The converter speaks of templates.
		return nil, eim.Errorf(eim.EINVALID, "spec: %s", strings.TrimPrefix(eim.ErrorMessage(err), "template: "))
	}
	return b, nil
}

// applyEdgeWorkload creates the workload of the form (name, spec) or, when
// it exists, replaces its spec (a new revision when it changed).
func (h *Handler) applyEdgeWorkload(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := needWorkloads(c); err != nil {
		return err
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	if p := r.PathValue("name"); p != "" {
		name = p
	}
	doc := r.PostFormValue("spec")
	var out eim.EdgeWorkloadView
	spec, apiErr := specJSON(doc)
	if apiErr == nil && name == "" {
		apiErr = eim.Errorf(eim.EINVALID, "name: required")
	}
	if apiErr == nil {
		body := map[string]any{"name": name, "spec": spec}
		apiErr = h.apiCall(r.Context(), r, c, http.MethodPut, "/edgeworkloads/"+url.PathEscape(name), body, &out)
		if eim.ErrorCode(apiErr) == eim.ENOTFOUND && r.PathValue("name") == "" {
			apiErr = h.apiCall(r.Context(), r, c, http.MethodPost, "/edgeworkloads", body, &out)
		}
	}
	if apiErr == nil {
		q := url.Values{"applied": {strconv.FormatInt(out.Revision, 10)}}
		for _, wr := range out.Warnings {
			q.Add("warning", wr)
		}
		http.Redirect(w, r, edgeWorkloadURL(c, out.Name)+"?"+q.Encode(), http.StatusSeeOther)
		return nil
	}
	if statusOf(apiErr) == http.StatusInternalServerError {
		return apiErr
	}
	c.projects = h.readableProjects(r, c.p)
	if r.PathValue("name") != "" {
		d, err := h.edgeWorkloadData(r, c, name)
		if err != nil {
			return err
		}
		d.Spec, d.Err = doc, eim.ErrorMessage(apiErr)
		h.render(w, r, statusOf(apiErr), "edgeworkload", c.view("edgeworkloads", "Edge workload "+name, d))
		return nil
	}
	d, err := h.edgeWorkloadsData(r, c)
	if err != nil {
		return err
	}
	d.Name, d.Spec, d.Err = name, doc, eim.ErrorMessage(apiErr)
	h.render(w, r, statusOf(apiErr), "edgeworkloads", c.view("edgeworkloads", "Edge workloads", d))
	return nil
}

func (h *Handler) deleteEdgeWorkload(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := needWorkloads(c); err != nil {
		return err
	}
	name := r.PathValue("name")
	if err := h.apiCall(r.Context(), r, c, http.MethodDelete, "/edgeworkloads/"+url.PathEscape(name), nil, nil); err != nil {
		return err
	}
	http.Redirect(w, r, edgeWorkloadsURL(c)+"?deleted="+url.QueryEscape(name), http.StatusSeeOther)
	return nil
}

type edgeRevision struct {
	Revision  int64                `json:"revision"`
	Spec      eim.EdgeWorkloadSpec `json:"spec"`
	CreatedAt eim.Time             `json:"createdAt"`
	Images    string               `json:"-"`
}

type edgeDeviceRow struct {
	eim.EdgeWorkloadDeviceView
	HostName, HostLink string
}

type edgeWorkloadData struct {
	W         *eim.EdgeWorkloadView
	Selector  string
	Images    []string
	Status    *eim.EdgeWorkloadStatusView
	Revisions []edgeRevision
	Devices   []edgeDeviceRow
	// Spec is the apply form's text (the current spec, or what was sent
	// and refused with Err).
	Spec, Err string
	Msg       string
	Warnings  []string
}

func (h *Handler) edgeWorkloadData(r *http.Request, c *call, name string) (*edgeWorkloadData, error) {
	if err := needWorkloads(c); err != nil {
		return nil, err
	}
	if err := eim.CheckEdgeWorkloadName(name); err != nil {
		return nil, eim.Errorf(eim.ENOTFOUND, "edge workload %q not found", name)
	}
	ctx := r.Context()
	base := "/edgeworkloads/" + url.PathEscape(name)
	d := &edgeWorkloadData{W: &eim.EdgeWorkloadView{}, Status: &eim.EdgeWorkloadStatusView{}}
	if err := h.apiCall(ctx, r, c, http.MethodGet, base, nil, d.W); err != nil {
		return nil, err
	}
	d.Selector = selectorText(&d.W.Spec)
	for _, ct := range d.W.Spec.Pod.Spec.Containers {
		d.Images = append(d.Images, ct.Name+": "+ct.Image)
	}
	if err := h.apiCall(ctx, r, c, http.MethodGet, base+"/status", nil, d.Status); err != nil {
		return nil, err
	}
	var revs struct {
		Revisions []edgeRevision `json:"revisions"`
	}
	if err := h.apiCall(ctx, r, c, http.MethodGet, base+"/revisions", nil, &revs); err != nil {
		return nil, err
	}
	d.Revisions = revs.Revisions
	slices.Reverse(d.Revisions) // newest first
	for i := range d.Revisions {
		var imgs []string
		for _, ct := range d.Revisions[i].Spec.Pod.Spec.Containers {
			imgs = append(imgs, ct.Image)
		}
		d.Revisions[i].Images = strings.Join(imgs, ", ")
	}
	var devs struct {
		Devices []eim.EdgeWorkloadDeviceView `json:"devices"`
	}
	if err := h.apiCall(ctx, r, c, http.MethodGet, base+"/devices", nil, &devs); err != nil {
		return nil, err
	}
	for _, dv := range devs.Devices {
		row := edgeDeviceRow{EdgeWorkloadDeviceView: dv, HostName: dv.HostID, HostLink: hostURL(c.project.Name, dv.HostID)}
		if res, err := h.inv.Get(ctx, c.project.Name, eim.KindHost, dv.HostID); err == nil && res.(*eim.Host).Name != "" {
			row.HostName = res.(*eim.Host).Name
		}
		d.Devices = append(d.Devices, row)
	}
	if c.canWrite {
		b, err := json.MarshalIndent(d.W.Spec, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("ui: encode the spec of %s: %w", name, err)
		}
		d.Spec = string(b)
	}
	return d, nil
}

func (h *Handler) edgeWorkload(w http.ResponseWriter, r *http.Request, c *call) error {
	name := r.PathValue("name")
	d, err := h.edgeWorkloadData(r, c, name)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	if rev := q.Get("applied"); rev != "" {
		d.Msg = "Applied: the workload is at revision " + rev + "."
	}
	d.Warnings = q["warning"]
	v := c.view("edgeworkloads", "Edge workload "+name, d)
	v.Live, v.LiveAll = true, true
	h.render(w, r, http.StatusOK, "edgeworkload", v)
	return nil
}

// hostWorkload is one of a device's edge workloads, for the host page.
type hostWorkload struct {
	Name, Link string
	eim.EdgeWorkloadDeviceView
}

// hostWorkloads reads the edge workloads targeted at host id (the store's
// targets, at most 20) and the device's state of each from the API.
func (h *Handler) hostWorkloads(r *http.Request, c *call, id string) ([]hostWorkload, error) {
	if h.store == nil {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "this process has no store to read the device's workloads from")
	}
	ts, err := h.store.EdgeWorkloadTargets(r.Context(), c.project.Name, id)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ts, func(a, b eim.EdgeWorkloadTarget) int { return strings.Compare(a.Workload, b.Workload) })
	var out []hostWorkload
	for _, t := range ts[:min(len(ts), 20)] {
		var devs struct {
			Devices []eim.EdgeWorkloadDeviceView `json:"devices"`
		}
		if err := h.apiCall(r.Context(), r, c, http.MethodGet, "/edgeworkloads/"+url.PathEscape(t.Workload)+"/devices", nil, &devs); err != nil {
			if eim.ErrorCode(err) == eim.ENOTFOUND {
				continue // deleted meanwhile
			}
			return nil, err
		}
		hw := hostWorkload{Name: t.Workload, Link: edgeWorkloadURL(c, t.Workload)}
		hw.TargetRevision = t.Revision
		for _, dv := range devs.Devices {
			if dv.HostID == id {
				hw.EdgeWorkloadDeviceView = dv
			}
		}
		out = append(out, hw)
	}
	return out, nil
}

type edgeLogsData struct {
	Name, Link, HostID, HostLink, Container string
	Tail                                    int
	Log                                     eim.EdgeWorkloadLogView
	Pending                                 bool
}

// edgeWorkloadLogs asks a device for a log tail of the workload's
// containers (the API's …/logs, which waits up to 10 s for the device's
// answer) and shows it; a device that has not answered yet is said so,
// with the request's ID to look again.
func (h *Handler) edgeWorkloadLogs(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := needWorkloads(c); err != nil {
		return err
	}
	name := r.PathValue("name")
	q := r.URL.Query()
	d := &edgeLogsData{Name: name, Link: edgeWorkloadURL(c, name), HostID: q.Get("host"), Container: q.Get("container"), Tail: 100}
	if err := eim.CheckID(eim.KindHost, "host", d.HostID); err != nil {
		return err
	}
	d.HostLink = hostURL(c.project.Name, d.HostID)
	if s := q.Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10000 {
			return eim.Errorf(eim.EINVALID, "tail: want 1 to 10000 lines")
		}
		d.Tail = n
	}
	base := "/edgeworkloads/" + url.PathEscape(name) + "/logs"
	var err error
	if id := q.Get("request"); id != "" {
		err = h.apiCall(r.Context(), r, c, http.MethodGet, base+"/"+url.PathEscape(id), nil, &d.Log)
	} else {
		aq := url.Values{"host": {d.HostID}, "tail": {strconv.Itoa(d.Tail)}, "wait": {"10"}}
		if d.Container != "" {
			aq.Set("container", d.Container)
		}
		err = h.apiCall(r.Context(), r, c, http.MethodGet, base+"?"+aq.Encode(), nil, &d.Log)
	}
	if err != nil {
		return err
	}
	d.Pending = d.Log.State != "answered"
	h.render(w, r, http.StatusOK, "edgeworkloadlogs", c.view("edgeworkloads", "Logs of "+name, d))
	return nil
}
