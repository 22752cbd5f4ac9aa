package clusters_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/clusters"
	"github.com/eimhq/eim/inventory"
	clusterv1 "github.com/eimhq/eim/proto/eim/cluster/v1"
)

const (
	active   = clusterv1.ReportStatusRequest_STATE_ACTIVE
	errState = clusterv1.ReportStatusRequest_STATE_ERROR
	inactive = clusterv1.ReportStatusRequest_STATE_INACTIVE
)

// The templates' API in both path forms: the tenant's three defaults,
// a new one, the errors naming the field, the default, deletion.
func TestTemplates(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		for _, header := range []bool{false, true} {
			var list clusters.TemplateList
			if s := e.callIn(e.proj, header, e.admin, "GET", "/templates", nil, &list); s != 200 {
				t.Fatalf("list: %d", s)
			}
			var names []string
			for _, tm := range list.TemplateInfoList {
				names = append(names, tm.Name+"-"+tm.Version)
			}
			if strings.Join(names, ",") != "baseline-v0.1.0,privileged-v0.1.0,restricted-v0.1.0" {
				t.Fatalf("templates: got %v, want the three defaults", names)
			}
			if list.DefaultTemplateInfo == nil || list.DefaultTemplateInfo.Name != "baseline" || list.TotalElements != 3 {
				t.Fatalf("defaultTemplateInfo %+v, total %d; want baseline, 3", list.DefaultTemplateInfo, list.TotalElements)
			}
		}
		tmpl := map[string]any{"name": "edge", "version": "v1.0.0", "kubernetesVersion": "v1.34.1+k3s1", "controlplaneprovidertype": "k3s",
			"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []string{"10.50.0.0/16"}}, "services": map[string]any{"cidrBlocks": []string{"10.51.0.0/16"}}}}
		if s := e.call(e.admin, "POST", "/templates", tmpl, nil); s != 201 {
			t.Fatalf("create: %d", s)
		}
		var eb errBody
		if s := e.call(e.admin, "POST", "/templates", tmpl, &eb); s != 409 {
			t.Fatalf("create again: %d %v, want 409", s, eb)
		}
		for field, bad := range map[string]map[string]any{
			"version":                           {"version": "1.0"},
			"kubernetesVersion":                 {"kubernetesVersion": "1.33"},
			"clusterNetwork.pods.cidrBlocks[0]": {"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []string{"10.0.0.1/8"}}}},
			"clusterconfiguration.kind":         {"clusterconfiguration": map[string]any{"kind": "KubeadmControlPlaneTemplate"}},
			"controlplaneprovidertype":          {"controlplaneprovidertype": "rke2"},
		} {
			body := map[string]any{}
			for k, v := range tmpl {
				body[k] = v
			}
			body["version"] = "v9.9.9"
			for k, v := range bad {
				body[k] = v
			}
			eb = errBody{}
			if s := e.call(e.admin, "POST", "/templates", body, &eb); s != 400 || !strings.HasPrefix(eb.Message, field) {
				t.Errorf("bad %s: %d %q, want 400 naming it", field, s, eb.Message)
			}
		}
		var got eim.ClusterTemplate
		if s := e.callIn(e.proj, true, e.admin, "GET", "/templates/edge/v1.0.0", nil, &got); s != 200 || got.KubernetesVersion != "v1.34.1+k3s1" {
			t.Fatalf("get: %d %+v", s, got)
		}
		tmpl["version"] = "v1.10.0"
		e.call(e.admin, "POST", "/templates", tmpl, nil)
		tmpl["version"] = "v1.2.0"
		e.call(e.admin, "POST", "/templates", tmpl, nil)
		var vs clusters.VersionList
		if s := e.call(e.admin, "GET", "/templates/edge/versions", nil, &vs); s != 200 || strings.Join(vs.VersionList, ",") != "v1.0.0,v1.2.0,v1.10.0" {
			t.Fatalf("versions: %d %v, want in numeric order", s, vs.VersionList)
		}
		if s := e.call(e.admin, "PUT", "/templates/edge/default", map[string]any{"version": ""}, nil); s != 200 {
			t.Fatalf("set default: %d", s)
		}
		var list clusters.TemplateList
		e.call(e.admin, "GET", "/templates?default=true", nil, &list)
		if list.DefaultTemplateInfo == nil || *list.DefaultTemplateInfo != (clusters.DefaultTemplate{Name: "edge", Version: "v1.10.0"}) || len(list.TemplateInfoList) != 1 {
			t.Fatalf("default after PUT: %+v %d, want edge v1.10.0 (the latest) alone", list.DefaultTemplateInfo, len(list.TemplateInfoList))
		}
		e.call(e.admin, "GET", "/templates?filter=name%3Dedge%20AND%20version%3Dv1.1*&orderBy=version%20desc", nil, &list)
		if len(list.TemplateInfoList) != 1 || list.TemplateInfoList[0].Version != "v1.10.0" {
			t.Fatalf("filter: got %d", len(list.TemplateInfoList))
		}
		if s := e.call(e.admin, "GET", "/templates?filter=colour%3Dred", nil, &eb); s != 400 || !strings.HasPrefix(eb.Message, "filter") {
			t.Fatalf("bad filter: %d %q", s, eb.Message)
		}
		if s := e.call(e.admin, "DELETE", "/templates/edge/v1.0.0", nil, nil); s != 204 {
			t.Fatalf("delete: %d", s)
		}
		if s := e.call(e.admin, "DELETE", "/templates/edge/v1.0.0", nil, nil); s != 404 {
			t.Fatalf("delete again: %d, want 404", s)
		}
		// Roles: a cluster reader reads, does not write; another project's
		// user sees nothing.
		reader := e.token(e.proj.ID + "_cl-r")
		if s := e.call(reader, "GET", "/templates", nil, nil); s != 200 {
			t.Fatalf("reader list: %d", s)
		}
		if s := e.call(reader, "POST", "/templates", tmpl, nil); s != 403 {
			t.Fatalf("reader create: %d, want 403", s)
		}
		// The original's template roles: the read role reads templates
		// only, the write role changes them, neither reaches clusters.
		tplReader := e.token(e.proj.ID + "_cl-tpl-r")
		if s := e.call(tplReader, "GET", "/templates", nil, nil); s != 200 {
			t.Fatalf("template reader list: %d, want 200", s)
		}
		if s := e.call(tplReader, "POST", "/templates", tmpl, nil); s != 403 {
			t.Fatalf("template reader create: %d, want 403", s)
		}
		tplWriter := e.token(e.proj.ID + "_cl-tpl-rw")
		if s := e.call(tplWriter, "DELETE", "/templates/edge/v1.10.0", nil, nil); s != 204 {
			t.Fatalf("template writer delete: %d, want 204", s)
		}
		if s := e.call(tplWriter, "GET", "/clusters", nil, nil); s != 403 {
			t.Fatalf("template writer lists clusters: %d, want 403", s)
		}
		other := e.project("other")
		stranger := e.token(other.ID + "_im-rw")
		if s := e.call(stranger, "GET", "/templates", nil, nil); s != 403 {
			t.Fatalf("another project's user: %d, want 403", s)
		}
		if s := e.callIn(e.proj, true, e.admin, "GET", "/templates", nil, nil); s != 200 {
			t.Fatal("header form")
		}
	})
}

