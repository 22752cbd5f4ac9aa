package clusters

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
	"github.com/eimhq/eim/southbound"
)

// The nodes' service (eim.cluster.v1.ClusterService), authenticated by
// the node's own token: the host and project come from it, so a node
// reads and reports only its own plan.

var _ clusterv1connect.ClusterServiceHandler = (*Service)(nil)

// GetPlan implements clusterv1connect.ClusterServiceHandler.
func (s *Service) GetPlan(ctx context.Context, req *connect.Request[clusterv1.GetPlanRequest]) (*connect.Response[clusterv1.GetPlanResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.o.Store.ClusterOfHost(ctx, n.Project, n.HostID)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return connect.NewResponse(&clusterv1.GetPlanResponse{}), nil // a member of no cluster
	}
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "clusters: plan", err)
	}
	node := c.Node(n.HostID)
	ver := node.Plan.Version(c.ID)
	out := &clusterv1.GetPlanResponse{Version: ver}
	switch {
	case ver == "":
		// In a cluster, no plan yet (it joins once the control plane is
		// up): nothing to do.
	case req.Msg.GetVersion() == ver:
		out.Unchanged = true
	case node.Plan.Removal:
		out.Removal = &clusterv1.Removal{Drain: node.Plan.Drain, DrainTimeoutSeconds: uint32(s.o.DrainTimeout.Seconds())}
	default:
		p, err := s.render(ctx, c, node)
		if err != nil {
			return nil, southbound.Error(ctx, s.log, "clusters: plan", err)
		}
		out.Plan = p
	}
	return connect.NewResponse(out), nil
}

// render makes a node's install plan from its plan's inputs, its
// cluster and the template the plan names.
func (s *Service) render(ctx context.Context, c *eim.Cluster, n *eim.ClusterNode) (*clusterv1.Plan, error) {
	ts, err := s.o.Store.ClusterTemplates(ctx, c.Project)
	if err != nil {
		return nil, err
	}
	var t *eim.ClusterTemplate
	for _, x := range ts {
		if x.Name == n.Plan.TemplateName && x.Version == n.Plan.TemplateVersion {
			t = x
		}
	}
	if t == nil {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "template %s version %s of the node's plan is gone", n.Plan.TemplateName, n.Plan.TemplateVersion)
	}
	k3s, err := t.K3s()
	if err != nil {
		return nil, err
	}
	join, err := s.o.Key.Open(c.JoinToken, adJoin(c))
	if err != nil {
		return nil, fmt.Errorf("cluster %s join token: %w", c.ID, err)
	}
	p := &clusterv1.Plan{
		ClusterId: c.ID, ClusterName: c.Name, Role: protoRole(n.Role), Distribution: "k3s",
		KubernetesVersion: t.KubernetesVersion, Init: n.Plan.Init, ServerUrl: n.Plan.ServerURL,
		JoinToken: string(join), ConfigYaml: configYAML(c, n, t, k3s),
		PreInstallCommands: k3s.PreK3sCommands, DrainBeforeUpgrade: n.Plan.DrainUpgrade,
		DrainTimeoutSeconds: uint32(s.o.DrainTimeout.Seconds()),
	}
	if n.Plan.Init {
		p.ServerUrl = ""
	}
	for _, f := range k3s.Files {
		if f.Path == "" {
			continue
		}
		mode, _ := eim.ParseFileMode(f.Permissions)
		content := f.Content
		if f.ContentFrom != nil && content == "" {
			// The original's secret reference, resolved here (the
			// cluster's creation checked that it resolves).
			var ok bool
			if content, ok = eim.FileSourceContent(f.ContentFrom); !ok {
				return nil, eim.Errorf(eim.EINVALID, "template %s-%s: file %s: %s is not one EIM provides", t.Name, t.Version, f.Path, f.ContentFrom)
			}
		}
		p.Files = append(p.Files, &clusterv1.File{Path: f.Path, Content: content, Mode: mode})
	}
	if p.Artifacts, err = s.artifacts(t); err != nil {
		return nil, err
	}
	if n.Role.ControlPlane() && len(c.ConnectToken) > 0 && s.o.AgentURL != "" {
		tok, err := s.o.Key.Open(c.ConnectToken, adConnect(c))
		if err != nil {
			return nil, fmt.Errorf("cluster %s connect token: %w", c.ID, err)
		}
		p.Connect = &clusterv1.Connect{ServerUrl: s.o.AgentURL, Token: string(tok), Upstream: "https://127.0.0.1:6443"}
	}
	return p, nil
}

func protoRole(r eim.ClusterRole) clusterv1.Plan_Role {
	switch r {
	case eim.ClusterRoleAll:
		return clusterv1.Plan_ROLE_ALL
	case eim.ClusterRoleControlPlane:
		return clusterv1.Plan_ROLE_CONTROLPLANE
	case eim.ClusterRoleWorker:
		return clusterv1.Plan_ROLE_WORKER
	}
	return clusterv1.Plan_ROLE_UNSPECIFIED
}

