package ui_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/ui"
	"github.com/eimhq/eim/workloads"
)

// withModules gives the UI the workloads, oob and objectstorage modules'
// APIs beside the api module's, as the server does (server.uiV1), and
// says those modules are deployed.
func withModules(t testing.TB) envOption {
	return func(st *sqlstore.Store, inv *inventory.Service, authn tokens, o *ui.Options) {
		raw := make([]byte, 32)
		rand.Read(raw)
		key, err := seal.New(raw)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("/", httpapi.InProcess(httpapi.New(inv, authn, httpapi.Options{})))
		objs, err := objstore.New(objstore.Options{Store: st, Authenticator: authn, Key: key, DataDir: t.TempDir(), AgentURL: "https://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		wl, err := workloads.New(workloads.Options{Store: st, FeedStore: st, Inventory: inv, Authenticator: authn, Key: key, Uploads: objs})
		if err != nil {
			t.Fatal(err)
		}
		ob, err := oob.New(oob.Options{Store: st, Authenticator: authn, Key: key, Feed: st})
		if err != nil {
			t.Fatal(err)
		}
		for _, rs := range []map[string]http.Handler{objs.Routes(), wl.Routes(), ob.Routes()} {
			for p, h := range rs {
				mux.Handle(p, h)
			}
		}
		o.API = mux
		o.Deployed = func() []string { return []string{"workloads", "oob", "objectstorage"} }
	}
}

// TestEdgeWorkloadPages: a writer applies a workload from YAML (a spec
// the API refuses comes back with its error and the text kept), sees it
// in the list with its devices by status and on its page with a device's
// containers and exit codes; a reader sees it all without the forms and
// a write of theirs is refused; the writer deletes it.
func TestEdgeWorkloadPages(t *testing.T) {
	e := newEnv(t, proj, withModules(t))
	ctx := context.Background()
	hosts := registerHosts(t, e, 2, "dev-")
	csrf := e.csrf(tokRW, "/ui/p/acme/edgeworkloads")
	post := func(tok, path string, form url.Values) (int, string, string) {
		form.Set("csrf", csrf)
		w := e.post(tok, "http://eim.test", path, form)
		return w.Code, w.Header().Get("Location"), w.Body.String()
	}

	spec := "deviceSelector:\n  matchLabels:\n    role: camera\npod:\n  spec:\n    containers:\n    - name: cam\n      image: quay.io/acme/cam:1.0\n"
	code, _, body := post(tokRW, "/ui/p/acme/edgeworkloads", url.Values{"name": {"cam"}, "spec": {strings.Replace(spec, "containers:", "containerz:", 1)}})
	if code != http.StatusBadRequest || !strings.Contains(body, `id="ew-err"`) || !strings.Contains(body, "containerz") {
		t.Fatalf("a spec the API refuses: got %d, want 400 with the error and the text kept:\n%.3000s", code, body)
	}
	code, loc, body := post(tokRW, "/ui/p/acme/edgeworkloads", url.Values{"name": {"cam"}, "spec": {spec}})
	if code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/p/acme/edgeworkloads/cam?applied=1") {
		t.Fatalf("apply: got %d %q, want 303 to the workload at revision 1:\n%.2000s", code, loc, body)
	}
	// The devices: the module's targets loop would do this from the
	// selector; here the store is told, and the device reports.
	if err := e.st.SetEdgeWorkloadTargets(ctx, proj, []eim.EdgeWorkloadTarget{{Workload: "cam", HostID: hosts[0].ResourceID, Revision: 1}, {Workload: "cam", HostID: hosts[1].ResourceID, Revision: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.RecordEdgeWorkloadStatus(ctx, proj, hosts[0].ResourceID, 0, []eim.EdgeWorkloadStatus{{Workload: "cam", HostID: hosts[0].ResourceID, Revision: 1,
		Phase: eim.PhaseDegraded, LastError: "cam exited", Containers: []eim.ContainerState{{Name: "cam", State: "exited", ExitCode: 3, Restarts: 2}}}}); err != nil {
		t.Fatal(err)
	}
	list := e.get(tokRO, "/ui/p/acme/edgeworkloads").Body.String()
	for _, want := range []string{`href="/ui/p/acme/edgeworkloads/cam"`, "role=camera", `data-devices="total">2<`, `data-devices="degraded">1<`} {
		if !strings.Contains(list, want) {
			t.Errorf("the list: no %q in\n%.4000s", want, list)
		}
	}
	if strings.Contains(list, `id="ew-apply"`) {
		t.Errorf("a reader is shown the apply form")
	}
	if !strings.Contains(list, `href="/ui/p/acme/edgeworkloads"`) {
		t.Errorf("no Edge workloads in the menu")
	}
	page := e.get(tokRO, "/ui/p/acme/edgeworkloads/cam").Body.String()
	for _, want := range []string{"quay.io/acme/cam:1.0", `data-host="` + hosts[0].ResourceID, `data-exit="3"`, "2 restarts", "cam exited", "logs?host=" + hosts[0].ResourceID} {
		if !strings.Contains(page, want) {
			t.Errorf("the workload page: no %q in\n%.6000s", want, page)
		}
	}
	if strings.Contains(page, `id="ew-delete"`) {
		t.Errorf("a reader is shown the delete button")
	}
	if strings.Contains(page, `id="ew-rollout"`) {
		t.Errorf("a workload without a rollout policy shows a rollout")
	}
	// With a rollout policy, the page shows its rollout as the module
	// stored it (a batch that missed its threshold).
	ew, err := e.st.SetEdgeWorkloadRolloutPolicy(ctx, proj, "cam", 1, &eim.RolloutPolicy{SuccessThreshold: "90%"})
	if err != nil {
		t.Fatal(err)
	}
	now := eim.NewTime(time.Now())
	if err := e.st.SaveEdgeWorkloadRollout(ctx, &eim.EdgeWorkloadRollout{Project: proj, Workload: "cam", ToRevision: ew.Revision, State: eim.RolloutPaused,
		Reason: "batch 1 missed its success threshold", Since: now, Total: 2, BatchStartedAt: now, ProgressAt: now}, true, nil, nil); err != nil {
		t.Fatal(err)
	}
	page = e.get(tokRO, "/ui/p/acme/edgeworkloads/cam").Body.String()
	for _, want := range []string{`id="ew-rollout"`, `data-rollout="state">` + eim.RolloutPaused + `<`, "batch 1 missed its success threshold"} {
		if !strings.Contains(page, want) {
			t.Errorf("the workload page: no %q in its rollout section:\n%.6000s", want, page)
		}
	}
	// The device's workloads on its host page.
	hp := e.get(tokRO, "/ui/p/acme/hosts/"+hosts[0].ResourceID).Body.String()
	if !regexp.MustCompile(`(?s)data-workload="cam">.{0,400}exit code 3, 2 restarts`).MatchString(hp) {
		t.Errorf("the host page does not show the device's workload with its exit code:\n%.8000s", hp)
	}
	if code, _, _ := post(tokRO, "/ui/p/acme/edgeworkloads/cam/delete", url.Values{}); code != http.StatusForbidden {
		t.Errorf("a reader's delete: got %d, want 403", code)
	}
	// A log tail: the page asks the device through the API, which waits
	// for its answer (given here as the device would).
	page2 := make(chan string, 1)
	go func() {
		page2 <- e.get(tokRO, "/ui/p/acme/edgeworkloads/cam/logs?host="+hosts[0].ResourceID+"&tail=5").Body.String()
	}()
	deadline := time.Now().Add(time.Minute)
	for answered := false; !answered; {
		if time.Now().After(deadline) {
			t.Fatal("no log request reached the device within a minute")
		}
		dw, err := e.st.DeviceWorkloads(ctx, proj, hosts[0].ResourceID)
		if err != nil {
			t.Fatal(err)
		}
		for _, lr := range dw.Logs {
			if err := e.st.AnswerEdgeWorkloadLogRequest(ctx, proj, hosts[0].ResourceID, lr.ID, []eim.ContainerLog{{Container: "cam", Text: "frame 41\nframe 42 <b>\n"}}, ""); err != nil {
				t.Fatal(err)
			}
			answered = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := <-page2; !strings.Contains(got, "frame 42 &lt;b&gt;") || !strings.Contains(got, "<h2>cam</h2>") || strings.Contains(got, "not answered yet") {
		t.Errorf("the log tail page: want the device's answer, escaped:\n%.4000s", got)
	}
	checkCSP(t, e, "/ui/p/acme/edgeworkloads", "/ui/p/acme/edgeworkloads/cam", "/ui/p/acme/hosts/"+hosts[0].ResourceID, "/ui/p/acme/settings")
	// Replace: a new revision.
	code, loc, _ = post(tokRW, "/ui/p/acme/edgeworkloads/cam", url.Values{"spec": {strings.Replace(spec, "cam:1.0", "cam:1.1", 1)}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "applied=2") {
		t.Fatalf("replace: got %d %q, want revision 2", code, loc)
	}
	if page := e.get(tokRW, "/ui/p/acme/edgeworkloads/cam").Body.String(); !strings.Contains(page, "quay.io/acme/cam:1.1") || !strings.Contains(page, "quay.io/acme/cam:1.0") {
		t.Errorf("the revisions: want both images listed")
	}
	if code, loc, _ := post(tokRW, "/ui/p/acme/edgeworkloads/cam/delete", url.Values{}); code != http.StatusSeeOther || !strings.Contains(loc, "deleted=cam") {
		t.Fatalf("delete: got %d %q", code, loc)
	}
	if _, err := e.st.FindEdgeWorkload(ctx, proj, "cam"); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("after the delete: got %v, want not found", err)
	}
}

// TestBMCForms: the host page's BMC section: set it (the password never
// shown back), its protocol, address and TLS shown, a refused address
// beside the form, a power job queued and listed; a reader gets no forms.
func TestBMCForms(t *testing.T) {
	e := newEnv(t, proj, withModules(t))
	h := registerHosts(t, e, 1, "bmc-")[0]
	hp := "/ui/p/acme/hosts/" + h.ResourceID
	csrf := e.csrf(tokRW, hp)
	post := func(tok, path string, form url.Values) (int, string, string) {
		form.Set("csrf", csrf)
		w := e.post(tok, "http://eim.test", path, form)
		return w.Code, w.Header().Get("Location"), w.Body.String()
	}
	if page := e.get(tokRW, hp).Body.String(); !strings.Contains(page, "No BMC") || !strings.Contains(page, `id="bmc-form"`) {
		t.Fatalf("a host without a BMC: want it said and the form offered")
	}
	code, _, body := post(tokRW, hp+"/bmc", url.Values{"protocol": {"REDFISH"}, "address": {"not a url"}, "username": {"root"}, "password": {"s3cret-pw"}})
	if code != http.StatusBadRequest || !strings.Contains(body, `id="bmc-err"`) || !strings.Contains(body, "address") || !strings.Contains(body, `value="not a url"`) {
		t.Errorf("a bad address: got %d, want 400 with the error naming address and the text kept:\n%.3000s", code, body)
	}
	if strings.Contains(body, "s3cret-pw") {
		t.Errorf("the refused form shows the password back")
	}
	code, loc, body := post(tokRW, hp+"/bmc", url.Values{"protocol": {"REDFISH"}, "address": {"https://127.0.0.1:1"}, "username": {"root"}, "password": {"s3cret-pw"}, "insecure": {"1"}})
	if code != http.StatusSeeOther || !strings.Contains(loc, "bmc=saved") {
		t.Fatalf("set the BMC: got %d %q:\n%.3000s", code, loc, body)
	}
	page := e.get(tokRO, hp).Body.String()
	for _, want := range []string{`data-bmc="protocol">REDFISH`, `data-bmc="address">https://127.0.0.1:1`, "insecure: the BMC's certificate is not checked", "password set"} {
		if !strings.Contains(page, want) {
			t.Errorf("the BMC section: no %q in\n%.8000s", want, page)
		}
	}
	if strings.Contains(page, "s3cret-pw") || strings.Contains(page, `id="bmc-form"`) || strings.Contains(page, `id="power-form"`) {
		t.Errorf("a reader's page shows the password or a form")
	}
	if code, _, _ := post(tokRO, hp+"/power", url.Values{"desiredPowerState": {"POWER_STATE_ON"}}); code != http.StatusForbidden {
		t.Errorf("a reader's power job: got %d, want 403", code)
	}
	if code, _, body := post(tokRW, hp+"/power", url.Values{"desiredPowerState": {"POWER_STATE_BOGUS"}}); code != http.StatusBadRequest || !strings.Contains(body, "desiredPowerState") {
		t.Errorf("a bad power state: got %d, want 400 naming desiredPowerState:\n%.2000s", code, body)
	}
	if code, loc, body := post(tokRW, hp+"/power", url.Values{"desiredPowerState": {"POWER_STATE_ON"}}); code != http.StatusSeeOther || !strings.Contains(loc, "bmc=power") {
		t.Fatalf("power on: got %d %q:\n%.2000s", code, loc, body)
	}
	page = e.get(tokRW, hp).Body.String()
	if !regexp.MustCompile(`data-job="bmcjob-[0-9a-f]+"><td><code>bmcjob-[0-9a-f]+</code></td><td>ON</td><td data-job-state>PENDING</td><td><span class="step">1. POWER ON</span>`).MatchString(page) || !strings.Contains(page, `id="power-form"`) {
		t.Errorf("the power job is not listed:\n%.8000s", page)
	}
	if code, loc, _ := post(tokRW, hp+"/bmc/delete", url.Values{}); code != http.StatusSeeOther || !strings.Contains(loc, "bmc=removed") {
		t.Errorf("remove the BMC: got %d %q", code, loc)
	}
}

// TestObjectStorageSettings: the settings page's object storage: set (the
// secret never shown), its check's outcome shown, a bad endpoint refused
// beside the form, removed; a reader sees it without the form.
func TestObjectStorageSettings(t *testing.T) {
	e := newEnv(t, proj, withModules(t))
	sp := "/ui/p/acme/settings"
	csrf := e.csrf(tokRW, sp)
	post := func(tok, path string, form url.Values) (int, string, string) {
		form.Set("csrf", csrf)
		w := e.post(tok, "http://eim.test", path, form)
		return w.Code, w.Header().Get("Location"), w.Body.String()
	}
	if page := e.get(tokRW, sp).Body.String(); !strings.Contains(page, "the devices upload to the embedded store") || !strings.Contains(page, `id="storage-form"`) {
		t.Fatalf("no object storage: want it said and the form offered")
	}
	form := url.Values{"endpoint": {"ftp://127.0.0.1:1"}, "bucket": {"data"}, "accessKeyId": {"AK"}, "secretAccessKey": {"very-secret-key"}, "pathStyle": {"1"}}
	code, _, body := post(tokRW, "/ui/p/acme/objectstorage", form)
	if code != http.StatusBadRequest || !strings.Contains(body, `id="storage-err"`) || !strings.Contains(body, "endpoint") || strings.Contains(body, "very-secret-key") {
		t.Errorf("a bad endpoint: got %d, want 400 naming endpoint, the secret not shown back:\n%.3000s", code, body)
	}
	form.Set("endpoint", "http://127.0.0.1:1")
	code, loc, body := post(tokRW, "/ui/p/acme/objectstorage", form)
	if code != http.StatusSeeOther || !strings.Contains(loc, "storage=saved") {
		t.Fatalf("save: got %d %q:\n%.3000s", code, loc, body)
	}
	page := e.get(tokRO, sp).Body.String()
	for _, want := range []string{`data-storage="endpoint">http://127.0.0.1:1`, `data-storage="bucket">data`, "secret key set", `data-storage="reachable"><span class="ind st-error" title="UNREACHABLE">`} {
		if !strings.Contains(page, want) {
			t.Errorf("the object storage section: no %q in\n%.8000s", want, page)
		}
	}
	if strings.Contains(page, "very-secret-key") || strings.Contains(page, `id="storage-form"`) {
		t.Errorf("a reader's page shows the secret or the form")
	}
	if code, loc, _ := post(tokRW, "/ui/p/acme/objectstorage/delete", url.Values{}); code != http.StatusSeeOther || !strings.Contains(loc, "storage=removed") {
		t.Errorf("remove: got %d %q", code, loc)
	}
}
