package clusters

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// The lifecycle, level-based: step looks at a cluster as stored (what the
// API asked for, the plans given, the nodes' last reports) and decides the
// next plans and the status. It is pure: the reconciler runs it on a copy
// to learn whether anything changes, then again in the write transaction.

// world is what step needs beyond the cluster.
type world struct {
	now time.Time
	// template returns the project's template, nil when there is none.
	template func(name, version string) *eim.ClusterTemplate
	// hosts are the cluster's hosts that exist, with the address a
	// control-plane node is reached at ("" when none is known).
	hosts map[string]string
	// connectTokenID is the cluster's connect credential ("" none).
	connectTokenID string
}

// active: the node runs its current plan.
func active(c *eim.Cluster, n *eim.ClusterNode) bool {
	return n.Plan.Gen > 0 && n.Report.State == eim.AgentActive && n.Report.PlanVersion == n.Plan.Version(c.ID)
}

// failed: the node failed its current plan.
func failed(c *eim.Cluster, n *eim.ClusterNode) bool {
	return n.Plan.Gen > 0 && n.Report.State == eim.AgentError && n.Report.PlanVersion == n.Plan.Version(c.ID)
}

// removed: the node reported the end of its removal. A node says INACTIVE
// with no plan version once its removal is done (cluster.proto: it has no
// plan left); one naming the removal's version is taken too.
func removed(c *eim.Cluster, n *eim.ClusterNode) bool {
	if !n.Plan.Removal || n.Report.State != eim.AgentInactive {
		return false
	}
	return n.Report.PlanVersion == "" || n.Report.PlanVersion == n.Plan.Version(c.ID)
}

// setPlan gives n plan p, bumping its generation when p differs from
// the plan it has (a new version for the node to fetch).
func setPlan(n *eim.ClusterNode, p eim.NodePlan) {
	p.Gen, p.Digest = 0, ""
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	d := hex.EncodeToString(sum[:8])
	if d == n.Plan.Digest {
		return
	}
	p.Gen, p.Digest = n.Plan.Gen+1, d
	n.Plan = p
}

