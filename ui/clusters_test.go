package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/clusters"
	gateway "github.com/eimhq/eim/connect"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/tenant"
	"github.com/eimhq/eim/ui"
)

// withClusters deploys the clusters and connect modules: their v2 routes
// on one mux, as the server mounts them, the UI's V2, and the project's
// default templates (the tenant module's).
func withClusters(t *testing.T) envOption {
	return func(st *sqlstore.Store, inv *inventory.Service, authn tokens, o *ui.Options) {
		dir := t.TempDir()
		key, err := seal.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		iss, err := auth.LoadIssuer(dir)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		for p, h := range clusters.New(clusters.Options{Store: st, Inventory: inv, Authenticator: authn, Key: key}).Routes() {
			mux.Handle(p, h)
		}
		g := gateway.New(gateway.Options{Store: st, Authenticator: authn, Minter: iss, ClustersDeployed: func() bool { return true }})
		for p, h := range g.Routes() {
			if strings.Contains(p, "/v2/") {
				mux.Handle(p, h)
			}
		}
		o.V2 = mux
		o.Deployed = func() []string { return []string{"api", "clusters", "connect", "ui"} }
		if err := tenant.NewReconciler(tenant.Options{Store: st, Inventory: inv}).Reconcile(context.Background(), proj); err != nil {
			t.Fatal(err)
		}
	}
}

