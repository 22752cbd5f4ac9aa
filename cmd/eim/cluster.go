package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

const clusterUsage = `Usage:
  eim cluster list [--filter F] [--order-by O] [--page-size N] [--offset N]
  eim cluster get NAME
  eim cluster create [--name NAME] [--template NAME-vX.Y.Z] --node HOST[:ROLE]… [--label K=V]…
  eim cluster delete NAME [--force]
  eim cluster nodes add NAME HOST[:ROLE]…
  eim cluster nodes remove NAME HOST [--force]
  eim cluster upgrade NAME --template NAME --version vX.Y.Z
  eim cluster kubeconfig NAME --out FILE

Edge Kubernetes (k3s) clusters built from the project's hosts
(docs/clusters.md). A node is a host (its ID or UUID) and a role: all
(control plane and workloads, the default), controlplane or worker. The
first control-plane node initialises the cluster, the others join it.
"nodes remove" drains the node first (--force skips the drain); "upgrade"
moves the cluster to another template a node at a time and stops at the
first failure (the same upgrade again retries it). "delete" uninstalls every
node first (--force forgets the nodes at once). "kubeconfig" writes a
kubeconfig that reaches the cluster through EIM's connect gateway.
`

const templateUsage = `Usage:
  eim cluster-template list [--filter F] [--order-by O]
  eim cluster-template get NAME-vX.Y.Z | NAME VERSION
  eim cluster-template create FILE.json
  eim cluster-template delete NAME-vX.Y.Z | NAME VERSION
  eim cluster-template set-default NAME [VERSION]

Cluster templates (the original cluster manager's): name, version vX.Y.Z,
kubernetesVersion (v1.33.5+k3s1), clusterconfiguration, clusterNetwork.
Every project has baseline, privileged and restricted. A template is never
changed: create a new version. "set-default" without a version takes the
latest. "get" and "delete" take a template as "cluster create --template"
and "list -o id" write it (baseline-v0.1.0) or as a name and a version.
`

// multi is a repeatable flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// nodeSpecs reads HOST[:ROLE] arguments.
func nodeSpecs(args []string) ([]client.ClusterNodeSpec, error) {
	var out []client.ClusterNodeSpec
	for _, a := range args {
		id, role, _ := strings.Cut(a, ":")
		if id == "" {
			return nil, usagef("node %q: want HOST[:ROLE]", a)
		}
		out = append(out, client.ClusterNodeSpec{ID: id, Role: role})
	}
	return out, nil
}