// clusterOf reads a cluster through the API.
func (e *env) clusterOf(name string) clusters.ClusterDetail {
	e.t.Helper()
	var d clusters.ClusterDetail
	if s := e.call(e.admin, "GET", "/clusters/"+name, nil, &d); s != 200 {
		e.t.Fatalf("get cluster %s: %d", name, s)
	}
	return d
}

// The lifecycle, driven through the nodes' RPCs with their own tokens:
// a multi-node cluster initialised by its first control-plane node, the
// others joining it; a node added and two removed (with and without a
// drain); an upgrade rolled a node at a time that stops at a failure and
// is retried; the deletion; and the heartbeats' versions all along.
func TestLifecycle(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		n1, n2, n3 := e.host(e.proj.Name, "192.0.2.11"), e.host(e.proj.Name, "192.0.2.12"), e.host(e.proj.Name, "192.0.2.13")
		spec := map[string]any{"name": "line-1", "labels": map[string]string{"site": "berlin"}, "nodes": []map[string]string{
			{"id": n1.id, "role": "all"}, {"id": n2.uuid, "role": "controlplane"}, {"id": n3.id, "role": "worker"}}}
		var created string
		if s := e.call(e.admin, "POST", "/clusters", spec, &created); s != 201 || created != "successfully created cluster line-1" {
			t.Fatalf("create: %d %q, want the original's message", s, created)
		}
		e.reconcile()
		p1 := e.plan(n1, "")
		if p1.Plan == nil || !p1.Plan.Init || p1.Plan.ServerUrl != "" || p1.Plan.JoinToken == "" || p1.Plan.KubernetesVersion != "v1.33.5+k3s1" {
			t.Fatalf("first node's plan: %+v, want init with a join token", p1)
		}
		if !strings.Contains(p1.Plan.ConfigYaml, `node-name: "`+n1.id+`"`) || !strings.Contains(p1.Plan.ConfigYaml, "admission-control-config-file") {
			t.Errorf("config yaml:\n%s", p1.Plan.ConfigYaml)
		}
		if p1.Plan.Connect == nil || !strings.HasPrefix(p1.Plan.Connect.Token, eim.ConnectTokenPrefix) {
			t.Errorf("control-plane node's connect: %+v", p1.Plan.Connect)
		}
		if again := e.plan(n1, p1.Version); !again.Unchanged || again.Plan != nil {
			t.Errorf("plan at the version the node has: %+v, want unchanged", again)
		}
		if p := e.plan(n2, ""); p.Version != "" || p.Plan != nil {
			t.Fatalf("second control-plane node before the first is up: %+v, want no plan", p)
		}
		if p := e.plan(n3, ""); p.Plan != nil {
			t.Fatal("worker before the control plane is up: got a plan")
		}
		// The heartbeats' version follows, from memory.
		eventually(t, "the heartbeat version", func() bool { return e.svc.Version(e.ctx, e.proj.Name, n1.id) == p1.Version })
		if d := e.clusterOf("line-1"); d.LifecyclePhase.Message != "provisioning" || d.NodeQuantity != 3 || d.Labels["site"] != "berlin" {
			t.Fatalf("while provisioning: %+v", d.ClusterInfo)
		}
		e.report(n1, active, "")
		e.reconcile()
		p2, p3 := e.plan(n2, ""), e.plan(n3, "")
		if p2.Plan == nil || p2.Plan.Init || p2.Plan.ServerUrl != "https://192.0.2.11:6443" || p2.Plan.Role != clusterv1.Plan_ROLE_CONTROLPLANE {
			t.Fatalf("second control-plane node: %+v", p2.Plan)
		}
		if p3.Plan == nil || p3.Plan.ServerUrl != "https://192.0.2.11:6443" || p3.Plan.Connect != nil || p3.Plan.JoinToken != p1.Plan.JoinToken {
			t.Fatalf("worker: %+v", p3.Plan)
		}
		e.report(n2, active, "")
		e.report(n3, active, "")
		e.reconcile()
		d := e.clusterOf("line-1")
		if d.LifecyclePhase.Message != "active" || d.ProviderStatus.Message != "ready" || d.ProviderStatus.Indicator != eim.StatusIdle ||
			d.ControlPlaneReady.Message != "ready" || d.NodeHealth.Indicator != eim.StatusIdle || d.Template != "baseline-v0.1.0" {
			t.Fatalf("all active: %+v", d)
		}
		for _, n := range d.Nodes {
			if n.Status.Condition != "STATUS_CONDITION_READY" {
				t.Errorf("node %s: %+v", n.ID, n.Status)
			}
		}
		var byNode clusters.ClusterDetail
		if s := e.call(e.admin, "GET", "/clusters/"+n3.uuid+"/clusterdetail", nil, &byNode); s != 200 || byNode.Name != "line-1" {
			t.Fatalf("clusterdetail by node: %d %+v", s, byNode.Name)
		}
		// Its hosts' instances are the members of its workload.
		e.checkWorkload("line-1", 3)

		// A node added joins the running cluster.
		n4 := e.host(e.proj.Name, "192.0.2.14")
		nodes := []map[string]string{{"id": n1.id, "role": "all"}, {"id": n2.id, "role": "controlplane"}, {"id": n3.id, "role": "worker"}, {"id": n4.id, "role": "worker"}}
		if s := e.call(e.admin, "PUT", "/clusters/line-1/nodes", nodes, nil); s != 200 {
			t.Fatalf("add node: %d", s)
		}
		e.reconcile()
		if p := e.plan(n4, ""); p.Plan == nil || p.Plan.ServerUrl == "" {
			t.Fatalf("added node: %+v", p)
		}
		e.report(n4, active, "")
		e.reconcile()
		e.checkWorkload("line-1", 4)
		// Removed: drained first; gone once it says INACTIVE.
		if s := e.call(e.admin, "DELETE", "/clusters/line-1/nodes/"+n4.id, nil, nil); s != 200 {
			t.Fatalf("remove node: %d", s)
		}
		e.reconcile()
		if p := e.plan(n4, ""); p.Removal == nil || !p.Removal.Drain || p.Plan != nil {
			t.Fatalf("removed node: %+v, want a removal with a drain", p)
		}
		if d := e.clusterOf("line-1"); d.NodeQuantity != 3 || len(d.Nodes) != 4 {
			t.Fatalf("while the node leaves: %d nodes, %d listed", d.NodeQuantity, len(d.Nodes))
		}
		e.report(n4, inactive, "")
		e.reconcile()
		if p := e.plan(n4, ""); p.Version != "" || p.Plan != nil || p.Removal != nil {
			t.Fatalf("after its removal: %+v, want a member of none", p)
		}
		eventually(t, "no version for the removed node", func() bool { return e.svc.Version(e.ctx, e.proj.Name, n4.id) == "" })
		// Forced: no drain.
		if s := e.call(e.admin, "DELETE", "/clusters/line-1/nodes/"+n3.uuid+"?force=true", nil, nil); s != 200 {
			t.Fatalf("force remove: %d", s)
		}
		e.reconcile()
		if p := e.plan(n3, ""); p.Removal == nil || p.Removal.Drain {
			t.Fatalf("force-removed node: %+v, want no drain", p)
		}
		// INACTIVE about a plan that is not the removal frees nothing; one
		// naming the removal's version does, as one naming none.
		e.reportAt(n3, inactive, p3.Version, "")
		e.reconcile()
		if d := e.clusterOf("line-1"); len(d.Nodes) != 3 {
			t.Fatalf("after INACTIVE about an old plan: %d nodes listed, want 3", len(d.Nodes))
		}
		e.reportAt(n3, inactive, e.plan(n3, "").GetVersion(), "")
		e.reconcile()
		if d := e.clusterOf("line-1"); len(d.Nodes) != 2 || d.LifecyclePhase.Message != "active" {
			t.Fatalf("after the removals: %d nodes, %s", len(d.Nodes), d.LifecyclePhase.Message)
		}
		e.checkWorkload("line-1", 2)
		// The freed host may join another cluster.
		if s := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "solo", "nodes": []map[string]string{{"id": n4.id, "role": "all"}}}, nil); s != 201 {
			t.Fatalf("a freed host in a new cluster: %d", s)
		}

		// An upgrade: control plane first, one node at a time.
		tmpl := map[string]any{"name": "baseline", "version": "v0.2.0", "kubernetesVersion": "v1.34.1+k3s1"}
		if s := e.call(e.admin, "POST", "/templates", tmpl, nil); s != 201 {
			t.Fatalf("new template: %d", s)
		}
		before2 := e.plan(n2, "").Version
		if s := e.call(e.admin, "PUT", "/clusters/line-1/template", map[string]string{"name": "baseline", "version": "v0.2.0"}, nil); s != 202 {
			t.Fatalf("upgrade: %d", s)
		}
		e.reconcile()
		u1 := e.plan(n1, "")
		if u1.Plan.GetKubernetesVersion() != "v1.34.1+k3s1" || !u1.Plan.DrainBeforeUpgrade || !u1.Plan.Init {
			t.Fatalf("first node upgraded: %+v", u1.Plan)
		}
		if v := e.plan(n2, "").Version; v != before2 {
			t.Fatal("the second node moved before the first was up again")
		}
		if d := e.clusterOf("line-1"); d.LifecyclePhase.Message != "updating" {
			t.Fatalf("during the upgrade: %s", d.LifecyclePhase.Message)
		}
		// Deleting the template the nodes move from is refused.
		if s := e.call(e.admin, "DELETE", "/templates/baseline/v0.1.0", nil, nil); s != 409 {
			t.Fatalf("delete a template in use: %d, want 409", s)
		}
		e.report(n1, active, "")
		e.reconcile()
		u2 := e.plan(n2, "")
		if u2.Plan.GetKubernetesVersion() != "v1.34.1+k3s1" || u2.Plan.ServerUrl != "https://192.0.2.11:6443" {
			t.Fatalf("second node upgraded: %+v", u2.Plan)
		}
		// It fails: the roll-out stops, the cluster says why.
		e.report(n2, errState, "k3s did not start: port 6443 in use")
		e.reconcile()
		d = e.clusterOf("line-1")
		if d.LifecyclePhase.Indicator != eim.StatusError || d.ProviderStatus.Indicator != eim.StatusError ||
			!strings.Contains(d.NodeHealth.Message, "port 6443 in use") || d.NodeHealth.Indicator != eim.StatusError {
			t.Fatalf("after the failure: %+v", d.ClusterInfo)
		}
		var sum clusters.Summary
		e.call(e.admin, "GET", "/clusters/summary", nil, &sum)
		if sum.TotalClusters != 2 || sum.Error != 1 {
			t.Fatalf("summary: %+v", sum)
		}
		var list clusters.ClusterList
		e.call(e.admin, "GET", "/clusters?filter=providerStatus%3Derror*", nil, &list)
		if len(list.Clusters) != 1 || list.Clusters[0].Name != "line-1" {
			t.Fatalf("filter on providerStatus: %+v", list)
		}
		e.reconcile()
		if v := e.plan(n2, "").Version; v != u2.Version {
			t.Fatal("a failed node got another plan without a new request")
		}
		// PUT template again retries it.
		e.call(e.admin, "PUT", "/clusters/line-1/template", map[string]string{"name": "baseline", "version": "v0.2.0"}, nil)
		e.reconcile()
		r2 := e.plan(n2, "")
		if r2.Version == u2.Version || r2.Plan.GetKubernetesVersion() != "v1.34.1+k3s1" {
			t.Fatalf("retry: %s (was %s)", r2.Version, u2.Version)
		}
		e.report(n2, active, "")
		e.reconcile()
		if d := e.clusterOf("line-1"); d.LifecyclePhase.Message != "active" || d.KubernetesVersion != "v1.34.1+k3s1" {
			t.Fatalf("after the upgrade: %+v", d.ClusterInfo)
		}
		// The old template is free now.
		if s := e.call(e.admin, "PUT", "/templates/baseline/default", map[string]string{"version": "v0.2.0"}, nil); s != 200 {
			t.Fatal(s)
		}

		// Deleted: every node uninstalls (no drain); the rows go when
		// they said INACTIVE.
		if s := e.call(e.admin, "DELETE", "/clusters/line-1", nil, nil); s != 204 {
			t.Fatalf("delete: %d", s)
		}
		e.reconcile()
		for _, n := range []*node{n1, n2} {
			if p := e.plan(n, ""); p.Removal == nil || p.Removal.Drain {
				t.Fatalf("node of a deleted cluster: %+v", p)
			}
		}
		if d := e.clusterOf("line-1"); d.LifecyclePhase.Message != "deleting" {
			t.Fatalf("deleting: %s", d.LifecyclePhase.Message)
		}
		e.report(n1, inactive, "")
		e.reconcile()
		e.clusterOf("line-1")
		e.report(n2, inactive, "")
		e.reconcile()
		if s := e.call(e.admin, "GET", "/clusters/line-1", nil, nil); s != 404 {
			t.Fatalf("a deleted cluster: %d, want 404", s)
		}
		e.checkWorkload("line-1", -1)
		// Its kubeconfig is not found either (the connect module, told the
		// clusters module runs).
		if s := e.call(e.admin, "GET", "/clusters/line-1/kubeconfigs", nil, nil); s != 404 {
			t.Fatalf("kubeconfig of a deleted cluster: %d, want 404", s)
		}
		var kc struct{ Kubeconfig string }
		if s := e.callIn(e.proj, true, e.admin, "GET", "/clusters/solo/kubeconfigs", nil, &kc); s != 200 || !strings.Contains(kc.Kubeconfig, "/kubernetes/"+e.proj.ID+"-solo") {
			t.Fatalf("kubeconfig (Activeprojectid form): %d %q", s, kc.Kubeconfig)
		}
	})
}

