package compat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	openapi_types "github.com/oapi-codegen/runtime/types"

	cc "github.com/eimhq/eim/compat/clusterclient"
	rc "github.com/eimhq/eim/compat/refclient"
)

// The cluster manager's v2 API as the original's clients call it: through
// clusterclient, generated from the original cluster manager's document
// (../shared/reference/cluster-manager-openapi.yaml), on the /v2/… paths
// with the project's ID in the Activeprojectid header, as orch-cli sends
// it.

// cmProject is a test's project and a cluster-manager client for it.
type cmProject struct {
	*project
	cm  *cc.ClientWithResponses
	pid openapi_types.UUID
}

func newCMProject(t *testing.T) *cmProject {
	t.Helper()
	p := newProject(t)
	c, err := cc.NewClientWithResponses(srv.url, cc.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+p.tok)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var pid openapi_types.UUID
	if err := pid.UnmarshalText([]byte(p.id)); err != nil {
		t.Fatal(err)
	}
	return &cmProject{project: p, cm: c, pid: pid}
}

// referenceTemplate reads one of the original's shipped templates.
func referenceTemplate(t *testing.T, file string) cc.TemplateInfo {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(referencePath), "cluster-templates", file))
	if err != nil {
		t.Skipf("the original's templates are not beside the repository: %v", err)
	}
	var ti cc.TemplateInfo
	if err := json.Unmarshal(b, &ti); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return ti
}

// importTemplate posts a template, which must be accepted with the
// original's message.
func (p *cmProject) importTemplate(t *testing.T, ti cc.TemplateInfo) {
	t.Helper()
	r, err := p.cm.PostV2TemplatesWithResponse(ctx, &cc.PostV2TemplatesParams{Activeprojectid: p.pid}, ti)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != 201 || r.JSON201 == nil {
		t.Fatalf("import template %s %s: got %d %s, want 201", ti.Name, ti.Version, r.StatusCode(), r.Body)
	}
	if want := "successfully imported template " + ti.Name; *r.JSON201 != want {
		t.Errorf("import template: got %q, want %q", *r.JSON201, want)
	}
}

// host creates a host of the project and returns its resource ID and UUID.
func (p *cmProject) host(t *testing.T, name string) (id, uuid string) {
	t.Helper()
	u := newUUID()
	h := ok(p.c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: name, Uuid: &u})).get(t)
	return str(h.ResourceId), u
}

// createCluster creates a one-node cluster, which must be accepted with the
// original's message.
func (p *cmProject) createCluster(t *testing.T, name, template, node string) {
	t.Helper()
	spec := cc.ClusterSpec{Name: &name, Nodes: []cc.NodeSpec{{Id: node, Role: cc.All}}}
	if template != "" {
		spec.Template = &template
	}
	r, err := p.cm.PostV2ClustersWithResponse(ctx, &cc.PostV2ClustersParams{Activeprojectid: p.pid}, spec)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != 201 || r.JSON201 == nil {
		t.Fatalf("create cluster %s: got %d %s, want 201", name, r.StatusCode(), r.Body)
	}
	if want := "successfully created cluster " + name; *r.JSON201 != want {
		t.Errorf("create cluster: got %q, want %q", *r.JSON201, want)
	}
}

func (p *cmProject) templateNames(t *testing.T, params cc.GetV2TemplatesParams) []string {
	t.Helper()
	params.Activeprojectid = p.pid
	l := ok(p.cm.GetV2TemplatesWithResponse(ctx, &params)).get(t)
	var out []string
	for _, ti := range *l.TemplateInfoList {
		out = append(out, ti.Name+"@"+ti.Version)
	}
	return out
}

func (p *cmProject) clusterNames(t *testing.T, params cc.GetV2ClustersParams) []string {
	t.Helper()
	params.Activeprojectid = p.pid
	l := ok(p.cm.GetV2ClustersWithResponse(ctx, &params)).get(t)
	var out []string
	for _, c := range *l.Clusters {
		out = append(out, str(c.Name))
	}
	return out
}