// step advances c by what w and the reports allow and sets its status;
// it reports whether the cluster is gone (deleted, its nodes all
// removed).
func step(c *eim.Cluster, w world) (gone bool) {
	// Removals first: the cluster's deletion makes every node leave,
	// without a drain (the workloads go with the cluster).
	keep := c.Nodes[:0]
	for _, n := range c.Nodes {
		if c.Deleting && !n.Removing {
			n.Removing, n.Force = true, true
		}
		if n.Removing {
			_, exists := w.hosts[n.HostID]
			// Gone once it said so, at once when nothing was ever
			// installed, when its host is gone, or when the deletion is
			// forced.
			if n.Plan.Gen == 0 || !exists || removed(c, n) || c.ForceDelete {
				continue
			}
			setPlan(n, eim.NodePlan{Removal: true, Drain: !n.Force})
		}
		keep = append(keep, n)
	}
	c.Nodes = keep
	if len(c.Nodes) == 0 {
		// Deleted, or its last node left (which deletes it): no cluster
		// is kept without nodes.
		return true
	}

	tmpl := w.template(c.TemplateName, c.TemplateVersion)
	live := liveNodes(c)
	// The control-plane node others join: an active one, the first
	// planned to initialise the cluster preferred.
	server := func(except string) string {
		var best *eim.ClusterNode
		for _, n := range live {
			if n.HostID == except || !n.Role.ControlPlane() || !active(c, n) || w.hosts[n.HostID] == "" {
				continue
			}
			if best == nil || (n.Plan.Init && !best.Plan.Init) {
				best = n
			}
		}
		if best == nil {
			return ""
		}
		return "https://" + net.JoinHostPort(w.hosts[best.HostID], "6443")
	}
	plan := func(n *eim.ClusterNode, init bool, serverURL string) eim.NodePlan {
		p := eim.NodePlan{TemplateName: c.TemplateName, TemplateVersion: c.TemplateVersion, TemplateGen: c.TemplateGen, Init: init, ServerURL: serverURL}
		if n.Role.ControlPlane() {
			p.ConnectTokenID = w.connectTokenID
		}
		return p
	}
	// An active control-plane node without a known address holds the
	// joins back: said in the status, else the nodes wait in silence.
	noAddr := ""
	if !c.Deleting && tmpl != nil {
		// The node that initialises the cluster: the one planned so, else
		// (nothing planned yet) the first control-plane node.
		planned := slices.ContainsFunc(live, func(n *eim.ClusterNode) bool { return n.Plan.Gen > 0 })
		if !planned {
			for _, n := range live {
				if n.Role.ControlPlane() {
					setPlan(n, plan(n, true, ""))
					break
				}
			}
		}
		// A node whose plan is being applied holds the next one back:
		// control-plane nodes join, and every node upgrades, one at a
		// time; a failure stops the roll-out until a new PUT template
		// (TemplateGen) asks for it again.
		busy, stuck := false, false
		for _, n := range live {
			if n.Plan.Gen == 0 {
				continue
			}
			if failed(c, n) {
				if n.Plan.TemplateGen < c.TemplateGen {
					// Asked again: the same plan, a new version.
					p := n.Plan
					p.TemplateName, p.TemplateVersion, p.TemplateGen = c.TemplateName, c.TemplateVersion, c.TemplateGen
					setPlan(n, p)
					busy = true
					continue
				}
				stuck = true
				continue
			}
			if !active(c, n) {
				busy = true
			}
		}
		srv := server("")
		if srv == "" && slices.ContainsFunc(live, func(n *eim.ClusterNode) bool { return n.Plan.Gen == 0 }) {
			for _, n := range live {
				if _, exists := w.hosts[n.HostID]; exists && n.Role.ControlPlane() && active(c, n) {
					noAddr = n.HostID
					break
				}
			}
		}
		if !stuck && srv != "" {
			// Joins: workers all at once, control-plane nodes one at a time.
			for _, n := range live {
				if n.Plan.Gen != 0 {
					continue
				}
				if n.Role.ControlPlane() {
					if busy {
						continue
					}
					busy = true
				}
				setPlan(n, plan(n, false, srv))
			}
			// Upgrades: one node at a time, control plane first.
			if !busy {
				for _, n := range upgradeOrder(live) {
					if n.Plan.Gen == 0 || (n.Plan.TemplateName == c.TemplateName && n.Plan.TemplateVersion == c.TemplateVersion) {
						continue
					}
					url := n.Plan.ServerURL
					if !n.Plan.Init {
						url = server(n.HostID)
						if url == "" {
							url = n.Plan.ServerURL
						}
					}
					p := plan(n, n.Plan.Init, url)
					p.DrainUpgrade = true
					setPlan(n, p)
					break
				}
			}
		}
		// The connect token follows the cluster's (a rotation).
		for _, n := range live {
			if n.Plan.Gen > 0 && n.Role.ControlPlane() && n.Plan.ConnectTokenID != w.connectTokenID {
				p := n.Plan
				p.ConnectTokenID = w.connectTokenID
				setPlan(n, p)
			}
		}
	}
	status(c, w, tmpl, live, noAddr)
	return false
}

func liveNodes(c *eim.Cluster) []*eim.ClusterNode {
	var out []*eim.ClusterNode
	for _, n := range c.Nodes {
		if !n.Removing {
			out = append(out, n)
		}
	}
	return out
}

// upgradeOrder is the control-plane nodes, then the workers, each by
// when they joined.
func upgradeOrder(nodes []*eim.ClusterNode) []*eim.ClusterNode {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b *eim.ClusterNode) int {
		ca, cb := a.Role.ControlPlane(), b.Role.ControlPlane()
		switch {
		case ca && !cb:
			return -1
		case cb && !ca:
			return 1
		}
		return int(a.Seq - b.Seq)
	})
	return out
}

// setStatus replaces a status, keeping its timestamp while it says the
// same.
func setStatus(st *eim.StatusText, msg string, ind eim.StatusIndication, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	if st.Message == msg && st.Indicator == ind {
		return
	}
	*st = eim.NewStatusText(msg, ind, now)
}