// checkWorkload checks that the cluster's workload has n members (-1: no
// workload).
func (e *env) checkWorkload(cluster string, n int) {
	e.t.Helper()
	var found *eim.Workload
	var members int
	e.store.View(e.ctx, e.proj.Name, func(tx eim.Tx) error {
		items, _, err := tx.List(e.ctx, eim.KindWorkload, eim.Query{Where: []eim.Cond{{Field: "name", Value: cluster}}})
		if err != nil || len(items) == 0 {
			return err
		}
		found = items[0].(*eim.Workload)
		members, err = tx.Count(e.ctx, eim.KindWorkloadMember, eim.Query{Where: []eim.Cond{{Field: "workloadId", Value: found.ResourceID}}})
		return err
	})
	switch {
	case n < 0 && found != nil:
		e.t.Fatalf("workload of %s: still there", cluster)
	case n >= 0 && (found == nil || found.Kind != eim.WorkloadKindCluster || members != n):
		e.t.Fatalf("workload of %s: %+v with %d members, want kind CLUSTER with %d", cluster, found, members, n)
	}
}

// A node that fails its install shows in the cluster's status; the
// artifact store gives the plan its binary with its SHA-256, served to
// the node with its token.
func TestInstallFailureAndArtifacts(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		dir := e.arts + "/k3s/v1.33.5+k3s1"
		if err := mkfile(dir, "k3s", "#!/bin/sh\necho k3s\n"); err != nil {
			t.Fatal(err)
		}
		if err := mkfile(dir, "k3s-airgap-images-amd64.tar.zst", "images"); err != nil {
			t.Fatal(err)
		}
		n := e.host(e.proj.Name, "192.0.2.21")
		if s := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "bad", "template": "restricted-v0.1.0", "nodes": []map[string]string{{"id": n.id}}}, nil); s != 201 {
			t.Fatalf("create: %d", s)
		}
		e.reconcile()
		p := e.plan(n, "")
		arts := p.Plan.GetArtifacts()
		if len(arts) != 2 || arts[0].Kind != clusterv1.Artifact_KIND_BINARY || arts[0].Sha256 != sha("#!/bin/sh\necho k3s\n") || arts[1].Kind != clusterv1.Artifact_KIND_IMAGES {
			t.Fatalf("artifacts: %+v", arts)
		}
		if !strings.Contains(p.Plan.ConfigYaml, `"traefik"`) {
			t.Errorf("restricted template's config: %s", p.Plan.ConfigYaml)
		}
		// The node downloads it with its token; without one it is refused.
		req, _ := http.NewRequest("GET", e.agent.URL+arts[0].Url, nil)
		req.Header.Set("Authorization", "Bearer "+n.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || sha(b.String()) != arts[0].Sha256 {
			t.Fatalf("download: %d", res.StatusCode)
		}
		if res, _ := http.Get(e.agent.URL + arts[0].Url); res.StatusCode != 401 {
			t.Fatalf("download without a token: %d, want 401", res.StatusCode)
		}
		req, _ = http.NewRequest("GET", e.agent.URL+clusters.ArtifactsPath+"../secrets.key", nil)
		req.Header.Set("Authorization", "Bearer "+n.token)
		if res, _ := http.DefaultClient.Do(req); res.StatusCode != 404 {
			t.Fatalf("a path out of the store: %d, want 404", res.StatusCode)
		}

		e.report(n, errState, "sha256 mismatch: k3s")
		e.reconcile()
		d := e.clusterOf("bad")
		if d.ProviderStatus.Indicator != eim.StatusError || !strings.Contains(d.NodeHealth.Message, "sha256 mismatch") || d.Nodes[0].Status.Condition != "STATUS_CONDITION_NOTREADY" {
			t.Fatalf("after a failed install: %+v", d)
		}
	})
}