// configYAML is the node's k3s config.yaml: the template's configuration
// for the node's role, its name and labels, the cluster network. The
// join settings (token file, server or cluster-init) are the agent's
// drop-in: the token is in no file but the one only root reads.
func configYAML(c *eim.Cluster, n *eim.ClusterNode, t *eim.ClusterTemplate, k *eim.K3sConfig) string {
	var b strings.Builder
	b.WriteString("# The node's k3s configuration, from EIM's cluster " + c.Name + " (template " + t.Name + " " + t.Version + ").\n")
	str := func(key, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", key, strconv.Quote(v))
		}
	}
	list := func(key string, vs []string) {
		if len(vs) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s:\n", key)
		for _, v := range vs {
			fmt.Fprintf(&b, "  - %s\n", strconv.Quote(v))
		}
	}
	args := func(vs []string) []string {
		out := make([]string, 0, len(vs))
		for _, v := range vs {
			out = append(out, strings.TrimPrefix(v, "--"))
		}
		return out
	}
	str("node-name", n.HostID)
	labels := append([]string{"eim.io/cluster=" + c.Name, "eim.io/host=" + n.HostID}, k.AgentConfig.NodeLabels...)
	list("node-label", labels)
	taints := k.AgentConfig.NodeTaints
	if n.Role == eim.ClusterRoleControlPlane {
		// A control plane without workloads, as the original's role.
		taints = append([]string{"node-role.kubernetes.io/control-plane=true:NoSchedule"}, taints...)
	}
	list("node-taint", taints)
	list("kubelet-arg", args(k.AgentConfig.KubeletArgs))
	if n.Role.ControlPlane() {
		str("cluster-cidr", strings.Join(t.Network.Pods.CIDRBlocks, ","))
		str("service-cidr", strings.Join(t.Network.Services.CIDRBlocks, ","))
		str("cluster-domain", k.ServerConfig.ClusterDomain)
		list("disable", k.ServerConfig.DisableComponents)
		list("kube-apiserver-arg", args(k.ServerConfig.KubeAPIServerArg))
		list("kube-controller-manager-arg", args(k.ServerConfig.KubeControllerManagerArgs))
		list("kube-scheduler-arg", args(k.ServerConfig.KubeSchedulerArgs))
		list("tls-san", k.ServerConfig.TLSSan)
		if k.ServerConfig.DisableCloudController {
			b.WriteString("disable-cloud-controller: true\n")
		}
	}
	return b.String()
}

// ReportStatus implements clusterv1connect.ClusterServiceHandler.
func (s *Service) ReportStatus(ctx context.Context, req *connect.Request[clusterv1.ReportStatusRequest]) (*connect.Response[clusterv1.ReportStatusResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	m := req.Msg
	state, err := checkReport(m)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	err = s.o.Store.ReportClusterNode(ctx, n.Project, n.HostID, eim.NodeReport{
		State: state, Message: m.GetMessage(), PlanVersion: m.GetPlanVersion(), KubernetesVersion: m.GetKubernetesVersion(), At: eim.NewTime(s.o.Now()),
	})
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		// A node removed from its cluster finishing its uninstall: there
		// is nothing left to record.
		return connect.NewResponse(&clusterv1.ReportStatusResponse{}), nil
	}
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "clusters: report", err)
	}
	return connect.NewResponse(&clusterv1.ReportStatusResponse{}), nil
}

// checkReport validates a report (every field comes from the network) and
// returns its state's name.
func checkReport(m *clusterv1.ReportStatusRequest) (string, error) {
	name, ok := clusterv1.ReportStatusRequest_State_name[int32(m.GetState())]
	if !ok || m.GetState() == clusterv1.ReportStatusRequest_STATE_UNSPECIFIED {
		return "", fmt.Errorf("state: %v is not a cluster agent state", m.GetState())
	}
	if len(m.GetMessage()) > 1024 || !utf8.ValidString(m.GetMessage()) {
		return "", errors.New("message: want at most 1,024 bytes of UTF-8")
	}
	if len(m.GetPlanVersion()) > 64 || !utf8.ValidString(m.GetPlanVersion()) {
		return "", errors.New("plan_version: want at most 64 bytes")
	}
	if len(m.GetKubernetesVersion()) > 63 || !utf8.ValidString(m.GetKubernetesVersion()) {
		return "", errors.New("kubernetes_version: want at most 63 bytes")
	}
	return strings.TrimPrefix(name, "STATE_"), nil
}

// artifactName is the file name an artifact is kept under on the node.
func artifactName(kind, url string) string {
	if kind == "binary" {
		return "k3s"
	}
	n := path.Base(url)
	if i := strings.IndexAny(n, "?#"); i >= 0 {
		n = n[:i]
	}
	return n
}