// errBeside finds the error shown beside an input: <p … id="ID-err">MSG</p>.
func errBeside(body, id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `-err"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// writeForms counts a page's forms that write (all but sign-out).
func writeForms(body string) int {
	return strings.Count(body, `method="post"`) - strings.Count(body, `action="/ui/logout"`)
}

// TestClusterPages: the clusters pages over the v2 API — the menu entry
// only while the module is deployed; a cluster created through the form
// (and the API's errors beside the fields), listed with its phase and in
// the summary; its page with its nodes (links to their hosts), labels and
// actions, each through the API; the host's cluster; the templates; the
// kubeconfig; a read-only user without write controls, refused anyway.
func TestClusterPages(t *testing.T) {
	plain := newEnv(t, proj)
	if body := plain.get(tokRW, "/ui/p/acme/").Body.String(); strings.Contains(body, `/ui/p/acme/clusters"`) {
		t.Errorf("the menu has Clusters without the module deployed")
	}
	if w := plain.get(tokRW, "/ui/p/acme/clusters"); w.Code != http.StatusNotFound {
		t.Errorf("the clusters page without the module: got %d, want 404", w.Code)
	}

	e := newEnv(t, proj, withClusters(t))
	hosts := registerHosts(t, e, 3, "node-")
	ctx := context.Background()
	if body := e.get(tokRO, "/ui/p/acme/").Body.String(); !strings.Contains(body, `href="/ui/p/acme/clusters"`) {
		t.Errorf("the menu has no Clusters with the module deployed")
	}

	// The create form: the default template marked, the free hosts.
	form := e.get(tokRW, "/ui/p/acme/newcluster").Body.String()
	if !strings.Contains(form, "baseline-v0.1.0") || !strings.Contains(form, "— default") || !strings.Contains(form, `value="`+hosts[0].ResourceID+`"`) {
		t.Fatalf("the create form lacks the templates or the hosts:\n%.2000s", form)
	}
	csrf := e.csrf(tokRW, "/ui/p/acme/newcluster")
	send := func(token, path string, v url.Values) (int, string, string) {
		t.Helper()
		v.Set("csrf", csrf)
		w := e.post(token, "http://eim.test", path, v)
		return w.Code, w.Header().Get("Location"), w.Body.String()
	}
	// The API's errors, beside the field they name, what was typed kept.
	code, _, body := send(tokRW, "/ui/p/acme/clusters", url.Values{"name": {"Bad_Name"}, "node": {hosts[0].ResourceID}, "role-" + hosts[0].ResourceID: {"worker"}})
	if code != http.StatusBadRequest || !strings.HasPrefix(errBeside(body, "new-name"), "name: ") || !strings.Contains(body, `value="Bad_Name"`) {
		t.Errorf("a bad name: got %d, error beside the name %q", code, errBeside(body, "new-name"))
	}
	code, _, body = send(tokRW, "/ui/p/acme/clusters", url.Values{"name": {"c1"}, "node": {hosts[0].ResourceID}, "role-" + hosts[0].ResourceID: {"worker"}})
	if code != http.StatusBadRequest || !strings.Contains(errBeside(body, "new-nodes"), "control plane") {
		t.Errorf("only a worker: got %d, error beside the nodes %q", code, errBeside(body, "new-nodes"))
	}
	if !regexp.MustCompile(`value="worker" selected`).MatchString(body) {
		t.Errorf("the picked role is not kept after an error")
	}
	code, _, body = send(tokRW, "/ui/p/acme/clusters", url.Values{"name": {"c1"}, "more": {"host-00000000"}})
	if code != http.StatusNotFound || !strings.HasPrefix(errBeside(body, "new-nodes"), "nodes[0].id: host host-00000000 not found") {
		t.Errorf("an unknown host: got %d, error beside the nodes %q, want 404 beside them", code, errBeside(body, "new-nodes"))
	}
	code, loc, _ := send(tokRW, "/ui/p/acme/clusters", url.Values{"name": {"c1"}, "node": {hosts[0].ResourceID}, "role-" + hosts[0].ResourceID: {"all"},
		"labels": {"env=lab"}})
	if code != http.StatusSeeOther || loc != "/ui/p/acme/clusters?created=c1" {
		t.Fatalf("create: got %d to %q", code, loc)
	}
	cl, err := e.st.FindCluster(ctx, proj, "c1")
	if err != nil || len(cl.Nodes) != 1 || cl.Nodes[0].HostID != hosts[0].ResourceID || cl.Labels["env"] != "lab" || cl.TemplateName != "baseline" {
		t.Fatalf("the cluster stored: %v %+v", err, cl)
	}

	// The list: the row with its phase, the summary, the API's filter and
	// sort, its error beside the box.
	list := e.get(tokRO, "/ui/p/acme/clusters").Body.String()
	if !regexp.MustCompile(`(?s)data-cluster="c1".*class="phase">.*provisioning`).MatchString(list) {
		t.Errorf("the list has no c1 in its provisioning phase:\n%.3000s", list)
	}
	for k, want := range map[string]string{"total": "1", "inprogress": "1", "ready": "0", "error": "0"} {
		if !strings.Contains(list, `data-ccount="`+k+`">`+want+`<`) {
			t.Errorf("the summary's %s: want %s", k, want)
		}
	}
	if !strings.Contains(list, "no tunnel") {
		t.Errorf("the list does not show the connection state")
	}
	if b := e.get(tokRO, "/ui/p/acme/clusters?filter="+url.QueryEscape("name=nope*")).Body.String(); strings.Contains(b, `data-cluster="c1"`) {
		t.Errorf("the filter name=nope* lists c1")
	}
	w := e.get(tokRO, "/ui/p/acme/clusters?filter="+url.QueryEscape("colour=red"))
	if w.Code != http.StatusBadRequest || !strings.HasPrefix(errBeside(w.Body.String(), "cluster-filter"), "filter: ") {
		t.Errorf("a bad filter: got %d, error %q", w.Code, errBeside(w.Body.String(), "cluster-filter"))
	}
	if !strings.Contains(list, `aria-sort="ascending"`) || !strings.Contains(list, "dir=desc&amp;sort=name") {
		t.Errorf("the name column is not the sorted one, or has no link to sort it the other way")
	}

	// The cluster's page: nodes linked to their hosts, labels, actions.
	page := e.get(tokRW, "/ui/p/acme/clusters/c1").Body.String()
	for _, want := range []string{`href="/ui/p/acme/hosts/` + hosts[0].ResourceID + `"`, "node-000", "PROVISIONING", "baseline-v0.1.0", "env", "Download kubeconfig",
		`action="/ui/p/acme/clusters/c1/nodes"`, `action="/ui/p/acme/clusters/c1/template"`, `action="/ui/p/acme/clusters/c1/labels"`, `action="/ui/p/acme/clusters/c1/delete"`,
		`action="/ui/p/acme/clusters/c1/nodes/` + hosts[0].ResourceID + `/remove"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the cluster's page lacks %q", want)
		}
	}
	if strings.Contains(page, `value="`+hosts[0].ResourceID+`" id="add-n-`) {
		t.Errorf("the add-nodes picker offers the cluster's own host")
	}
	code, _, body = send(tokRW, "/ui/p/acme/clusters/c1/labels", url.Values{"labels": {"bad key!=x"}})
	if code != http.StatusBadRequest || !strings.HasPrefix(errBeside(body, "lab-labels"), "labels: ") || !strings.Contains(body, "bad key!=x") {
		t.Errorf("bad labels: got %d, error beside the labels %q", code, errBeside(body, "lab-labels"))
	}
	if code, loc, _ = send(tokRW, "/ui/p/acme/clusters/c1/labels", url.Values{"labels": {"env=prod\ntier=edge"}}); code != http.StatusSeeOther {
		t.Errorf("labels: got %d to %q", code, loc)
	}
	if code, _, _ = send(tokRW, "/ui/p/acme/clusters/c1/nodes", url.Values{"node": {hosts[1].ResourceID}, "role-" + hosts[1].ResourceID: {"worker"}}); code != http.StatusSeeOther {
		t.Errorf("add a node: got %d", code)
	}
	if code, _, _ = send(tokRW, "/ui/p/acme/clusters/c1/nodes/"+hosts[1].ResourceID+"/remove", url.Values{"force": {"1"}}); code != http.StatusSeeOther {
		t.Errorf("remove a node: got %d", code)
	}
	// The last control-plane node stays while a worker does: the API's
	// error beside that node's form.
	if code, _, _ = send(tokRW, "/ui/p/acme/clusters/c1/nodes", url.Values{"node": {hosts[2].ResourceID}, "role-" + hosts[2].ResourceID: {"worker"}}); code != http.StatusSeeOther {
		t.Errorf("add another node: got %d", code)
	}
	code, _, body = send(tokRW, "/ui/p/acme/clusters/c1/nodes/"+hosts[0].ResourceID+"/remove", url.Values{})
	if code == http.StatusSeeOther || !strings.Contains(body, "last control-plane node") {
		t.Errorf("removing the last control-plane node: got %d, want the API's refusal on the page", code)
	}
	cl, err = e.st.FindCluster(ctx, proj, "c1")
	if err != nil || cl.Labels["tier"] != "edge" || len(cl.Labels) != 2 || cl.Node(hosts[1].ResourceID) == nil || !cl.Node(hosts[1].ResourceID).Removing ||
		!cl.Node(hosts[1].ResourceID).Force || cl.Node(hosts[2].ResourceID) == nil || cl.Node(hosts[0].ResourceID).Removing {
		t.Fatalf("the cluster after the actions: %v %+v", err, cl)
	}

	// The templates: a new version from YAML, made the default; one in
	// use cannot go (the API's error beside its row).
	code, _, body = send(tokRW, "/ui/p/acme/templates", url.Values{"template": {"name: baseline\nversion: v0.2\n"}})
	if code != http.StatusBadRequest || !strings.HasPrefix(errBeside(body, "tnew-template"), "version: ") {
		t.Errorf("a bad template: got %d, error %q", code, errBeside(body, "tnew-template"))
	}
	yaml := "name: baseline\nversion: v0.2.0\nkubernetesVersion: v1.34.1+k3s1\ndescription: newer\nclusterNetwork:\n  pods: {cidrBlocks: [10.45.0.0/16]}\n  services: {cidrBlocks: [10.46.0.0/16]}\n"
	if code, loc, _ = send(tokRW, "/ui/p/acme/templates", url.Values{"template": {yaml}}); code != http.StatusSeeOther || loc != "/ui/p/acme/templates?created=baseline-v0.2.0" {
		t.Fatalf("a template from YAML: got %d to %q", code, loc)
	}
	if code, _, _ = send(tokRW, "/ui/p/acme/templates/baseline/v0.2.0/default", url.Values{}); code != http.StatusSeeOther {
		t.Errorf("set the default: got %d", code)
	}
	code, _, body = send(tokRW, "/ui/p/acme/templates/baseline/v0.1.0/delete", url.Values{})
	if code != http.StatusConflict || !strings.Contains(body, `role="alert"`) {
		t.Errorf("delete a template in use: got %d, want 409 shown", code)
	}
	tpl := e.get(tokRO, "/ui/p/acme/templates").Body.String()
	if !regexp.MustCompile(`(?s)data-template="baseline-v0.2.0".*?<strong>default</strong>`).MatchString(tpl) {
		t.Errorf("the templates page does not mark baseline-v0.2.0 the default")
	}
	// The upgrade, to the version made above.
	if code, _, _ = send(tokRW, "/ui/p/acme/clusters/c1/template", url.Values{"template": {"baseline/v0.2.0"}}); code != http.StatusSeeOther {
		t.Errorf("upgrade: got %d", code)
	}
	code, _, body = send(tokRW, "/ui/p/acme/clusters/c1/template", url.Values{"template": {"nosuch/v9.9.9"}})
	if code != http.StatusBadRequest || errBeside(body, "up-template") == "" && !strings.Contains(body, "not found") {
		t.Errorf("upgrade to no template: got %d, want the API's error on the form", code)
	}
	if cl, err = e.st.FindCluster(ctx, proj, "c1"); err != nil || cl.TemplateVersion != "v0.2.0" {
		t.Errorf("the cluster's template after the upgrade: %v %+v", err, cl)
	}

	// The host's page: its cluster.
	hp := e.get(tokRO, "/ui/p/acme/hosts/"+hosts[0].ResourceID).Body.String()
	if !strings.Contains(hp, `id="cl-h"`) || !strings.Contains(hp, `href="/ui/p/acme/clusters/c1"`) || !strings.Contains(hp, ">all<") {
		t.Errorf("the host's page does not show its cluster")
	}
	if hp := e.get(tokRO, "/ui/p/acme/hosts/"+registerHosts(t, e, 1, "free-")[0].ResourceID).Body.String(); !strings.Contains(hp, "In no cluster.") {
		t.Errorf("a free host's page does not say it is in no cluster")
	}

	// The kubeconfig, from the connect module, for a reader too.
	w = e.get(tokRO, "/ui/p/acme/clusters/c1/kubeconfig")
	if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Disposition"), `filename="c1.kubeconfig.yaml"`) ||
		!strings.Contains(w.Body.String(), "kind: Config") || !strings.Contains(w.Body.String(), "http://eim.test/kubernetes/") {
		t.Errorf("the kubeconfig: %d %q\n%s", w.Code, w.Header().Get("Content-Disposition"), w.Body.String())
	}

	// A read-only user: no write controls; a write sent anyway refused.
	for _, path := range []string{"/ui/p/acme/clusters", "/ui/p/acme/clusters/c1", "/ui/p/acme/templates"} {
		b := e.get(tokRO, path).Body.String()
		if n := writeForms(b); n != 0 || strings.Contains(b, "/newcluster") {
			t.Errorf("%s: a read-only user sees %d write forms", path, n)
		}
	}
	if w := e.get(tokRO, "/ui/p/acme/newcluster"); w.Code != http.StatusForbidden {
		t.Errorf("the create form for a read-only user: got %d, want 403", w.Code)
	}
	roCSRF := e.csrf(tokRO, "/ui/p/acme/clusters")
	w = e.post(tokRO, "http://eim.test", "/ui/p/acme/clusters/c1/delete", url.Values{"csrf": {roCSRF}})
	if w.Code != http.StatusForbidden {
		t.Errorf("a read-only user's delete: got %d, want 403", w.Code)
	}
	// Another origin, with the writer's token: refused before the API.
	w = e.post(tokRW, "http://evil.test", "/ui/p/acme/clusters/c1/delete", url.Values{"csrf": {csrf}})
	if w.Code != http.StatusForbidden {
		t.Errorf("a delete from another origin: got %d, want 403", w.Code)
	}

	checkCSP(t, e, "/ui/p/acme/clusters", "/ui/p/acme/clusters?filter=colour%3Dred", "/ui/p/acme/clusters/c1", "/ui/p/acme/newcluster",
		"/ui/p/acme/templates", "/ui/p/acme/hosts/"+hosts[0].ResourceID)

	// The deletion, through the API: the cluster is being deleted.
	if code, loc, _ = send(tokRW, "/ui/p/acme/clusters/c1/delete", url.Values{}); code != http.StatusSeeOther || loc != "/ui/p/acme/clusters?deleted=c1" {
		t.Errorf("delete: got %d to %q", code, loc)
	}
	if cl, err = e.st.FindCluster(ctx, proj, "c1"); err != nil || !cl.Deleting {
		t.Errorf("the cluster after its deletion: %v %+v", err, cl)
	}
}