// Errors of the clusters' API; a host joins one cluster at most, also
// when requests race for it; another project neither sees a cluster nor
// uses its hosts.
func TestClusterErrorsAndIsolation(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		n := e.host(e.proj.Name, "192.0.2.31")
		var eb errBody
		for body, field := range map[string]string{
			`{"name":"Bad_Name","nodes":[{"id":"` + n.id + `"}]}`:               "name",
			`{"name":"x","nodes":[]}`:                                           "nodes",
			`{"name":"x","nodes":[{"id":"` + n.id + `","role":"boss"}]}`:        "nodes[0].role",
			`{"name":"x","nodes":[{"id":"` + n.id + `","role":"worker"}]}`:      "nodes",
			`{"name":"x","template":"nope","nodes":[{"id":"` + n.id + `"}]}`:    "template",
			`{"name":"x","labels":{"a b":"c"},"nodes":[{"id":"` + n.id + `"}]}`: "labels",
		} {
			eb = errBody{}
			if s := e.call(e.admin, "POST", "/clusters", jsonRaw(body), &eb); s != 400 || !strings.HasPrefix(eb.Message, field) {
				t.Errorf("%s: %d %q, want 400 naming %s", body, s, eb.Message, field)
			}
		}
		if s := e.call(e.admin, "GET", "/clusters/nope", nil, nil); s != 404 {
			t.Fatalf("unknown cluster: %d", s)
		}
		if s := e.call(e.admin, "GET", "/clusters?orderBy=colour", nil, &eb); s != 400 || !strings.HasPrefix(eb.Message, "orderBy") {
			t.Fatalf("bad orderBy: %d %q", s, eb.Message)
		}
		if s := e.call(e.admin, "GET", "/clusters?pageSize=101", nil, &eb); s != 400 || !strings.HasPrefix(eb.Message, "pageSize") {
			t.Fatalf("bad pageSize: %d %q", s, eb.Message)
		}
		if s := e.callIn(e.proj, true, e.admin, "GET", "/clusters", nil, nil); s != 200 {
			t.Fatalf("header form: %d", s)
		}
		// Without the header on a /v2/ path: 400 naming it.
		req, _ := http.NewRequest("GET", e.api.URL+"/v2/clusters", nil)
		req.Header.Set("Authorization", "Bearer "+e.admin)
		if res, _ := http.DefaultClient.Do(req); res.StatusCode != 400 {
			t.Fatalf("no Activeprojectid: %d", res.StatusCode)
		}

		// Ten requests race for one host: one wins.
		var wg sync.WaitGroup
		codes := make([]int, 10)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = e.call(e.admin, "POST", "/clusters", map[string]any{"name": "race-" + string(rune('a'+i)), "nodes": []map[string]string{{"id": n.id}}}, nil)
			}()
		}
		wg.Wait()
		slices.Sort(codes)
		if codes[9] != 409 || codes[8] != 409 || slices.Index(codes, 201) != 0 || codes[1] != 409 {
			t.Fatalf("racing creations: %v, want one 201 and nine 409", codes)
		}
		var list clusters.ClusterList
		e.call(e.admin, "GET", "/clusters", nil, &list)
		if list.TotalElements != 1 {
			t.Fatalf("clusters after the race: %d", list.TotalElements)
		}
		won := list.Clusters[0].Name
		eb = errBody{}
		if s := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "late", "nodes": []map[string]string{{"id": n.id}}}, &eb); s != 409 || !strings.Contains(eb.Message, won) {
			t.Fatalf("a host in a cluster: %d %q, want 409 naming %s", s, eb.Message, won)
		}
		// The last control-plane node stays while workers remain.
		w := e.host(e.proj.Name, "192.0.2.32")
		e.call(e.admin, "PUT", "/clusters/"+won+"/nodes", []map[string]string{{"id": n.id}, {"id": w.id, "role": "worker"}}, nil)
		if s := e.call(e.admin, "DELETE", "/clusters/"+won+"/nodes/"+n.id, nil, nil); s != 409 {
			t.Fatalf("remove the last control plane: %d, want 409", s)
		}
		if s := e.call(e.admin, "PUT", "/clusters/"+won+"/nodes", []map[string]string{{"id": n.id}, {"id": w.id, "role": "all"}}, &eb); s != 400 {
			t.Fatalf("role change: %d", s)
		}
		if s := e.call(e.admin, "PUT", "/clusters/"+won+"/labels", map[string]any{"labels": map[string]string{"tier": "edge"}}, nil); s != 200 {
			t.Fatal(s)
		}
		if d := e.clusterOf(won); d.Labels["tier"] != "edge" || len(d.Labels) != 1 {
			t.Fatalf("labels: %v", d.Labels)
		}

		// Another project: neither the cluster nor the hosts.
		other := e.project("other")
		ot := e.token(other.ID + "_cl-rw")
		if s := e.call(ot, "GET", "/clusters/"+won, nil, nil); s != 403 {
			t.Fatalf("another project's user on this project: %d, want 403", s)
		}
		if s := e.callIn(other, false, ot, "GET", "/clusters/"+won, nil, nil); s != 404 {
			t.Fatalf("this project's cluster in another: %d, want 404", s)
		}
		eb = errBody{}
		if s := e.callIn(other, true, ot, "POST", "/clusters", map[string]any{"name": "steal", "nodes": []map[string]string{{"id": w.id}}}, &eb); s != 404 || !strings.Contains(eb.Message, "not found") {
			t.Fatalf("another project's host: %d %q, want 404 not found", s, eb.Message)
		}
		// Its own host, by UUID too: fine.
		o := e.host(other.Name, "192.0.2.41")
		if s := e.callIn(other, true, ot, "POST", "/clusters", map[string]any{"name": "mine", "nodes": []map[string]string{{"id": o.uuid}}}, nil); s != 201 {
			t.Fatalf("own host: %d", s)
		}
		// A node sees only its own plan: another project's node token
		// finds no cluster of this project's.
		e.reconcile()
		if p := e.plan(o, ""); p.Plan.GetClusterName() != "mine" {
			t.Fatalf("other project's node: %+v", p)
		}
	})
}

