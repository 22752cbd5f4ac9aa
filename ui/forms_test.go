package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// TestResourceForms: a writer creates, changes and deletes resources with
// the forms derived from the kinds' schemas, through the API: what the
// API refuses is shown beside the field it names, the audit log names
// the user, and a read-only user gets no forms and is refused a forged
// one.
func TestResourceForms(t *testing.T) {
	e := newEnv(t, proj)
	ctx := context.Background()
	csrf := e.csrf(tokRW, "/ui/p/acme/resources?kind=localaccount")
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		form.Set("csrf", csrf)
		w := e.post(tokRW, "http://eim.test", path, form)
		return w.Code, w.Body.String()
	}

	// A local account: created, listed, its audit record the user's.
	code, _ := post("/ui/p/acme/resources/localaccount", url.Values{"username": {"ops"}, "sshKey": {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB8mQ6u4GkNK1b0kv8lNqf5rDr0X5n7eF0nV5U9b3Q0t ops@lab"}})
	if code != http.StatusSeeOther {
		t.Fatalf("create a local account: got %d, want 303", code)
	}
	page, err := e.inv.List(ctx, proj, eim.KindLocalAccount, inventory.ListQuery{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("local accounts: %v, %v; want the one created", page, err)
	}
	la := page.Items[0].Base().ResourceID
	if body := e.get(tokRW, "/ui/p/acme/resources?kind=localaccount").Body.String(); !strings.Contains(body, la) || !strings.Contains(body, ">ops<") {
		t.Errorf("the list does not show the new account %s", la)
	}
	recs, _, err := e.inv.Audit(ctx, proj, inventory.AuditQuery{Filter: "resourceId=" + `"` + la + `"`})
	if err != nil || len(recs) != 1 || recs[0].Principal != "user:rw" {
		t.Errorf("the create's audit record: %+v, %v; want one by user:rw", recs, err)
	}

	// The API's error on a field is shown beside that field, and what
	// was typed is kept.
	code, body := post("/ui/p/acme/resources/localaccount", url.Values{"username": {"ops2"}, "sshKey": {"not a key"}})
	if code != http.StatusBadRequest {
		t.Errorf("a bad SSH key: got %d, want 400", code)
	}
	fieldErr := regexp.MustCompile(`(?s)name="sshKey"[^>]*aria-invalid="true".*?<p class="error field-error" id="new0-sshKey-err">sshKey: [^<]+</p>`)
	if !fieldErr.MatchString(body) || !strings.Contains(body, `value="ops2"`) {
		t.Errorf("a bad SSH key: the error is not beside sshKey, or the form lost what was typed:\n%.2000s", body)
	}
	// One the page itself cannot read (a number), beside its field too.
	code, body = post("/ui/p/acme/resources/telemetryprofile", url.Values{"variant": {string(eim.TelemetryMetrics)}, "metricsInterval": {"often"}})
	if code != http.StatusBadRequest || !strings.Contains(body, `id="new1-metricsInterval-err">metricsInterval: want a whole number`) {
		t.Errorf("a metrics interval that is not a number: got %d, the error not beside the field", code)
	}

	// An OS profile changed through the edit form (PATCH of what changed).
	osr, err := e.inv.Create(ctx, proj, &eim.OS{Name: "edge-os", ProfileName: "edge-os", Architecture: "x86_64",
		ImageURL: "http://127.0.0.1/os.img", Sha256: strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	osID := osr.Base().ResourceID
	w := e.get(tokRW, "/ui/p/acme/resources/os/"+osID)
	form := formValues(t, w.Body.String(), "/ui/p/acme/resources/os/"+osID)
	if _, ok := form["sha256"]; ok {
		t.Errorf("the edit form offers sha256, which an OS profile's update keeps")
	}
	form.Set("name", "edge-os-lab")
	if code, body := post("/ui/p/acme/resources/os/"+osID, form); code != http.StatusSeeOther {
		t.Fatalf("edit an OS profile: got %d: %.1500s", code, body)
	}
	if got, _ := e.inv.Get(ctx, proj, eim.KindOS, osID); got.(*eim.OS).Name != "edge-os-lab" {
		t.Errorf("the OS profile's name: got %q", got.(*eim.OS).Name)
	}

	// An OS update policy, then deleted.
	if code, body := post("/ui/p/acme/resources/osupdatepolicy", url.Values{"name": {"monthly"}, "targetOsId": {osID}, "updatePolicy": {"UPDATE_POLICY_TARGET"}}); code != http.StatusSeeOther {
		t.Fatalf("create an OS update policy: got %d: %.1500s", code, body)
	}
	pols, _ := e.inv.List(ctx, proj, eim.KindOSUpdatePolicy, inventory.ListQuery{})
	if len(pols.Items) != 1 {
		t.Fatalf("OS update policies: %d, want 1", len(pols.Items))
	}
	pol := pols.Items[0].Base().ResourceID
	if code, _ := post("/ui/p/acme/resources/osupdatepolicy/"+pol+"/delete", url.Values{}); code != http.StatusSeeOther {
		t.Errorf("delete the policy: got %d, want 303", code)
	}
	if _, err := e.inv.Get(ctx, proj, eim.KindOSUpdatePolicy, pol); eim.ErrorCode(err) != eim.ENOTFOUND {
		t.Errorf("the deleted policy: %v, want not found", err)
	}

	// A read-only user: no forms, and a forged one refused.
	for _, path := range []string{"/ui/p/acme/resources?kind=localaccount", "/ui/p/acme/resources/localaccount/" + la, "/ui/p/acme/resources/os/" + osID, "/ui/p/acme/settings"} {
		if body := e.get(tokRO, path).Body.String(); strings.Contains(body, `method="post" action="/ui/p/acme/resources`) || strings.Contains(body, `action="/ui/p/acme/settings"`) {
			t.Errorf("%s: a read-only user is shown a write form", path)
		}
	}
	roCSRF := e.csrf(tokRO, "/ui/p/acme/resources?kind=localaccount")
	if w := e.post(tokRO, "http://eim.test", "/ui/p/acme/resources/localaccount/"+la+"/delete", url.Values{"csrf": {roCSRF}}); w.Code != http.StatusForbidden {
		t.Errorf("a read-only user's forged delete: got %d, want 403", w.Code)
	}
	if _, err := e.inv.Get(ctx, proj, eim.KindLocalAccount, la); err != nil {
		t.Errorf("the account after a refused delete: %v", err)
	}
}

// TestSettingsForm: the settings change through the API, its errors beside
// their field; a new enrollment token is shown once.
// TestSettingsLabels: the settings form labels every field in words, not
// with its JSON name.
func TestSettingsLabels(t *testing.T) {
	e := newEnv(t, proj)
	body := e.get(tokRW, "/ui/p/acme/settings").Body.String()
	labels := regexp.MustCompile(`<label for="set-([A-Za-z]+)">([^<(]*)|<input type="checkbox" id="set-([A-Za-z]+)"[^>]*> ([^<]*)</label>`).FindAllStringSubmatch(body, -1)
	if len(labels) < 8 {
		t.Fatalf("settings form: got %d labelled fields, want 8:\n%s", len(labels), body)
	}
	for _, m := range labels {
		name, text := m[1]+m[3], strings.TrimSpace(m[2]+m[4])
		if text == name || !strings.Contains(text, " ") {
			t.Errorf("setting %s: labelled %q, want words", name, text)
		}
	}
}

func TestSettingsForm(t *testing.T) {
	e := newEnv(t, proj)
	csrf := e.csrf(tokRW, "/ui/p/acme/settings")
	post := func(form url.Values) (int, string) {
		form.Set("csrf", csrf)
		w := e.post(tokRW, "http://eim.test", "/ui/p/acme/settings", form)
		return w.Code, w.Body.String()
	}
	code, body := post(url.Values{"heartbeatIntervalSeconds": {"1"}})
	if code != http.StatusBadRequest || !strings.Contains(body, `id="set-heartbeatIntervalSeconds-err">heartbeatIntervalSeconds: `) {
		t.Errorf("a heartbeat interval below the bound: got %d, the error not beside the field:\n%.3000s", code, body)
	}
	if code, _ := post(url.Values{"heartbeatIntervalSeconds": {"20"}, "heartbeatTimeoutSeconds": {"90"}}); code != http.StatusSeeOther {
		t.Fatalf("heartbeat settings: got %d, want 303", code)
	}
	p, _ := e.inv.FindProject(context.Background(), proj)
	if p.Settings.HeartbeatIntervalSeconds != 20 || p.Settings.HeartbeatTimeoutSeconds != 90 {
		t.Errorf("settings: got %+v", p.Settings)
	}
	code, body = post(url.Values{"enrollmentToken": {"new"}})
	tok := regexp.MustCompile(`<code class="token">([^<]+)</code>`).FindStringSubmatch(body)
	if code != http.StatusOK || tok == nil {
		t.Fatalf("a new enrollment token: got %d, no token shown", code)
	}
	if p, _ := e.inv.FindProject(context.Background(), proj); p.Settings.EnrollmentTokenHash == "" || strings.Contains(e.get(tokRW, "/ui/p/acme/settings").Body.String(), tok[1]) {
		t.Errorf("the token is not set, or shown again")
	}
}

// TestAuditPage: the records with their changes, filtered and paged; a
// wrong filter's error beside the box.
func TestAuditPage(t *testing.T) {
	e := newEnv(t, proj)
	ctx := eim.WithActor(context.Background(), eim.UserActor("alice"))
	for _, n := range []string{"north", "south"} {
		if _, err := e.inv.Create(ctx, proj, &eim.Region{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	body := e.get(tokRO, "/ui/p/acme/audit").Body.String()
	for _, want := range []string{"user:alice", "CREATED", "north", "south", "<dt>name</dt>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the audit page lacks %q", want)
		}
	}
	body = e.get(tokRO, "/ui/p/acme/audit?filter="+url.QueryEscape(`kind="region" AND principal="alice"`)).Body.String()
	if !strings.Contains(body, "2 records match") {
		t.Errorf("a filter: the page does not say 2 records match")
	}
	w := e.get(tokRO, "/ui/p/acme/audit?filter="+url.QueryEscape(`colour="red"`))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `id="audit-filter-err"`) || !strings.Contains(w.Body.String(), "colour") {
		t.Errorf("an unknown field: got %d without its error beside the box", w.Code)
	}
	for i := range 60 {
		if _, err := e.inv.Create(ctx, proj, &eim.Region{Name: "r" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26))}); err != nil {
			t.Fatal(err)
		}
	}
	body = e.get(tokRO, "/ui/p/acme/audit").Body.String()
	if !strings.Contains(body, `rel="next"`) || !strings.Contains(e.get(tokRO, "/ui/p/acme/audit?offset=50").Body.String(), `rel="prev"`) {
		t.Errorf("62 records: no pager")
	}
}

// formValues reads the inputs of the form whose action is action on a
// page: what a browser would send.
func formValues(t *testing.T, page, action string) url.Values {
	t.Helper()
	i := strings.Index(page, `action="`+action+`"`)
	if i < 0 {
		t.Fatalf("no form to %s", action)
	}
	form := page[i:]
	form = form[:strings.Index(form, "</form>")]
	v := url.Values{}
	for _, m := range regexp.MustCompile(`<input [^>]*name="([^"]+)"[^>]*value="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<textarea [^>]*name="([^"]+)"[^>]*>(.*?)</textarea>`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<select [^>]*name="([^"]+)"[^>]*>(.*?)</select>`).FindAllStringSubmatch(form, -1) {
		if s := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(m[2]); s != nil {
			v.Set(m[1], htmlUnescape(s[1]))
		}
	}
	for _, m := range regexp.MustCompile(`<input type="checkbox" [^>]*name="([^"]+)" checked`).FindAllStringSubmatch(form, -1) {
		v.Set(m[1], "on")
	}
	return v
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&quot;", `"`).Replace(s)
}