// TestClusterRoleOnly: a user whose only role in the project is a cluster
// role (the original's `<project>_cl-r` / `_cl-rw`) gets the clusters
// pages and no other: the project opens on its clusters, the menu holds
// Clusters alone, the host pages and forms are refused, no host is shown
// (nodes by ID, no picker), and the cluster writer's forms work through
// the API while the cluster reader has none.
func TestClusterRoleOnly(t *testing.T) {
	e := newEnv(t, proj, withClusters(t))
	hosts := registerHosts(t, e, 2, "node-")
	if w := e.get(tokClRW, "/ui/p/acme/"); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/p/acme/clusters" {
		t.Fatalf("the project's home for a cluster role: got %d to %q, want 303 to its clusters", w.Code, w.Header().Get("Location"))
	}
	for _, path := range []string{"/ui/p/acme/hosts", "/ui/p/acme/hosts/" + hosts[0].ResourceID, "/ui/p/acme/locations", "/ui/p/acme/audit", "/ui/p/acme/resources?kind=os"} {
		if w := e.get(tokClRW, path); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "clusters only") {
			t.Errorf("%s for a cluster role: got %d, want 403 saying why", path, w.Code)
		}
	}
	page := e.get(tokClRW, "/ui/p/acme/clusters")
	body := page.Body.String()
	if page.Code != 200 || strings.Contains(body, `href="/ui/p/acme/hosts"`) || strings.Contains(body, `href="/ui/p/acme/locations"`) || !strings.Contains(body, `href="/ui/p/acme/clusters"`) {
		t.Errorf("the clusters page's menu for a cluster role: got %d\n%.1500s", page.Code, body)
	}
	form := e.get(tokClRW, "/ui/p/acme/newcluster").Body.String()
	if strings.Contains(form, `value="`+hosts[0].ResourceID+`"`) || strings.Contains(form, "node-000") || !strings.Contains(form, "shows no hosts") {
		t.Errorf("the create form shows hosts to a cluster role:\n%.2000s", form)
	}
	csrf := e.csrf(tokClRW, "/ui/p/acme/newcluster")
	w := e.post(tokClRW, "http://eim.test", "/ui/p/acme/clusters", url.Values{"csrf": {csrf}, "name": {"edge"}, "more": {hosts[0].ResourceID + ":all"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("a cluster created by a cluster writer: got %d %.600s", w.Code, w.Body.String())
	}
	cl := e.get(tokClRW, "/ui/p/acme/clusters/edge").Body.String()
	if !strings.Contains(cl, hosts[0].ResourceID) || strings.Contains(cl, `href="/ui/p/acme/hosts/`) || strings.Contains(cl, "node-000") {
		t.Errorf("the cluster's page for a cluster role: nodes should be IDs without host links or names\n%.3000s", cl)
	}
	if w := e.post(tokClRW, "http://eim.test", "/ui/p/acme/hosts/bulk", url.Values{"csrf": {csrf}, "action": {"onboard"}, "id": {hosts[1].ResourceID}}); w.Code != http.StatusForbidden {
		t.Errorf("a host form sent by a cluster role: got %d, want 403", w.Code)
	}

	// The cluster reader: the pages, no write control, a forged write refused.
	ro := e.get(tokClR, "/ui/p/acme/clusters/edge").Body.String()
	if writeForms(ro) != 0 || !strings.Contains(ro, hosts[0].ResourceID) {
		t.Errorf("the cluster's page for a cluster reader: %d write forms", writeForms(ro))
	}
	w = e.post(tokClR, "http://eim.test", "/ui/p/acme/clusters/edge/delete", url.Values{"csrf": {e.csrf(tokClR, "/ui/p/acme/clusters")}})
	if w.Code != http.StatusForbidden {
		t.Errorf("a cluster reader's forged delete: got %d, want 403", w.Code)
	}
	// Another project is not listed, nor open.
	if w := e.get(tokClRW, "/ui/p/other/clusters"); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "no access") {
		t.Errorf("another project's clusters for a cluster role: got %d", w.Code)
	}
}

