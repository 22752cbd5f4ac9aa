package ui

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// statusTriple is a status text, its indicator and when it was set.
type statusTriple struct {
	Name, Text string
	Indicator  eim.StatusIndication
	Time       uint64
}

type hostData struct {
	Host      *eim.Host
	Statuses  []statusTriple
	Log       *logView
	Schedules []scheduleRow
	Runs      []*eim.OSUpdateRun
	CanReprov bool
	LogURL    string
	// LastHeard is when the host module last recorded hearing from the
	// node; nil when the UI has no store to read it from.
	LastHeard *heardView
	// Membership is the host's cluster (nil: none) while the clusters
	// module is deployed (Clusters); ClusterNote says why it is unknown.
	Clusters    bool
	Membership  *membership
	ClusterNote string
	// BMC is the host's BMC and power jobs while the oob module is
	// deployed (nil otherwise); BMCMsg says what the last form did.
	BMC    *bmcData
	BMCMsg string
	// Workloads are the device's edge workloads while the workloads
	// module is deployed (EdgeWorkloads); WorkloadNote says why they are
	// unknown.
	EdgeWorkloads bool
	Workloads     []hostWorkload
	WorkloadNote  string
	// SecureBoot is the firmware's Secure Boot state the node last
	// reported, in words ("" none reported), and SecureBootAt when.
	SecureBoot   string
	SecureBootAt uint64
}

// secureBootWords is a reported Secure Boot state in words; "" for none.
func secureBootWords(s eim.SecureBootState) string {
	switch s {
	case eim.SecureBootStateEnabled:
		return "enforced"
	case eim.SecureBootStateDisabled:
		return "disabled"
	case eim.SecureBootStateSetupMode:
		return "not enforced: firmware in setup mode (no platform key)"
	case eim.SecureBootStateNotUEFI:
		return "none: legacy BIOS boot"
	}
	return ""
}

// membership is a host's place in a cluster.
type membership struct {
	Cluster, Link, Template string
	Lifecycle               eim.StatusText
	Node                    clusterNode
}

// membershipOf reads the host's cluster from the v2 API
// (GET /clusters/{nodeId}/clusterdetail): nil when it is in none.
func (h *Handler) membershipOf(r *http.Request, c *call, hostID string) (*membership, error) {
	var cl clusterStatus
	err := h.v2Call(r.Context(), r, c, http.MethodGet, "/clusters/"+url.PathEscape(hostID)+"/clusterdetail", nil, &cl)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &membership{Cluster: cl.Name, Link: clusterURL(c, cl.Name), Template: cl.Template, Lifecycle: cl.LifecyclePhase}
	for _, n := range cl.Nodes {
		if n.ID == hostID {
			m.Node = n
		}
	}
	return m, nil
}

// logView is the provisioning log as the page shows it.
type logView struct {
	WorkflowID   string        `json:"workflowId"`
	Attempt      int           `json:"attempt"`
	State        string        `json:"state"`
	Message      string        `json:"message"`
	Actions      []actionView  `json:"-"`
	Entries      []logLineView `json:"entries"`
	Next         int           `json:"next"`
	Finished     bool          `json:"finished"`
	Failed       bool          `json:"failed"`
	TotalActions int           `json:"totalActions"`
}

type actionView struct {
	N                     int
	Name, State, Message  string
	Failed, Running, Done bool
}

// logLineView is one line of the log; the page's script renders the same
// fields for the lines that arrive later.
type logLineView struct {
	Seq    int    `json:"seq"`
	Time   string `json:"time"`
	Action string `json:"action"`
	State  string `json:"state"`
	Text   string `json:"text"`
	Failed bool   `json:"failed"`
}