// status derives the cluster's status from its nodes; noAddr is an
// active control-plane node the others cannot join for want of an
// address.
func status(c *eim.Cluster, w world, tmpl *eim.ClusterTemplate, live []*eim.ClusterNode, noAddr string) {
	st := &c.Status
	now := w.now
	var ready, cpReady, planned int
	var failure, missing string
	upgrading := false
	for _, n := range live {
		if _, ok := w.hosts[n.HostID]; !ok && missing == "" {
			missing = n.HostID
		}
		if n.Plan.Gen > 0 {
			planned++
		}
		if active(c, n) {
			ready++
			if n.Role.ControlPlane() {
				cpReady++
			}
		}
		if failed(c, n) && failure == "" {
			failure = fmt.Sprintf("%s: %s", n.HostID, orText(n.Report.Message, "failed"))
		}
		if n.Plan.Gen > 0 && (n.Plan.TemplateName != c.TemplateName || n.Plan.TemplateVersion != c.TemplateVersion) {
			upgrading = true
		}
	}
	removing := len(live) < len(c.Nodes)
	everReady := st.ControlPlane.Indicator == eim.StatusIdle || cpReady > 0
	if tmpl != nil {
		st.KubernetesVersion = tmpl.KubernetesVersion
	}
	st.Error = failure
	if tmpl == nil && !c.Deleting {
		st.Error = fmt.Sprintf("template %s version %s not found", c.TemplateName, c.TemplateVersion)
	}
	all := len(live) > 0 && ready == len(live) && !upgrading && !removing
	switch {
	case c.Deleting:
		setStatus(&st.Lifecycle, "deleting", eim.StatusInProgress, now)
	case st.Error != "":
		setStatus(&st.Lifecycle, "failed", eim.StatusError, now)
	case all:
		setStatus(&st.Lifecycle, "active", eim.StatusIdle, now)
	case !everReady:
		setStatus(&st.Lifecycle, "provisioning", eim.StatusInProgress, now)
	default:
		setStatus(&st.Lifecycle, "updating", eim.StatusInProgress, now)
	}
	switch {
	case c.Deleting:
		setStatus(&st.Provider, fmt.Sprintf("deleting: %d nodes left", len(c.Nodes)), eim.StatusInProgress, now)
	case st.Error != "":
		setStatus(&st.Provider, "error: "+st.Error, eim.StatusError, now)
	case all:
		setStatus(&st.Provider, "ready", eim.StatusIdle, now)
	case noAddr != "":
		setStatus(&st.Provider, fmt.Sprintf("in progress: no address known for control-plane node %s (its hardware inventory has no IP address): the other nodes cannot join", noAddr), eim.StatusInProgress, now)
	case upgrading:
		setStatus(&st.Provider, fmt.Sprintf("in progress: upgrading to %s %s", c.TemplateName, c.TemplateVersion), eim.StatusInProgress, now)
	default:
		setStatus(&st.Provider, fmt.Sprintf("in progress: %d of %d nodes ready", ready, len(live)), eim.StatusInProgress, now)
	}
	switch {
	case cpReady > 0:
		setStatus(&st.ControlPlane, "ready", eim.StatusIdle, now)
	case failure != "" && planned > 0:
		setStatus(&st.ControlPlane, "not ready: "+failure, eim.StatusError, now)
	default:
		setStatus(&st.ControlPlane, "not ready", eim.StatusInProgress, now)
	}
	if missing != "" {
		setStatus(&st.Infrastructure, "host "+missing+" not found", eim.StatusError, now)
	} else {
		setStatus(&st.Infrastructure, "ready", eim.StatusIdle, now)
	}
	switch {
	case failure != "":
		setStatus(&st.NodeHealth, failure, eim.StatusError, now)
	case len(live) > 0 && ready == len(live):
		setStatus(&st.NodeHealth, "nodes are healthy", eim.StatusIdle, now)
	default:
		setStatus(&st.NodeHealth, fmt.Sprintf("%d of %d nodes ready", ready, len(live)), eim.StatusInProgress, now)
	}
}

func orText(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}

// nodeAddress picks the address a control-plane node is reached at from
// its host's reported interfaces: the first global unicast IPv4, else
// IPv6, of an interface that is not the BMC's.
func nodeAddress(h *eim.Host) string {
	var v6 string
	for _, nic := range h.HostNics {
		if nic.BmcInterface {
			continue
		}
		for _, a := range nic.IPAddresses {
			ip, _, err := net.ParseCIDR(a.Address)
			if err != nil {
				ip = net.ParseIP(a.Address)
			}
			if ip == nil || !ip.IsGlobalUnicast() {
				continue
			}
			if ip.To4() != nil {
				return ip.String()
			}
			if v6 == "" {
				v6 = ip.String()
			}
		}
	}
	return v6
}