// A project's deletion removes its clusters and templates, and the
// connect module's rows of its clusters; the other project keeps its.
func TestProjectDeletionCascade(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		keep := e.project("keep")
		for _, p := range []*eim.Project{e.proj, keep} {
			n := e.host(p.Name, "192.0.2.51")
			if s := e.callIn(p, true, e.admin, "POST", "/clusters", map[string]any{"name": "c", "nodes": []map[string]string{{"id": n.id}}}, nil); s != 201 {
				t.Fatal(s)
			}
		}
		e.reconcile() // issues the clusters' connect tokens
		if cs, _ := e.store.ListConnectCredentials(e.ctx, e.proj.Name); len(cs) != 1 {
			t.Fatalf("connect credentials: %d, want the cluster's", len(cs))
		}
		if _, err := e.inv.StartProjectDeletion(e.ctx, e.proj.Name, false); eim.ErrorCode(err) != eim.EPRECONDITION || !strings.Contains(err.Error(), "1 clusters") {
			t.Fatalf("delete a project with a cluster without force: %v", err)
		}
		if _, err := e.inv.StartProjectDeletion(e.ctx, e.proj.Name, true); err != nil {
			t.Fatal(err)
		}
		// The hosts' two-phase deletes are finished by the API module's
		// reaper.
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		go func() { defer close(done); inventory.NewReaper(e.inv, inventory.ReaperOptions{}).Run(ctx) }()
		defer func() { cancel(); <-done }()
		del := newDeleter(e)
		eventually(t, "the project deleted", func() bool {
			if _, err := del.Step(e.ctx); err != nil {
				t.Fatal(err)
			}
			_, err := e.store.FindProject(e.ctx, e.proj.Name)
			return eim.ErrorCode(err) == eim.ENOTFOUND
		})
		for _, p := range []string{e.proj.Name, keep.Name} {
			cs, err := e.store.ListClusters(e.ctx, p)
			ts, err2 := e.store.ClusterTemplates(e.ctx, p)
			creds, err3 := e.store.ListConnectCredentials(e.ctx, p)
			if err != nil || err2 != nil || err3 != nil {
				t.Fatal(err, err2, err3)
			}
			want := 0
			if p == keep.Name {
				want = 1
			}
			if len(cs) != want || len(creds) != want || (want == 1) != (len(ts) == 3) {
				t.Errorf("project %s after the deletion: %d clusters, %d templates, %d connect credentials", p, len(cs), len(ts), len(creds))
			}
		}
		// The name is free for a new project, born with the templates.
		again := e.project(e.proj.Name)
		if ts, _ := e.store.ClusterTemplates(e.ctx, again.Name); len(ts) != 3 {
			t.Fatalf("templates of the new project: %d", len(ts))
		}
	})
}