func (h *Handler) host(w http.ResponseWriter, r *http.Request, c *call) error {
	d, err := h.hostData(r, c, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("bmc") {
	case "saved":
		d.BMCMsg = "BMC saved."
	case "removed":
		d.BMCMsg = "BMC removed."
	case "power":
		d.BMCMsg = "Power job queued: the oob module carries it out and confirms it from the BMC."
	}
	v := c.view("hosts", "Host "+d.Host.Name, d)
	v.Live = true
	h.render(w, r, http.StatusOK, "host", v)
	return nil
}

// hostData reads what the host page shows.
func (h *Handler) hostData(r *http.Request, c *call, id string) (*hostData, error) {
	ctx := r.Context()
	proj := c.project.Name
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return nil, eim.Errorf(eim.ENOTFOUND, "host %q not found", id)
	}
	res, err := h.inv.Get(ctx, proj, eim.KindHost, id)
	if err != nil {
		return nil, err
	}
	host := res.(*eim.Host)
	d := &hostData{Host: host, LogURL: hostURL(proj, id) + "/log",
		SecureBoot: secureBootWords(host.SecureBootState), SecureBootAt: host.SecureBootStateTimestamp}
	if h.store != nil {
		hv := heardOf(h.lastHeard(ctx, []eim.Resource{host})[id], h.now())
		d.LastHeard = &hv
	}
	d.Statuses = []statusTriple{
		{"Host", host.HostStatus, host.HostStatusIndicator, host.HostStatusTimestamp},
		{"Onboarding", host.OnboardingStatus, host.OnboardingStatusIndicator, host.OnboardingStatusTimestamp},
		{"Registration", host.RegistrationStatus, host.RegistrationStatusIndicator, host.RegistrationStatusTimestamp},
		{"Power", host.PowerStatus, host.PowerStatusIndicator, host.PowerStatusTimestamp},
	}
	if in := host.Instance; in != nil {
		d.Statuses = append(d.Statuses,
			statusTriple{"Instance", in.InstanceStatus, in.InstanceStatusIndicator, in.InstanceStatusTimestamp},
			statusTriple{"Provisioning", in.ProvisioningStatus, in.ProvisioningStatusIndicator, in.ProvisioningStatusTimestamp},
			statusTriple{"Update", in.UpdateStatus, in.UpdateStatusIndicator, in.UpdateStatusTimestamp},
			statusTriple{"Attestation", in.TrustedAttestationStatus, in.TrustedAttestationStatusIndicator, in.TrustedAttestationStatusTimestamp},
		)
		if d.Log, err = h.readLog(ctx, proj, in.ResourceID, 0); err != nil {
			return nil, err
		}
		d.CanReprov = c.canWrite && h.reprov != nil && d.Log.Failed
		runs, err := h.inv.List(ctx, proj, eim.KindOSUpdateRun, inventory.ListQuery{Filter: fmt.Sprintf("instance.resourceId=%q", in.ResourceID), OrderBy: "startTime desc", PageSize: 20})
		if err != nil {
			return nil, err
		}
		for _, it := range runs.Items {
			d.Runs = append(d.Runs, it.(*eim.OSUpdateRun))
		}
	}
	// A timeline: the latest change first, what never changed last.
	slices.SortStableFunc(d.Statuses, func(a, b statusTriple) int { return cmp.Compare(b.Time, a.Time) })
	sch, err := h.inv.ListSchedules(ctx, proj, inventory.ScheduleQuery{HostID: id, PageSize: inventory.MaxPageSize})
	if err != nil {
		return nil, err
	}
	d.Schedules = scheduleRows(sch, h.now())
	if d.Clusters = c.modules["clusters"]; d.Clusters {
		// The rest of the page stands without it.
		if d.Membership, err = h.membershipOf(r, c, id); err != nil {
			d.ClusterNote = eim.ErrorMessage(err)
		}
	}
	if c.modules["oob"] {
		d.BMC = h.bmcOf(r, c, id)
	}
	if d.EdgeWorkloads = c.modules["workloads"]; d.EdgeWorkloads {
		if d.Workloads, err = h.hostWorkloads(r, c, id); err != nil {
			d.WorkloadNote = eim.ErrorMessage(err)
		}
	}
	return d, nil
}