// cluster runs "eim cluster …".
func (c *cli) cluster(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, clusterUsage)
		return nil
	}
	verb, rest := args[0], args[1:]
	if verb == "nodes" {
		if len(rest) == 0 || (rest[0] != "add" && rest[0] != "remove") {
			return usagef("cluster nodes: want add or remove")
		}
		verb, rest = "nodes "+rest[0], rest[1:]
	}
	fs := c.flagSet("eim cluster "+verb, "eim cluster "+verb+" …", clusterUsage)
	c.globalFlags(fs)
	var q client.ClusterQuery
	var name, template, version, out string
	var nodes, labels multi
	var force bool
	switch verb {
	case "list":
		fs.StringVar(&q.Filter, "filter", "", `filter: field=value (value* a prefix), joined by OR / AND, over name, kubernetesVersion, providerStatus, lifecyclePhase`)
		fs.StringVar(&q.OrderBy, "order-by", "", `order: "name", "kubernetesVersion desc", …`)
		fs.IntVar(&q.PageSize, "page-size", 100, "clusters per page (at most 100)")
		fs.IntVar(&q.Offset, "offset", 0, "clusters to skip")
	case "create":
		fs.StringVar(&name, "name", "", "the cluster's name (a DNS label; default: generated)")
		fs.StringVar(&template, "template", "", "its template, NAME-vX.Y.Z or NAME (latest) (default: the project's default)")
		fs.Var(&nodes, "node", "a node, HOST[:ROLE] (HOST an ID or UUID; ROLE all, controlplane or worker); repeat")
		fs.Var(&labels, "label", "a label, KEY=VALUE; repeat")
	case "delete", "nodes remove":
		fs.BoolVar(&force, "force", false, "skip the drain (nodes remove) / forget the nodes at once (delete)")
	case "upgrade":
		fs.StringVar(&template, "template", "", "the template's name (required)")
		fs.StringVar(&version, "version", "", "the template's version (required)")
	case "kubeconfig":
		fs.StringVar(&out, "out", "", "file to write the kubeconfig to (mode 0600; required)")
	case "get", "nodes add":
	default:
		return usagef("cluster: unknown verb %q (list, get, create, delete, nodes add|remove, upgrade, kubeconfig)", verb)
	}
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	switch verb {
	case "list", "create":
		if err := wantArgs("cluster "+verb, pos, 0, "no arguments"); err != nil {
			return err
		}
	case "nodes add":
		if len(pos) < 2 {
			return usagef("cluster nodes add: want NAME and at least one HOST[:ROLE]")
		}
	case "nodes remove":
		if err := wantArgs("cluster nodes remove", pos, 2, "NAME and HOST"); err != nil {
			return err
		}
	default:
		if err := wantArgs("cluster "+verb, pos, 1, "a cluster name"); err != nil {
			return err
		}
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	p := c.g.project
	switch verb {
	case "list":
		cs, _, err := cl.ListClusters(c.ctx, p, q)
		if err != nil {
			return err
		}
		switch c.g.output {
		case "json":
			return c.printJSON(cs)
		case "id":
			for _, x := range cs {
				fmt.Fprintln(c.stdout, x.Name)
			}
			return nil
		}
		rows := make([][]string, 0, len(cs))
		for _, x := range cs {
			rows = append(rows, []string{x.Name, x.KubernetesVersion, strconv.Itoa(x.NodeQuantity), x.LifecyclePhase.Message, x.ProviderStatus.Message})
		}
		return c.printTable([]string{"NAME", "KUBERNETES", "NODES", "LIFECYCLE", "STATUS"}, rows)
	case "get":
		x, err := cl.GetCluster(c.ctx, p, pos[0])
		if err != nil {
			return err
		}
		if c.g.output != "table" {
			return c.printJSON(x)
		}
		fmt.Fprintf(c.stdout, "name:       %s\ntemplate:   %s\nkubernetes: %s\nlifecycle:  %s\nstatus:     %s\nnodes:      %s\n\n",
			x.Name, x.Template, x.KubernetesVersion, x.LifecyclePhase.Message, x.ProviderStatus.Message, x.NodeHealth.Message)
		rows := make([][]string, 0, len(x.Nodes))
		for _, n := range x.Nodes {
			rows = append(rows, []string{n.ID, n.Role, n.Status.Condition, n.Status.Reason})
		}
		return c.printTable([]string{"NODE", "ROLE", "CONDITION", "REASON"}, rows)
	case "create":
		specs, err := nodeSpecs(nodes)
		if err != nil {
			return err
		}
		if len(specs) == 0 {
			return usagef("cluster create: --node HOST[:ROLE] is required")
		}
		ls := map[string]string{}
		for _, l := range labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return usagef("--label %q: want KEY=VALUE", l)
			}
			ls[k] = v
		}
		got, err := cl.CreateCluster(c.ctx, p, &client.ClusterSpec{Name: name, Template: template, Nodes: specs, Labels: ls})
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, got)
		return nil
	case "delete":
		return cl.DeleteCluster(c.ctx, p, pos[0], force)
	case "nodes add":
		x, err := cl.GetCluster(c.ctx, p, pos[0])
		if err != nil {
			return err
		}
		add, err := nodeSpecs(pos[1:])
		if err != nil {
			return err
		}
		var all []client.ClusterNodeSpec
		for _, n := range x.Nodes {
			if n.Status.Condition != "STATUS_CONDITION_REMOVING" {
				all = append(all, client.ClusterNodeSpec{ID: n.ID, Role: n.Role})
			}
		}
		return cl.SetClusterNodes(c.ctx, p, pos[0], append(all, add...))
	case "nodes remove":
		return cl.RemoveClusterNode(c.ctx, p, pos[0], pos[1], force)
	case "upgrade":
		if template == "" || version == "" {
			return usagef("cluster upgrade: --template and --version are required")
		}
		return cl.UpgradeCluster(c.ctx, p, pos[0], template, version)
	case "kubeconfig":
		if out == "" {
			return usagef("cluster kubeconfig: --out FILE is required")
		}
		kc, err := cl.Kubeconfig(c.ctx, p, pos[0])
		if err != nil {
			return err
		}
		return writeSecret(out, []byte(kc))
	}
	return nil
}