// A control-plane node whose host reported no address cannot be joined:
// the cluster says so instead of waiting in silence, and the joins go on
// once the address is known.
func TestJoinWithoutAddress(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		cp, w := e.host(e.proj.Name, ""), e.host(e.proj.Name, "192.0.2.42")
		spec := map[string]any{"name": "noaddr", "nodes": []map[string]string{{"id": cp.id, "role": "all"}, {"id": w.id, "role": "worker"}}}
		if s := e.call(e.admin, "POST", "/clusters", spec, nil); s != 201 {
			t.Fatalf("create: %d", s)
		}
		e.reconcile()
		e.report(cp, active, "")
		e.reconcile()
		d := e.clusterOf("noaddr")
		if want := "in progress: no address known for control-plane node " + cp.id; !strings.HasPrefix(d.ProviderStatus.Message, want) {
			t.Fatalf("providerStatus: got %q, want it to start %q", d.ProviderStatus.Message, want)
		}
		if p := e.plan(w, ""); p.Plan != nil {
			t.Fatalf("worker planned without a server URL: %+v", p.Plan)
		}
		e.setAddress(cp, "192.0.2.41")
		e.reconcile()
		if p := e.plan(w, ""); p.Plan == nil || p.Plan.ServerUrl != "https://192.0.2.41:6443" {
			t.Fatalf("worker once the address is known: %+v", p)
		}
		if d := e.clusterOf("noaddr"); strings.Contains(d.ProviderStatus.Message, "no address") {
			t.Fatalf("providerStatus after: %q", d.ProviderStatus.Message)
		}
	})
}