// TestCMImportOriginalTemplates (issue 26 B1): the original's shipped
// templates, whose first file comes from a secret (contentFrom), import
// as they are and keep their contentFrom; a kubeadm template and a
// -dev version are accepted at import, the kubeadm one refused when a
// cluster is created from it.
func TestCMImportOriginalTemplates(t *testing.T) {
	p := newCMProject(t)
	for _, f := range []string{"baseline-k3s.json", "privileged-k3s.json", "restricted-k3s.json"} {
		p.importTemplate(t, referenceTemplate(t, f))
	}
	got := ok(p.cm.GetV2TemplatesNameVersionWithResponse(ctx, "restricted-k3s", "v0.0.10", &cc.GetV2TemplatesNameVersionParams{Activeprojectid: p.pid})).get(t)
	b, _ := json.Marshal(got.Clusterconfiguration)
	if !bytes.Contains(b, []byte(`"contentFrom":{"secret":{"key":"restricted.yaml","name":"pod-security-admission-config"}}`)) {
		t.Errorf("the template read back lost its file's contentFrom: %s", b)
	}

	dev := referenceTemplate(t, "baseline-k3s.json")
	dev.Version = "v0.0.12-dev"
	p.importTemplate(t, dev)
	ok(p.cm.GetV2TemplatesNameVersionWithResponse(ctx, "baseline-k3s", "v0.0.12-dev", &cc.GetV2TemplatesNameVersionParams{Activeprojectid: p.pid})).get(t)
	vs := ok(p.cm.GetV2TemplatesNameVersionsWithResponse(ctx, "baseline-k3s", &cc.GetV2TemplatesNameVersionsParams{Activeprojectid: p.pid})).get(t)
	if want := []string{"v0.0.10", "v0.0.12-dev"}; !slices.Equal(*vs.VersionList, want) {
		t.Errorf("versions: got %v, want %v", *vs.VersionList, want)
	}

	kubeadm := cc.TemplateInfo{Name: "kubeadm-rke", Version: "v0.1.0", KubernetesVersion: "v1.30.6",
		Controlplaneprovidertype: ptr(cc.Kubeadm), Infraprovidertype: ptr(cc.Intel),
		Clusterconfiguration: &map[string]any{"kind": "KubeadmControlPlaneTemplate", "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"kubeadmConfigSpec": map[string]any{"files": []any{}}}}}},
		ClusterNetwork: &cc.ClusterNetwork{Pods: &cc.NetworkRanges{CidrBlocks: []string{"10.45.0.0/16"}}, Services: &cc.NetworkRanges{CidrBlocks: []string{"10.46.0.0/16"}}},
	}
	p.importTemplate(t, kubeadm)

	host, _ := p.host(t, "kubeadm-node")
	call(p.cm.PostV2ClustersWithResponse(ctx, &cc.PostV2ClustersParams{Activeprojectid: p.pid},
		cc.ClusterSpec{Name: ptr("kubeadm-one"), Template: ptr("kubeadm-rke-v0.1.0"), Nodes: []cc.NodeSpec{{Id: host, Role: cc.All}}})).
		fails(t, 400, "InvalidArgument", "kubeadm", "k3s")
	// The original's own template makes a cluster.
	p.createCluster(t, "baseline-one", "baseline-k3s-v0.0.10", host)
}

// TestCMFiltersMatchSubstrings (issue 26 B2): a filter's value matches
// any part of the field (value* a prefix), on every filterable field of
// templates and clusters.
func TestCMFiltersMatchSubstrings(t *testing.T) {
	p := newCMProject(t)
	for _, f := range []string{"baseline-k3s.json", "restricted-k3s.json"} {
		p.importTemplate(t, referenceTemplate(t, f))
	}
	for _, c := range []struct{ filter, want string }{
		{"name=k3s", "baseline-k3s@v0.0.10 restricted-k3s@v0.0.10"},
		{"name=line", "baseline@v0.1.0 baseline-k3s@v0.0.10"},
		{"name=base*", "baseline@v0.1.0 baseline-k3s@v0.0.10"},
		{"name=k3s*", ""},
		{"version=0.0.1", "baseline-k3s@v0.0.10 restricted-k3s@v0.0.10"},
		{"kubernetesVersion=k3s1", "baseline@v0.1.0 baseline-k3s@v0.0.10 privileged@v0.1.0 restricted@v0.1.0 restricted-k3s@v0.0.10"},
		{"description=Restricted", "restricted@v0.1.0 restricted-k3s@v0.0.10"},
		{"name=line OR name=strict", "baseline@v0.1.0 baseline-k3s@v0.0.10 restricted@v0.1.0 restricted-k3s@v0.0.10"},
		{"name=k3s AND description=Baseline", "baseline-k3s@v0.0.10"},
	} {
		got := strings.Join(p.templateNames(t, cc.GetV2TemplatesParams{Filter: ptr(c.filter), OrderBy: ptr("name")}), " ")
		if got != c.want {
			t.Errorf("templates filter=%s: got [%s], want [%s]", c.filter, got, c.want)
		}
	}

	h1, _ := p.host(t, "f1")
	h2, _ := p.host(t, "f2")
	p.createCluster(t, "alpha-edge", "", h1)
	p.createCluster(t, "beta-edge", "", h2)
	for _, c := range []struct{ filter, want string }{
		{"name=edge", "alpha-edge beta-edge"},
		{"name=pha", "alpha-edge"},
		{"name=beta*", "beta-edge"},
		{"name=edge*", ""},
		{"kubernetesVersion=k3s", "alpha-edge beta-edge"},
		{"lifecyclePhase=provision", "alpha-edge beta-edge"},
		{"providerStatus=progress", "alpha-edge beta-edge"},
	} {
		got := strings.Join(p.clusterNames(t, cc.GetV2ClustersParams{Filter: ptr(c.filter), OrderBy: ptr("name")}), " ")
		if got != c.want {
			t.Errorf("clusters filter=%s: got [%s], want [%s]", c.filter, got, c.want)
		}
	}
}

// TestCMOrderByLists (issue 26 B3): orderBy takes a comma-separated list,
// with or without spaces, as the original's and orch-cli's spellings.
func TestCMOrderByLists(t *testing.T) {
	p := newCMProject(t)
	for _, v := range []string{"v0.0.10", "v0.0.9", "v0.0.12-dev"} {
		ti := referenceTemplate(t, "baseline-k3s.json")
		ti.Version = v
		p.importTemplate(t, ti)
	}
	ti := referenceTemplate(t, "restricted-k3s.json")
	ti.KubernetesVersion = "v1.32.1+k3s1"
	p.importTemplate(t, ti)
	for _, c := range []struct{ orderBy, want string }{
		{"name asc, version desc", "baseline@v0.1.0 baseline-k3s@v0.0.12-dev baseline-k3s@v0.0.10 baseline-k3s@v0.0.9 privileged@v0.1.0 restricted@v0.1.0 restricted-k3s@v0.0.10"},
		{"name,kubernetesVersion desc", "baseline@v0.1.0 baseline-k3s@v0.0.9 baseline-k3s@v0.0.10 baseline-k3s@v0.0.12-dev privileged@v0.1.0 restricted@v0.1.0 restricted-k3s@v0.0.10"},
		{"kubernetesVersion, name desc", "restricted-k3s@v0.0.10 restricted@v0.1.0 privileged@v0.1.0 baseline-k3s@v0.0.9 baseline-k3s@v0.0.10 baseline-k3s@v0.0.12-dev baseline@v0.1.0"},
	} {
		got := strings.Join(p.templateNames(t, cc.GetV2TemplatesParams{OrderBy: ptr(c.orderBy)}), " ")
		if got != c.want {
			t.Errorf("templates orderBy=%q:\n got [%s]\nwant [%s]", c.orderBy, got, c.want)
		}
	}
	call(p.cm.GetV2TemplatesWithResponse(ctx, &cc.GetV2TemplatesParams{Activeprojectid: p.pid, OrderBy: ptr("name, color desc")})).fails(t, 400, "InvalidArgument", "orderBy", "color")

	h1, _ := p.host(t, "o1")
	h2, _ := p.host(t, "o2")
	p.createCluster(t, "one", "restricted-k3s-v0.0.10", h1)
	p.createCluster(t, "two", "", h2)
	for _, c := range []struct{ orderBy, want string }{
		{"kubernetesVersion desc, name", "two one"},
		{"lifecyclePhase,name desc", "two one"},
		{"name asc,kubernetesVersion", "one two"},
	} {
		got := strings.Join(p.clusterNames(t, cc.GetV2ClustersParams{OrderBy: ptr(c.orderBy)}), " ")
		if got != c.want {
			t.Errorf("clusters orderBy=%q: got [%s], want [%s]", c.orderBy, got, c.want)
		}
	}
}

// TestCMClusterNamesAndNodeIDs (issue 26 B4): a cluster name with upper
// case and dots (a DNS subdomain, as the original's pattern) is taken;
// an unknown node ID, UUID or resource ID, is 404 "host … not found".
func TestCMClusterNamesAndNodeIDs(t *testing.T) {
	p := newCMProject(t)
	id, u := p.host(t, "n1")
	p.createCluster(t, "Edge.Upper", "", u)
	d := ok(p.cm.GetV2ClustersNameWithResponse(ctx, "Edge.Upper", &cc.GetV2ClustersNameParams{Activeprojectid: p.pid})).get(t)
	if str(d.Name) != "Edge.Upper" || len(*d.Nodes) != 1 || str((*d.Nodes)[0].Id) != id {
		t.Errorf("cluster Edge.Upper: got name %q nodes %v, want its node %s", str(d.Name), *d.Nodes, id)
	}
	// Names are case-sensitive, as Kubernetes object names.
	call(p.cm.GetV2ClustersNameWithResponse(ctx, "edge.upper", &cc.GetV2ClustersNameParams{Activeprojectid: p.pid})).fails(t, 404, "NotFound")

	for _, unknown := range []string{newUUID(), "host-0badcafe"} {
		call(p.cm.PostV2ClustersWithResponse(ctx, &cc.PostV2ClustersParams{Activeprojectid: p.pid},
			cc.ClusterSpec{Name: ptr("unknown-node"), Nodes: []cc.NodeSpec{{Id: unknown, Role: cc.All}}})).
			fails(t, 404, "NotFound", "host", unknown, "not found")
	}
	// Not a host ID nor a UUID: still 400, naming the field.
	call(p.cm.PostV2ClustersWithResponse(ctx, &cc.PostV2ClustersParams{Activeprojectid: p.pid},
		cc.ClusterSpec{Name: ptr("bad-node"), Nodes: []cc.NodeSpec{{Id: "node one", Role: cc.All}}})).
		fails(t, 400, "InvalidArgument", "nodes[0].id")
}

// TestCMForceDeleteLastNode (issue 26 B5): orch-cli's `delete cluster
// --force` removes each node with ?force=true, then the cluster. The last
// node's removal deletes the cluster, which lets its template go.
func TestCMForceDeleteLastNode(t *testing.T) {
	p := newCMProject(t)
	ti := referenceTemplate(t, "baseline-k3s.json")
	p.importTemplate(t, ti)
	h1, _ := p.host(t, "d1")
	h2, _ := p.host(t, "d2")
	for _, name := range []string{"forced", "other"} {
		node := h1
		if name == "other" {
			node = h2
		}
		p.createCluster(t, name, "baseline-k3s-v0.0.10", node)
	}
	call(p.cm.DeleteV2ClustersNameNodesNodeIdWithResponse(ctx, "forced", h1, &cc.DeleteV2ClustersNameNodesNodeIdParams{Activeprojectid: p.pid, Force: ptr(true)})).ok(t)
	r, err := p.cm.DeleteV2ClustersNameWithResponse(ctx, "forced", &cc.DeleteV2ClustersNameParams{Activeprojectid: p.pid})
	if err != nil || (r.StatusCode() != 204 && r.StatusCode() != 404) {
		t.Fatalf("delete cluster after its last node: got %v %d %s, want 204 or 404", err, r.StatusCode(), r.Body)
	}
	eventually(t, "the cluster without nodes is gone", func() bool {
		r, err := p.cm.GetV2ClustersNameWithResponse(ctx, "forced", &cc.GetV2ClustersNameParams{Activeprojectid: p.pid})
		return err == nil && r.StatusCode() == 404
	})

	// Without the cluster's DELETE too: the last node's forced removal alone.
	call(p.cm.DeleteV2ClustersNameNodesNodeIdWithResponse(ctx, "other", h2, &cc.DeleteV2ClustersNameNodesNodeIdParams{Activeprojectid: p.pid, Force: ptr(true)})).ok(t)
	eventually(t, "the cluster whose last node left is gone", func() bool {
		r, err := p.cm.GetV2ClustersNameWithResponse(ctx, "other", &cc.GetV2ClustersNameParams{Activeprojectid: p.pid})
		return err == nil && r.StatusCode() == 404
	})
	if n := p.clusterNames(t, cc.GetV2ClustersParams{}); len(n) != 0 {
		t.Errorf("clusters left: %v", n)
	}
	r2, err := p.cm.DeleteV2TemplatesNameVersionWithResponse(ctx, ti.Name, ti.Version, &cc.DeleteV2TemplatesNameVersionParams{Activeprojectid: p.pid})
	if err != nil || r2.StatusCode() != 204 {
		t.Fatalf("delete the template of the deleted clusters: got %v %d %s, want 204", err, r2.StatusCode(), r2.Body)
	}
}

// TestCMWordingAndShapes (issue 26 B6): the original's messages, unknown
// members ignored, arrays never null, the health check.
func TestCMWordingAndShapes(t *testing.T) {
	p := newCMProject(t)
	h := ok(p.cm.GetV2HealthzWithResponse(ctx)).get(t)
	if *h == "" {
		t.Error("healthz: empty answer")
	}

	call(p.cm.GetV2ClustersNameKubeconfigsWithResponse(ctx, "nowhere", &cc.GetV2ClustersNameKubeconfigsParams{Activeprojectid: p.pid, Authorization: "Bearer " + p.tok})).
		fails(t, 404, "NotFound", "kubeconfig not found")

	// A template with neither labels nor networks: its arrays and
	// objects are empty, not null.
	bare := cc.TemplateInfo{Name: "bare", Version: "v1.0.0", KubernetesVersion: "v1.33.5+k3s1"}
	p.importTemplate(t, bare)
	r, err := p.cm.GetV2TemplatesNameVersionWithResponse(ctx, "bare", "v1.0.0", &cc.GetV2TemplatesNameVersionParams{Activeprojectid: p.pid})
	if err != nil || r.StatusCode() != 200 {
		t.Fatalf("get template: %v %d %s", err, r.StatusCode(), r.Body)
	}
	var raw map[string]any
	_ = json.Unmarshal(r.Body, &raw)
	if l, ok := raw["cluster-labels"].(map[string]any); !ok || l == nil {
		t.Errorf("cluster-labels: got %#v, want {}", raw["cluster-labels"])
	}
	if bytes.Contains(r.Body, []byte("null")) {
		t.Errorf("the template has a null member: %s", r.Body)
	}
	// The generated client sends cidrBlocks: null for absent ranges.
	nullRanges := cc.TemplateInfo{Name: "empty-ranges", Version: "v1.0.0", KubernetesVersion: "v1.33.5+k3s1",
		ClusterNetwork: &cc.ClusterNetwork{Pods: &cc.NetworkRanges{}, Services: &cc.NetworkRanges{}}}
	p.importTemplate(t, nullRanges)
	r, _ = p.cm.GetV2TemplatesNameVersionWithResponse(ctx, "empty-ranges", "v1.0.0", &cc.GetV2TemplatesNameVersionParams{Activeprojectid: p.pid})
	if r.StatusCode() != 200 || bytes.Contains(r.Body, []byte("null")) {
		t.Errorf("template with empty ranges: got %d %s, want no null", r.StatusCode(), r.Body)
	}

	// Unknown members are ignored, as the original's gateway ignores them.
	host, _ := p.host(t, "w1")
	body := `{"name":"extra","nodes":[{"id":"` + host + `","role":"all","hostname":"x"}],"template":"bare-v1.0.0","region":"eu"}`
	cr, err := p.cm.PostV2ClustersWithBodyWithResponse(ctx, &cc.PostV2ClustersParams{Activeprojectid: p.pid}, "application/json", strings.NewReader(body))
	if err != nil || cr.StatusCode() != 201 {
		t.Fatalf("create with unknown members: got %v %d %s, want 201", err, cr.StatusCode(), cr.Body)
	}
	tb := `{"name":"extra-t","version":"v1.0.0","kubernetesVersion":"v1.33.5+k3s1","owner":"me"}`
	tr, err := p.cm.PostV2TemplatesWithBodyWithResponse(ctx, &cc.PostV2TemplatesParams{Activeprojectid: p.pid}, "application/json", strings.NewReader(tb))
	if err != nil || tr.StatusCode() != 201 {
		t.Fatalf("template with unknown members: got %v %d %s, want 201", err, tr.StatusCode(), tr.Body)
	}

	call(p.cm.DeleteV2TemplatesNameVersionWithResponse(ctx, "bare", "v1.0.0", &cc.DeleteV2TemplatesNameVersionParams{Activeprojectid: p.pid})).
		fails(t, 409, "AlreadyExists", "clusterTemplate is in use")
}