// readLog reads the provisioning log of instance id after seq.
func (h *Handler) readLog(ctx context.Context, project, id string, after int) (*logView, error) {
	out := &logView{Entries: []logLineView{}, Next: after}
	wf, err := h.inv.InstanceWorkflow(ctx, project, id)
	if err != nil || wf == nil {
		return out, err
	}
	out.WorkflowID, out.Attempt, out.State, out.Message = wf.ResourceID, wf.Attempt, shortEnum(wf.State), wf.Message
	out.Failed = wf.State == eim.WorkflowFailed
	out.Finished = out.Failed || wf.State == eim.WorkflowSucceeded
	out.TotalActions = len(wf.Actions)
	for i, a := range wf.Actions {
		out.Actions = append(out.Actions, actionView{N: i + 1, Name: a.Name, State: shortEnum(a.State), Message: a.Message,
			Failed: a.State == eim.ActionFailed, Running: a.State == eim.ActionRunning, Done: a.State == eim.ActionSucceeded})
	}
	for _, e := range wf.Log {
		if e.Seq <= after {
			continue
		}
		l := logLineView{Seq: e.Seq, Time: e.Time.UTC().Format("15:04:05.000"), State: shortEnum(e.State), Failed: e.State == eim.ActionFailed}
		switch {
		case e.Action < 0:
			l.Action = "workflow"
		case e.Action < len(wf.Actions):
			l.Action = fmt.Sprintf("%d/%d %s", e.Action+1, len(wf.Actions), wf.Actions[e.Action].Name)
		default:
			l.Action = e.Name
		}
		l.Text = e.Output
		if e.Message != "" {
			l.Text = e.Message
		}
		if e.Action < 0 && e.Message != "" && wf.State == eim.WorkflowFailed && e.Seq == wf.Log[len(wf.Log)-1].Seq {
			l.Failed = true
		}
		out.Entries = append(out.Entries, l)
		out.Next = e.Seq
	}
	return out, nil
}

// hostLog is the log's long poll for the page's script: the lines after
// ?after=SEQ, waiting on the change feed until there are some, the
// workflow ends, or the wait is over.
func (h *Handler) hostLog(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	proj := c.project.Name
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return eim.Errorf(eim.ENOTFOUND, "host %q not found", id)
	}
	after, err := strconv.Atoi(r.URL.Query().Get("after"))
	if err != nil || after < 0 {
		after = 0
	}
	rev, err := h.inv.Revision(ctx)
	if err != nil {
		return err
	}
	res, err := h.inv.Get(ctx, proj, eim.KindHost, id)
	if err != nil {
		return err
	}
	host := res.(*eim.Host)
	out := &logView{Entries: []logLineView{}, Next: after}
	if host.Instance != nil {
		instID := host.Instance.ResourceID
		if out, err = h.readLog(ctx, proj, instID, after); err != nil {
			return err
		}
		if len(out.Entries) == 0 && !out.Finished {
			wctx, cancel := context.WithTimeout(ctx, h.logWait)
			defer cancel()
			for ev, err := range h.inv.Watch(wctx, rev, eim.KindWorkflow, eim.KindInstance) {
				if err != nil {
					break // waited long enough, or the feed failed: answer what there is
				}
				if ev.Project != proj || !(ev.ID == instID || ev.ID == out.WorkflowID || (ev.Kind == eim.KindWorkflow && out.WorkflowID == "")) {
					continue
				}
				next, err := h.readLog(ctx, proj, instID, after)
				if err != nil {
					return err
				}
				out = next
				if len(out.Entries) > 0 || out.Finished {
					break
				}
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(out)
}

func (h *Handler) reprovision(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	if err := eim.CheckID(eim.KindHost, "host", id); err != nil {
		return err
	}
	if err := h.reprovisionHost(r, c, id); err != nil {
		return err
	}
	http.Redirect(w, r, hostURL(c.project.Name, id)+"#log", http.StatusSeeOther)
	return nil
}