// TestHostChangeWakesItsCluster: the running reconciler (re-listing only
// hourly here) acts on a node's host as it changes: the control-plane
// node's address learnt lets the worker join at once, not at the next
// re-list; a change of a host in no cluster reconciles nothing.
func TestHostChangeWakesItsCluster(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		svc := e.service(func(o *clusters.Options) { o.Relist = time.Hour })
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = svc.Reconcile(ctx) }()
		t.Cleanup(func() { cancel(); <-done })

		cp, w := e.host(e.proj.Name, ""), e.host(e.proj.Name, "192.0.2.42")
		spec := map[string]any{"name": "wake", "nodes": []map[string]string{{"id": cp.id, "role": "all"}, {"id": w.id, "role": "worker"}}}
		if s := e.call(e.admin, "POST", "/clusters", spec, nil); s != 201 {
			t.Fatalf("create: %d", s)
		}
		eventually(t, "the control-plane node planned", func() bool { return e.plan(cp, "").Plan != nil })
		e.report(cp, active, "")
		eventually(t, "no address for the control plane said", func() bool {
			return strings.Contains(e.clusterOf("wake").ProviderStatus.Message, "no address known")
		})
		e.setAddress(cp, "192.0.2.41")
		eventually(t, "the worker planned with the server's address", func() bool {
			p := e.plan(w, "")
			return p.Plan != nil && p.Plan.ServerUrl == "https://192.0.2.41:6443"
		})
	})
}