// clusterTemplate runs "eim cluster-template …".
func (c *cli) clusterTemplate(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.stdout, templateUsage)
		return nil
	}
	verb, rest := args[0], args[1:]
	fs := c.flagSet("eim cluster-template "+verb, "eim cluster-template "+verb+" …", templateUsage)
	c.globalFlags(fs)
	var q client.ClusterQuery
	want := map[string][2]int{"list": {0, 0}, "get": {1, 2}, "create": {1, 1}, "delete": {1, 2}, "set-default": {1, 2}}
	n, ok := want[verb]
	if !ok {
		return usagef("cluster-template: unknown verb %q (list, get, create, delete, set-default)", verb)
	}
	if verb == "list" {
		fs.StringVar(&q.Filter, "filter", "", "filter: field=value (value* a prefix) over name, version, kubernetesVersion")
		fs.StringVar(&q.OrderBy, "order-by", "", `order: "name", "version desc", …`)
		q.PageSize = 100
	}
	pos, err := c.parseAll(fs, rest)
	if err != nil {
		return err
	}
	if len(pos) < n[0] || len(pos) > n[1] {
		return usagef("cluster-template %s: wrong number of arguments (eim cluster-template -h)", verb)
	}
	if (verb == "get" || verb == "delete") && len(pos) == 1 {
		name, version, ok := splitTemplateRef(pos[0])
		if !ok {
			return usagef("cluster-template %s: %q is not NAME-vX.Y.Z (or give NAME VERSION)", verb, pos[0])
		}
		pos = []string{name, version}
	}
	cl, err := c.clientFor()
	if err != nil {
		return err
	}
	p := c.g.project
	switch verb {
	case "list":
		l, err := cl.ListClusterTemplates(c.ctx, p, q)
		if err != nil {
			return err
		}
		switch c.g.output {
		case "json":
			return c.printJSON(l)
		case "id":
			for _, t := range l.TemplateInfoList {
				fmt.Fprintln(c.stdout, t.Name+"-"+t.Version)
			}
			return nil
		}
		rows := make([][]string, 0, len(l.TemplateInfoList))
		for _, t := range l.TemplateInfoList {
			def := ""
			if d := l.DefaultTemplateInfo; d != nil && d.Name == t.Name && d.Version == t.Version {
				def = "*"
			}
			rows = append(rows, []string{t.Name, t.Version, t.KubernetesVersion, def, t.Description})
		}
		return c.printTable([]string{"NAME", "VERSION", "KUBERNETES", "DEFAULT", "DESCRIPTION"}, rows)
	case "get":
		t, err := cl.GetClusterTemplate(c.ctx, p, pos[0], pos[1])
		if err != nil {
			return err
		}
		return c.printJSON(t)
	case "create":
		b, err := os.ReadFile(pos[0])
		if err != nil {
			return err
		}
		var t client.ClusterTemplate
		if err := json.Unmarshal(b, &t); err != nil {
			return usagef("%s: not a template in JSON: %v", pos[0], err)
		}
		if err := cl.CreateClusterTemplate(c.ctx, p, &t); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, t.Name+"-"+t.Version)
		return nil
	case "delete":
		return cl.DeleteClusterTemplate(c.ctx, p, pos[0], pos[1])
	case "set-default":
		v := ""
		if len(pos) == 2 {
			v = pos[1]
		}
		return cl.SetDefaultClusterTemplate(c.ctx, p, pos[0], v)
	}
	return nil
}

// splitTemplateRef splits "name-vX.Y.Z" (the form "cluster create
// --template" takes and "list -o id" writes) at the last "-v" that starts
// a valid version; a name may itself hold "-v" (my-vm-v1.0.0).
func splitTemplateRef(ref string) (name, version string, ok bool) {
	for i := strings.LastIndex(ref, "-v"); i > 0; i = strings.LastIndex(ref[:i], "-v") {
		if v := ref[i+1:]; eim.ValidTemplateVersion(v) {
			return ref[:i], v, true
		}
	}
	return "", "", false
}

var _ flag.Value = (*multi)(nil)