// TestHostPickerShowsLiveness: the new-cluster picker shows each host's
// liveness (Running, No Connection, from its status) with its indicator,
// not its desired state, which says nothing of whether it can take a node.
func TestHostPickerShowsLiveness(t *testing.T) {
	e := newEnv(t, proj, withClusters(t))
	hosts := registerHosts(t, e, 3, "pick-")
	set := func(h *eim.Host, st inventory.Status) {
		t.Helper()
		err := e.inv.Store().Update(context.Background(), proj, func(tx eim.Tx) error {
			hs, err := tx.GetMany(context.Background(), eim.KindHost, []string{h.ResourceID})
			if err != nil || len(hs) != 1 {
				return fmt.Errorf("read %s: %v", h.ResourceID, err)
			}
			return inventory.SetHostStatus(context.Background(), tx, hs[0].(*eim.Host), st)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	set(hosts[0], inventory.Status{Text: "Running", Indicator: eim.StatusIdle, Timestamp: 1 << 30})
	set(hosts[1], inventory.Status{Text: "No Connection", Indicator: eim.StatusError, Timestamp: 1 << 30})
	form := e.get(tokRW, "/ui/p/acme/newcluster").Body.String()
	row := func(id string) string {
		m := regexp.MustCompile(`(?s)value="` + id + `".*?</tr>`).FindString(form)
		if m == "" {
			t.Fatalf("no picker row for %s:\n%.3000s", id, form)
		}
		return m
	}
	for _, c := range []struct {
		h         *eim.Host
		text, ind string
	}{
		{hosts[0], "Running", `class="ind st-idle" title="ok"`},
		{hosts[1], "No Connection", `class="ind st-error" title="error"`},
		{hosts[2], "Not Connected", `class="ind st-unknown" title="unknown"`}, // registered, never seen
	} {
		r := row(c.h.ResourceID)
		if !strings.Contains(r, "</span>"+c.text+"</td>") || !strings.Contains(r, c.ind) {
			t.Errorf("%s: want %q with %s in\n%s", c.h.Name, c.text, c.ind, r)
		}
		if strings.Contains(strings.ToLower(r), "onboarded") || strings.Contains(r, ">registered<") {
			t.Errorf("%s: the picker shows a desired state:\n%s", c.h.Name, r)
		}
	}
	if !strings.Contains(form, `<th scope="col">Status</th>`) {
		t.Errorf("the picker's column is not Status")
	}
}