// TestContentFrom: a template file contentFrom the original's
// pod-security-admission-config secret reaches the node's plan with the
// PodSecurity configuration of its level; a cluster of a template naming
// a secret EIM does not provide is refused, naming the file, as is one of
// a kubeadm template (which imports).
func TestContentFrom(t *testing.T) {
	engines(t, func(t *testing.T, e *env) {
		tmpl := func(name, provider string, file map[string]any) map[string]any {
			return map[string]any{"name": name, "version": "v0.0.10", "kubernetesVersion": "v1.33.5+k3s1", "controlplaneprovidertype": provider,
				"clusterconfiguration": map[string]any{"kind": "KThreesControlPlaneTemplate", "spec": map[string]any{"template": map[string]any{
					"spec": map[string]any{"kthreesConfigSpec": map[string]any{"files": []map[string]any{file}}}}}}}
		}
		psa := map[string]any{"path": "/var/lib/rancher/k3s/server/psa.yaml", "contentFrom": map[string]any{"secret": map[string]string{"name": eim.PodSecuritySecret, "key": "restricted.yaml"}}}
		other := map[string]any{"path": "/etc/x", "contentFrom": map[string]any{"configMap": map[string]string{"name": "mine", "key": "x"}}}
		for _, b := range []map[string]any{tmpl("psa-k3s", "k3s", psa), tmpl("other-k3s", "k3s", other), tmpl("kubeadm-k3s", "kubeadm", other)} {
			if s := e.call(e.admin, "POST", "/templates", b, nil); s != 201 {
				t.Fatalf("import %s: %d", b["name"], s)
			}
		}
		var eb errBody
		if s := e.call(e.admin, "POST", "/templates", tmpl("both", "k3s", map[string]any{"path": "/etc/y", "content": "y", "contentFrom": psa["contentFrom"]}), &eb); s != 400 || !strings.Contains(eb.Message, "files[0].contentFrom") {
			t.Errorf("content and contentFrom: %d %q, want 400 naming files[0].contentFrom", s, eb.Message)
		}
		n := e.host(e.proj.Name, "192.0.2.51")
		for tpl, words := range map[string]string{"other-k3s-v0.0.10": "config map mine key x", "kubeadm-k3s-v0.0.10": "kubeadm"} {
			eb = errBody{}
			if s := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "c", "template": tpl, "nodes": []map[string]string{{"id": n.id}}}, &eb); s != 400 || !strings.Contains(eb.Message, words) {
				t.Errorf("cluster of %s: %d %q, want 400 saying %q", tpl, s, eb.Message, words)
			}
		}
		if s := e.call(e.admin, "POST", "/clusters", map[string]any{"name": "psa", "template": "psa-k3s-v0.0.10", "nodes": []map[string]string{{"id": n.id}}}, nil); s != 201 {
			t.Fatalf("create: %d", s)
		}
		e.reconcile()
		p := e.plan(n, "")
		files := p.Plan.GetFiles()
		if len(files) != 1 || files[0].Path != "/var/lib/rancher/k3s/server/psa.yaml" || files[0].Content != eim.PodSecurityAdmission("restricted") {
			t.Fatalf("plan's files: %+v, want the restricted PodSecurity configuration", files)
		}
	})
}
