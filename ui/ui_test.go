package ui_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/ui"
)

const proj = "acme"

func registerHosts(t testing.TB, e *env, n int, prefix string) []*eim.Host {
	t.Helper()
	var out []*eim.Host
	for i := range n {
		h, err := e.inv.RegisterHost(context.Background(), proj, inventory.HostRegistration{
			Name: fmt.Sprintf("%s%03d", prefix, i), SerialNumber: fmt.Sprintf("SN%s%03d", strings.Trim(prefix, "-"), i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

func TestSignIn(t *testing.T) {
	e := newEnv(t, proj)
	w := e.get("", "/ui/p/acme/hosts?tab=registered")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/login?next="+url.QueryEscape("/ui/p/acme/hosts?tab=registered") {
		t.Fatalf("a page without a session: got %d to %q, want 303 to the sign-in page", w.Code, w.Header().Get("Location"))
	}
	w = e.post("", "http://eim.test", "/ui/login", url.Values{"token": {"wrong"}})
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "invalid token") {
		t.Errorf("a wrong token: got %d, want 401 saying why", w.Code)
	}
	w = e.post("", "http://elsewhere.test", "/ui/login", url.Values{"token": {tokRW}})
	if w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
		t.Errorf("a sign-in form from another site: got %d with cookies %v, want 403 and none", w.Code, w.Result().Cookies())
	}
	w = e.post("", "http://eim.test", "/ui/login", url.Values{"token": {"Bearer " + tokRW}, "next": {"/ui/p/acme/hosts"}})
	cs := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/p/acme/hosts" || len(cs) != 1 {
		t.Fatalf("sign-in: got %d to %q with %d cookies", w.Code, w.Header().Get("Location"), len(cs))
	}
	if c := cs[0]; c.Value != tokRW || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/ui/" {
		t.Errorf("session cookie: got %+v, want the token, HttpOnly, SameSite=Strict, not Secure without TLS, path /ui/", c)
	}
	for _, next := range []string{"//evil.test/x", "https://evil.test/", "/v1/projects", "/ui/\\evil"} {
		w = e.post("", "http://eim.test", "/ui/login", url.Values{"token": {tokRW}, "next": {next}})
		if loc := w.Header().Get("Location"); loc != "/ui/" {
			t.Errorf("next=%q: sent to %q, want /ui/ (no open redirect)", next, loc)
		}
	}
	if w := e.get(tokOther, "/ui/p/acme/"); w.Code != http.StatusForbidden {
		t.Errorf("a user of another project: got %d, want 403", w.Code)
	}
	if w := e.get(tokOther, "/ui/p/nosuch/"); w.Code != http.StatusForbidden {
		t.Errorf("a project that does not exist: got %d, want 403 as for one not the user's", w.Code)
	}
	if w := e.get(tokRO, "/ui/"); w.Header().Get("Location") != "/ui/p/acme/" {
		t.Errorf("/ui/ sends a user to %q, want their project", w.Header().Get("Location"))
	}
}

// TestCSP: every page carries the policy, and nothing in them needs what
// it forbids (inline scripts, event handler attributes, style attributes).
func TestCSP(t *testing.T) {
	e := newEnv(t, proj)
	registerHosts(t, e, 3, "node-")
	h := registerHosts(t, e, 1, "x-")[0]
	checkCSP(t, e, "/ui/login", "/ui/p/acme/", "/ui/p/acme/hosts", "/ui/p/acme/hosts/"+h.ResourceID, "/ui/p/acme/register",
		"/ui/p/acme/locations", "/ui/p/acme/schedules", "/ui/p/acme/schedules?view=week", "/ui/p/acme/nosuchpage", "/ui/p/acme/hosts?filter=x%3D1",
		"/ui/p/acme/resources", "/ui/p/acme/resources?kind=os", "/ui/p/acme/settings", "/ui/p/acme/audit", "/ui/p/acme/resources?kind=telemetryprofile",
		"/ui/p/acme/audit?filter=nosuch%3D1")
}

// TestForbiddenKeepsHeader: a signed-in user refused a page keeps the
// header: the project switcher and the sign-out, and in a project it may
// read, the menu.
func TestForbiddenKeepsHeader(t *testing.T) {
	e := newEnv(t, proj)
	for _, path := range []string{"/ui/p/nosuch/hosts", "/ui/?project=nosuch"} {
		w := e.get(tokRO, path)
		body := w.Body.String()
		if w.Code != http.StatusForbidden || !strings.Contains(body, `no access to project &#34;nosuch&#34;`) {
			t.Fatalf("%s: got %d, want 403 no access:\n%.400s", path, w.Code, body)
		}
		for _, want := range []string{`id="project-switch"`, `<option value="acme">acme</option>`, `Choose a project`, `action="/ui/logout"`} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the 403 page has no %q", path, want)
			}
		}
	}
	w := e.post(tokRO, "http://eim.test", "/ui/p/acme/regions", url.Values{"name": {"r"}, "csrf": {e.csrf(tokRO, "/ui/p/acme/locations")}})
	body := w.Body.String()
	if w.Code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Fatalf("a read-only write: got %d:\n%.400s", w.Code, body)
	}
	for _, want := range []string{`<nav aria-label="Main">`, `href="/ui/p/acme/hosts"`, `id="project-switch"`} {
		if !strings.Contains(body, want) {
			t.Errorf("a read-only write: the 403 page has no %q", want)
		}
	}
}

// TestFilterErrorAlone: a list whose filter is wrong shows the error alone,
// not a count or a "none" of a filter that did not run.
func TestFilterErrorAlone(t *testing.T) {
	e := newEnv(t, proj)
	registerHosts(t, e, 2, "node-")
	for path, none := range map[string][]string{
		"/ui/p/acme/hosts?filter=nosuch%3D1": {" match</span>", "No hosts match"},
		"/ui/p/acme/audit?filter=nosuch%3D1": {"records match", "No records"},
	} {
		w := e.get(tokAdmin, path)
		body := w.Body.String()
		if w.Code != http.StatusBadRequest && w.Code != http.StatusOK || !strings.Contains(body, `role="alert"`) {
			t.Errorf("%s: got %d without an error shown:\n%s", path, w.Code, body)
			continue
		}
		for _, s := range none {
			if strings.Contains(body, s) {
				t.Errorf("%s: the page says %q beside the filter's error", path, s)
			}
		}
	}
}

var reInline = regexp.MustCompile(`(?i)<script(\s[^>]*)?>|\son[a-z]+\s*=|\sstyle\s*=|javascript:`)

// checkCSP checks that the pages, as an admin sees them (every control),
// carry the policy and need nothing it forbids.
func checkCSP(t *testing.T, e *env, paths ...string) {
	t.Helper()
	for _, path := range paths {
		w := e.get(tokAdmin, path)
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if strings.Contains(w.Body.String(), "ZgotmplZ") {
			t.Errorf("%s: html/template refused a value (ZgotmplZ)", path)
		}
		for _, m := range reInline.FindAllStringSubmatch(w.Body.String(), -1) {
			if !strings.Contains(m[0], "src=") {
				t.Errorf("%s: %q needs what the policy forbids", path, m[0])
			}
		}
	}
}

// TestWritesRefused: a write needs this site's page, the session's CSRF
// token and the project's write role; each missing one is refused.
func TestWritesRefused(t *testing.T) {
	e := newEnv(t, proj)
	good := e.csrf(tokRW, "/ui/p/acme/locations")
	roCSRF := e.csrf(tokRO, "/ui/p/acme/locations")
	for _, tt := range []struct {
		name, token, origin, csrf string
		want                      int
	}{
		{"another origin", tokRW, "http://evil.test", good, http.StatusForbidden},
		{"no CSRF token", tokRW, "http://eim.test", "", http.StatusForbidden},
		{"another session's token", tokRW, "http://eim.test", roCSRF, http.StatusForbidden},
		{"a read-only user", tokRO, "http://eim.test", roCSRF, http.StatusForbidden},
		{"no session", "", "http://eim.test", good, http.StatusUnauthorized},
		{"the user's own page", tokRW, "http://eim.test", good, http.StatusSeeOther},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := "r-" + strings.NewReplacer(" ", "-", "'", "").Replace(tt.name)
			if len(name) > 20 {
				name = name[:20]
			}
			w := e.post(tt.token, tt.origin, "/ui/p/acme/regions", url.Values{"name": {name}, "csrf": {tt.csrf}})
			if w.Code != tt.want {
				t.Errorf("got %d, want %d; body: %.300s", w.Code, tt.want, w.Body.String())
			}
			p, err := e.inv.List(context.Background(), proj, eim.KindRegion, inventory.ListQuery{Filter: fmt.Sprintf("name=%q", name)})
			if err != nil {
				t.Fatal(err)
			}
			if created := p.Total == 1; created != (tt.want == http.StatusSeeOther) {
				t.Errorf("region created: %v, want %v", created, tt.want == http.StatusSeeOther)
			}
		})
	}
	// Sec-Fetch-Site, for a browser that sends no Origin.
	r := e.post(tokRW, "", "/ui/p/acme/regions", url.Values{"name": {"r-fetch-site"}, "csrf": {good}})
	if r.Code != http.StatusSeeOther {
		t.Errorf("a same-origin form without Origin: got %d, want 303", r.Code)
	}
}

func TestEscaping(t *testing.T) {
	e := newEnv(t, proj)
	h := registerHosts(t, e, 1, "node-")[0]
	const evil = `<script>alert("x")</script>`
	if err := e.inv.InvalidateHost(context.Background(), proj, h.ResourceID, evil); err != nil {
		t.Fatal(err)
	}
	body := e.get(tokRO, "/ui/p/acme/hosts/"+h.ResourceID).Body.String()
	if strings.Contains(body, evil) || !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Errorf("the host's note is not escaped on its page")
	}
	body = e.get(tokRO, "/ui/p/acme/hosts?q="+url.QueryEscape(`a"><b`)).Body.String()
	if strings.Contains(body, `a"><b`) {
		t.Errorf("the search box echoes its value unescaped")
	}
}

func TestHostList(t *testing.T) {
	e := newEnv(t, proj)
	hosts := registerHosts(t, e, 12, "node-")
	registerHosts(t, e, 1, "-dash")
	rows := regexp.MustCompile(`<input type="checkbox" name="id" value="(host-[0-9a-f]+)"`)
	page := func(token, q string) (int, []string, string) {
		w := e.get(token, "/ui/p/acme/hosts?"+q)
		var ids []string
		for _, m := range rows.FindAllStringSubmatch(w.Body.String(), -1) {
			ids = append(ids, m[1])
		}
		return w.Code, ids, w.Body.String()
	}
	if code, ids, _ := page(tokRW, "size=5&sort=name"); code != 200 || len(ids) != 5 || ids[1] != hosts[0].ResourceID { // after -dash000
		t.Errorf("first page of 5 by name: got %d, %v", code, ids)
	}
	if _, ids, body := page(tokRW, "size=5&sort=name&offset=10"); len(ids) != 3 || !strings.Contains(body, "11–13 of 13") || !strings.Contains(body, `rel="prev"`) || strings.Contains(body, `rel="next"`) {
		t.Errorf("last page: got %v", ids)
	}
	if _, ids, _ := page(tokRW, "filter="+url.QueryEscape(`serialNumber="SNnode007"`)); len(ids) != 1 || ids[0] != hosts[7].ResourceID {
		t.Errorf("a filter: got %v, want %s", ids, hosts[7].ResourceID)
	}
	if _, ids, _ := page(tokRW, "q=node-01"); len(ids) != 2 {
		t.Errorf("a search: got %v, want node-010 and node-011", ids)
	}
	if code, _, body := page(tokRW, "filter="+url.QueryEscape("colour=blue")); code != http.StatusBadRequest || !strings.Contains(body, `unknown field &#34;colour&#34;`) {
		t.Errorf("a wrong filter: got %d", code)
	} else if strings.Contains(body, " match</span>") || strings.Contains(body, "No hosts match") {
		// The error alone: no count of what a filter that did not run matched.
		t.Errorf("a wrong filter: the page says how many hosts match:\n%s", body)
	}
	if code, _, _ := page(tokRW, "q="+url.QueryEscape(`x" OR name="`)); code != http.StatusBadRequest {
		t.Errorf("a search that tries to extend the filter: got %d, want 400", code)
	}
	if _, ids, _ := page(tokRW, "tab=registered"); len(ids) != 13 {
		t.Errorf("the Registered tab: got %d hosts, want 13", len(ids))
	}
	if _, ids, _ := page(tokRW, "tab=provisioned"); len(ids) != 0 {
		t.Errorf("the Provisioned tab: got %d hosts, want none", len(ids))
	}
	if _, ids, body := page(tokRO, ""); len(ids) != 0 || strings.Contains(body, `name="action"`) {
		t.Errorf("a read-only user is shown selection boxes or actions")
	}
	// The CSV export: the filter's hosts, the columns chosen, spreadsheet
	// formulas defused.
	w := e.get(tokRO, "/ui/p/acme/hosts.csv?col=name&col=serial&filter="+url.QueryEscape(`name="dash"`))
	recs, err := csv.NewReader(w.Body).ReadAll()
	if err != nil || len(recs) != 2 || recs[0][0] != "Name" || recs[0][1] != "Serial" || recs[1][0] != "'-dash000" {
		t.Errorf("CSV export: got %v (%v)", recs, err)
	}
}

func TestBulk(t *testing.T) {
	e := newEnv(t, proj)
	hosts := registerHosts(t, e, 3, "node-")
	tok := e.csrf(tokRW, "/ui/p/acme/hosts")
	form := func(action string, extra ...string) url.Values {
		v := url.Values{"csrf": {tok}, "action": {action}, "id": {hosts[0].ResourceID, hosts[1].ResourceID, "host-00000000"}}
		for i := 0; i < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	if w := e.post(tokRW, "http://eim.test", "/ui/p/acme/hosts/bulk", form("invalidate")); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "reason") {
		t.Errorf("invalidate without a reason: got %d, want 400 asking for it", w.Code)
	}
	w := e.post(tokRW, "http://eim.test", "/ui/p/acme/hosts/bulk", form("onboard"))
	body := w.Body.String()
	if w.Code != 200 || strings.Count(body, `<tr class="ok">`) != 2 || strings.Count(body, `<tr class="bad">`) != 1 || !strings.Contains(body, "host-00000000 not found") {
		t.Errorf("onboard: got %d, want two done and one not found:\n%s", w.Code, body)
	}
	for _, h := range hosts[:2] {
		got, err := e.inv.Get(context.Background(), proj, eim.KindHost, h.ResourceID)
		if err != nil || got.(*eim.Host).DesiredState != eim.HostStateOnboarded {
			t.Errorf("host %s after onboard: %v %v", h.ResourceID, err, got)
		}
	}
}

// TestPageWeight: the largest host page (100 rows, every column) with its
// script and style sheet stays under 200 KB.
func TestPageWeight(t *testing.T) {
	e := newEnv(t, proj)
	registerHosts(t, e, 100, "node-")
	q := "size=100"
	for _, c := range []string{"name", "id", "serial", "uuid", "status", "site", "region", "os", "instance", "provisioning", "update", "lastseen"} {
		q += "&col=" + c
	}
	total := 0
	for _, path := range []string{"/ui/p/acme/hosts?" + q, "/ui/static/app.js", "/ui/static/app.css"} {
		w := e.get(tokAdmin, path)
		if w.Code != 200 {
			t.Fatalf("%s: %d", path, w.Code)
		}
		total += w.Body.Len()
	}
	if total > 200<<10 {
		t.Errorf("the hosts page weighs %d bytes with its script and styles; want under 200 KB", total)
	}
	t.Logf("hosts page of 100 rows, every column, with app.js and app.css: %d bytes", total)
}

// TestFleetSummary: the built-in views answered from the summary in
// memory select and order the hosts as the store does for their filters,
// and the summary follows changes.
func TestFleetSummary(t *testing.T) {
	e := newEnv(t, proj)
	seedFleet(t, e, 400)
	registerHosts(t, e, 5, "late-")
	stored := e.h
	liveEnv := *e
	h, err := ui.New(e.inv, tokens{tokAdmin: {Subject: "admin", Roles: []string{eim.RoleAdmin}}}, ui.Options{Store: e.inv.Store()})
	if err != nil {
		t.Fatal(err)
	}
	liveEnv.h = h
	liveEnv.live()
	rows := regexp.MustCompile(`<input type="checkbox" name="id" value="(host-[0-9a-f]+)"`)
	total := regexp.MustCompile(`<span class="sub">(\d+) match</span>`)
	ids := func(e *env, q string) string {
		body := e.get(tokAdmin, "/ui/p/acme/hosts?"+q).Body.String()
		var out []string
		for _, m := range rows.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		n := total.FindStringSubmatch(body)
		if n == nil {
			t.Fatalf("%s: no total on the page", q)
		}
		return n[1] + ": " + strings.Join(out, " ")
	}
	stored2 := &env{t: t, inv: e.inv, h: stored}
	for _, q := range []string{"", "tab=provisioned", "tab=registered", "tab=onboarded&sort=serial&dir=desc", "state=failed", "state=noconnection&sort=lastseen&dir=desc",
		"state=provisioning", "state=updating&size=10&offset=10", "state=running&sort=status&offset=40", "state=onboarding", "q=node-0001", "q=SN0000031", "tab=provisioned&state=failed&q=00",
		"sort=name&dir=desc&state=running&offset=30", "tab=registered&sort=name&dir=desc", "state=failed&offset=3&size=2"} {
		if got, want := ids(&liveEnv, q), ids(stored2, q); got != want {
			t.Errorf("%s: from memory %q, from the store %q", q, got, want)
		}
	}
	counts := regexp.MustCompile(`data-count="(\w+)">(\d+)<`)
	overview := func(e *env) string {
		body := e.get(tokAdmin, "/ui/p/acme/").Body.String()
		upd := body[strings.Index(body, `id="upd-h"`):]
		return fmt.Sprint(counts.FindAllStringSubmatch(body, -1)) + upd[:strings.Index(upd, "</section>")]
	}
	if got, want := overview(&liveEnv), overview(stored2); got != want {
		t.Errorf("overview: from memory %s, from the store %s", got, want)
	}
	tree := func(e *env) string {
		body := e.get(tokAdmin, "/ui/p/acme/locations").Body.String()
		i, j := strings.Index(body, `<table class="tree">`), strings.Index(body, "hosts have no site")
		if i < 0 || j < 0 {
			t.Fatalf("no location tree")
		}
		return body[i:j]
	}
	if got, want := tree(&liveEnv), tree(stored2); got != want || !strings.Contains(got, `<td><a href="/ui/p/acme/hosts?filter=site.resourceId`) {
		t.Errorf("locations: from memory\n%s\nfrom the store\n%s", got, want)
	}
	// Changes arrive through the feed.
	late := registerHosts(t, e, 1, "later-")[0]
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(ids(&liveEnv, "q=later-"), late.ResourceID) {
		if time.Now().After(deadline) {
			t.Fatal("a new host did not reach the summary")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Renamed: it moves in the order by name.
	if _, err := e.inv.Update(context.Background(), proj, &eim.Host{Meta: eim.Meta{ResourceID: late.ResourceID}, Name: "aaa-first"}, []string{"name"}); err != nil {
		t.Fatal(err)
	}
	for ids(&liveEnv, "size=3") != ids(stored2, "size=3") {
		if time.Now().After(deadline) {
			t.Fatalf("a renamed host: from memory %q, from the store %q", ids(&liveEnv, "size=3"), ids(stored2, "size=3"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(ids(&liveEnv, "size=1"), late.ResourceID) {
		t.Errorf("the renamed host is not first by name")
	}
	// Its status changes: it moves in the orders by status and last seen
	// built above (kept in place as hosts change).
	err = e.inv.Store().Update(context.Background(), proj, func(tx eim.Tx) error {
		hs, err := tx.GetMany(context.Background(), eim.KindHost, []string{late.ResourceID})
		if err != nil || len(hs) != 1 {
			return fmt.Errorf("read %s: %v", late.ResourceID, err)
		}
		return inventory.SetHostStatus(context.Background(), tx, hs[0].(*eim.Host), inventory.Status{Text: "Running", Indicator: eim.StatusIdle, Timestamp: 1 << 40})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"sort=lastseen&dir=desc&size=3", "sort=status&size=100", "state=running&sort=status&offset=40", "sort=serial&dir=desc", "sort=uuid&q=aaa"} {
		for got, want := ids(&liveEnv, q), ids(stored2, q); got != want; got, want = ids(&liveEnv, q), ids(stored2, q) {
			if time.Now().After(deadline) {
				t.Fatalf("%s after a status change: from memory %q, from the store %q", q, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !strings.Contains(ids(&liveEnv, "sort=lastseen&dir=desc&size=1"), late.ResourceID) {
		t.Errorf("the host last seen last is not first by last seen, descending")
	}
	if err := e.inv.Delete(context.Background(), proj, eim.KindHost, late.ResourceID); err != nil {
		t.Fatal(err)
	}
	for {
		if got, want := ids(&liveEnv, "q=later-"), ids(stored2, "q=later-"); got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a deleted host's change did not reach the summary")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestResourcePages(t *testing.T) {
	e := newEnv(t, proj)
	o, err := e.inv.Create(context.Background(), proj, &eim.OS{Name: "edge-os", ProfileName: "edge-os", Architecture: "x86_64",
		ImageURL: "http://127.0.0.1/edge.img", Sha256: strings.Repeat("a", 64)})
	if err != nil {
		t.Fatal(err)
	}
	id := o.Base().ResourceID
	w := e.get(tokRO, "/ui/p/acme/resources?kind=os")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `/ui/p/acme/resources/os/`+id) || !strings.Contains(w.Body.String(), "edge-os") {
		t.Errorf("the OS profiles' list: %d", w.Code)
	}
	w = e.get(tokRO, "/ui/p/acme/resources/os/"+id)
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, "<dt>imageUrl</dt><dd>http://127.0.0.1/edge.img</dd>") {
		t.Errorf("an OS profile's page: %d", w.Code)
	}
	for path, want := range map[string]int{
		"/ui/p/acme/resources?kind=host":           http.StatusNotFound, // hosts have pages of their own
		"/ui/p/acme/resources/os/os-00000000":      http.StatusNotFound,
		"/ui/p/acme/resources/os/region-00000001":  http.StatusNotFound,
		"/ui/p/acme/resources?kind=os&offset=-1":   http.StatusBadRequest,
		"/ui/p/acme/settings":                      http.StatusOK,
		"/ui/p/acme/resources?kind=osupdatepolicy": http.StatusOK,
	} {
		if w := e.get(tokRO, path); w.Code != want {
			t.Errorf("%s: got %d, want %d", path, w.Code, want)
		}
	}
}

func TestRootAndStatic(t *testing.T) {
	e := newEnv(t, proj)
	if w := e.get("", "/"); w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Errorf("a browser at /: got %d to %q, want 302 to /ui/", w.Code, w.Header().Get("Location"))
	}
	r := httptest.NewRequest("GET", "http://eim.test/", nil)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `"code":"NotFound"`) {
		t.Errorf("an API client at /: got %d %s, want the API's 404", w.Code, w.Body.String())
	}
	if w := e.get("", "/ui/static/"); w.Code != http.StatusNotFound {
		t.Errorf("/ui/static/: got %d, want 404 (no listing)", w.Code)
	}
	if w := e.get("", "/ui/static/app.js"); w.Code != 200 || !strings.Contains(w.Header().Get("Content-Type"), "javascript") {
		t.Errorf("app.js: got %d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

// TestEvents: the event stream says hello, then tells of a change of the
// project (not of another), and ends with the request.
func TestEvents(t *testing.T) {
	e := newEnv(t, proj)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/ui/p/acme/events", nil)
	req.AddCookie(&http.Cookie{Name: "eim_session", Value: tokRO})
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := res.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n")
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q within 20 s", prefix)
			}
		}
	}
	next("event: hello")
	ctx := context.Background()
	if _, err := e.inv.CreateProject(ctx, "third", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.inv.RegisterHost(ctx, "third", inventory.HostRegistration{Name: "elsewhere", SerialNumber: "SNELSE01"}); err != nil {
		t.Fatal(err)
	}
	// Events of another project are not told: the first change told is
	// this project's, after the other's revision.
	rev, err := e.inv.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	registerHosts(t, e, 1, "node-")
	next("event: change")
	told, err := strconv.ParseInt(strings.TrimPrefix(next("data: "), "data: "), 10, 64)
	if err != nil || told <= rev {
		t.Errorf("the change told: revision %d (%v), want one after %d (the other project's)", told, err, rev)
	}
	res.Body.Close()
	for range lines {
	}
}

func TestLocationsEdit(t *testing.T) {
	e := newEnv(t, proj)
	ctx := context.Background()
	mk := func(r eim.Resource) string {
		out, err := e.inv.Create(ctx, proj, r)
		if err != nil {
			t.Fatal(err)
		}
		return out.Base().ResourceID
	}
	a, b := mk(&eim.Region{Name: "a"}), mk(&eim.Region{Name: "b"})
	s := mk(&eim.Site{Name: "s", RegionID: a})
	tok := e.csrf(tokRW, "/ui/p/acme/locations")
	post := func(path string, form url.Values) *httptest.ResponseRecorder {
		form.Set("csrf", tok)
		return e.post(tokRW, "http://eim.test", path, form)
	}
	if w := post("/ui/p/acme/sites/edit", url.Values{"id": {s}, "name": {"s2"}, "region": {b}}); w.Code != http.StatusSeeOther {
		t.Fatalf("move a site: %d %.300s", w.Code, w.Body.String())
	}
	got, err := e.inv.Get(ctx, proj, eim.KindSite, s)
	if err != nil || got.(*eim.Site).Name != "s2" || got.(*eim.Site).RegionID != b {
		t.Errorf("the site after the move: %+v %v", got, err)
	}
	if w := post("/ui/p/acme/regions/edit", url.Values{"id": {b}, "parent": {a}}); w.Code != http.StatusSeeOther {
		t.Fatalf("move a region: %d", w.Code)
	}
	got, err = e.inv.Get(ctx, proj, eim.KindRegion, b)
	if err != nil || got.(*eim.Region).ParentID != a || got.(*eim.Region).Name != "b" {
		t.Errorf("the region after the move: %+v %v", got, err)
	}
	// Under its own child: refused, saying why, nothing changed.
	w := post("/ui/p/acme/regions/edit", url.Values{"id": {a}, "parent": {b}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "cycle") {
		t.Errorf("a region under its child: got %d, want 400 naming the cycle", w.Code)
	}
	if w := post("/ui/p/acme/sites/edit", url.Values{"id": {s}, "region": {"keep"}}); w.Code != http.StatusBadRequest {
		t.Errorf("nothing to change: got %d, want 400", w.Code)
	}
	if w := e.post(tokRO, "http://eim.test", "/ui/p/acme/sites/edit", url.Values{"csrf": {e.csrf(tokRO, "/ui/p/acme/locations")}, "id": {s}, "name": {"x"}}); w.Code != http.StatusForbidden {
		t.Errorf("a read-only user's change: got %d, want 403", w.Code)
	}
}

func TestRegisterCSV(t *testing.T) {
	e := newEnv(t, proj)
	registerHosts(t, e, 1, "node-") // SNnode000
	tok := e.csrf(tokRW, "/ui/p/acme/register")
	send := func(text string) *httptest.ResponseRecorder {
		return e.post(tokRW, "http://eim.test", "/ui/p/acme/register/csv", url.Values{"csrf": {tok}, "text": {text}, "autoOnboard": {"1"}})
	}
	w := send("Serial,UUID\nSNnew0001,\nSNnode000,\nbad serial!,\n")
	body := w.Body.String()
	if w.Code != http.StatusBadRequest || !strings.Contains(body, "2 of 3 lines are wrong") || !strings.Contains(body, "already registered as host") ||
		!strings.Contains(body, `want 5 to 20 letters and digits`) || !strings.Contains(body, `href="data:text/csv;base64,`) {
		t.Errorf("a file with two bad lines: got %d\n%s", w.Code, body)
	}
	if p, _ := e.inv.List(context.Background(), proj, eim.KindHost, inventory.ListQuery{Filter: `serialNumber="SNnew0001"`}); p.Total != 0 {
		t.Errorf("a host was registered from a refused file")
	}
	w = send("Serial,UUID\nSNnew0001,\nSNnew0002,\n")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "2 hosts registered") {
		t.Errorf("a right file: got %d", w.Code)
	}
	if p, _ := e.inv.List(context.Background(), proj, eim.KindHost, inventory.ListQuery{Filter: `serialNumber="SNnew000"`}); p.Total != 2 {
		t.Errorf("hosts registered: %d, want 2", p.Total)
	}
	// A BMC's password is read by the CLI only (env: or file:): the page
	// refuses such a line rather than register its host without its BMC.
	w = send("Serial,UUID,BMCProtocol,BMCAddress,BMCUsername,BMCPassword\nSNbmc0001,,IPMI,10.0.0.5,admin,env:BMC_PW\n")
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "eim host import") {
		t.Errorf("a line with a BMC: got %d\n%s", w.Code, w.Body.String())
	}
	if p, _ := e.inv.List(context.Background(), proj, eim.KindHost, inventory.ListQuery{Filter: `serialNumber="SNbmc0001"`}); p.Total != 0 {
		t.Errorf("a host was registered from a line whose BMC the page cannot make")
	}
}

// TestLoaded: the module's loop is not ready (/readyz) until the summary
// of the fleet has loaded once; without a store there is none to wait for.
func TestLoaded(t *testing.T) {
	e := newEnv(t, proj)
	if e.h.Loaded() {
		t.Errorf("Loaded before the summary's loop ran")
	}
	e.live()
	if !e.h.Loaded() {
		t.Errorf("not Loaded once the summary is live")
	}
	h, err := ui.New(e.inv, tokens{}, ui.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Loaded() {
		t.Errorf("a UI without a store to summarise is not Loaded")
	}
}

// TestFormsWriteThroughTheAPI: the locations, registration, bulk and
// schedule forms write through the API as the user: their changes land,
// and an operation of a module that runs nowhere is refused by the API
// (501, naming the module) with nothing written.
func TestFormsWriteThroughTheAPI(t *testing.T) {
	e := newEnv(t, proj)
	ctx := context.Background()
	send := func(e *env, page, path string, form url.Values) *httptest.ResponseRecorder {
		t.Helper()
		form.Set("csrf", e.csrf(tokRW, page))
		return e.post(tokRW, "http://eim.test", path, form)
	}
	created := func(w *httptest.ResponseRecorder, key string) string {
		t.Helper()
		loc, err := url.Parse(w.Header().Get("Location"))
		if w.Code != http.StatusSeeOther || err != nil || loc.Query().Get(key) == "" {
			t.Fatalf("got %d to %q: %.400s", w.Code, w.Header().Get("Location"), w.Body.String())
		}
		return loc.Query().Get(key)
	}
	region := created(send(e, "/ui/p/acme/locations", "/ui/p/acme/regions", url.Values{"name": {"north"}}), "created")
	site := created(send(e, "/ui/p/acme/locations", "/ui/p/acme/sites", url.Values{"name": {"plant-1"}, "region": {region}}), "created")
	if got, err := e.inv.Get(ctx, proj, eim.KindSite, site); err != nil || got.(*eim.Site).RegionID != region || got.(*eim.Site).Name != "plant-1" {
		t.Fatalf("the site made by the form: %+v %v", got, err)
	}
	hostID := created(send(e, "/ui/p/acme/register", "/ui/p/acme/register", url.Values{"serial": {"SNFORM0001"}, "name": {"press-7"}, "site": {site}}), "registered")
	got, err := e.inv.Get(ctx, proj, eim.KindHost, hostID)
	if h, _ := got.(*eim.Host); err != nil || h.SiteID != site || h.Name != "press-7" || h.SerialNumber != "SNFORM0001" {
		t.Fatalf("the host registered by the form: %+v %v", got, err)
	}
	// A refused step says which, and what the API said.
	w := send(e, "/ui/p/acme/register", "/ui/p/acme/register", url.Values{"serial": {"SNFORM0002"}, "site": {"site-0000dead"}})
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "is registered, but its site was refused") {
		t.Errorf("a registration with a missing site: got %d %.300s", w.Code, w.Body.String())
	}

	other := registerHosts(t, e, 1, "bulk-")[0]
	bulk := func(action string, extra ...string) {
		t.Helper()
		v := url.Values{"action": {action}, "id": {other.ResourceID}}
		for i := 0; i < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		w := send(e, "/ui/p/acme/hosts", "/ui/p/acme/hosts/bulk", v)
		if w.Code != 200 || strings.Count(w.Body.String(), `<tr class="ok">`) != 1 {
			t.Fatalf("bulk %s: got %d %.600s", action, w.Code, w.Body.String())
		}
	}
	host := func() *eim.Host {
		t.Helper()
		got, err := e.inv.Get(ctx, proj, eim.KindHost, other.ResourceID)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*eim.Host)
	}
	bulk("site", "site", site)
	bulk("power", "power", string(eim.PowerStateOn))
	if h := host(); h.SiteID != site || h.DesiredPowerState != eim.PowerStateOn {
		t.Errorf("after set site and power on: site %q power %q", h.SiteID, h.DesiredPowerState)
	}
	bulk("invalidate", "reason", "stolen from the plant")
	if h := host(); h.DesiredState != eim.HostStateUntrusted || !strings.Contains(h.Note, "stolen") {
		t.Errorf("after invalidate: %s %q", h.DesiredState, h.Note)
	}
	bulk("delete")
	if got, err := e.inv.Get(ctx, proj, eim.KindHost, other.ResourceID); err == nil && got.(*eim.Host).DesiredState != eim.HostStateDeleted {
		t.Errorf("after delete: %s", got.(*eim.Host).DesiredState)
	}

	sched := url.Values{"name": {"nightly"}, "kind": {"repeated"}, "target": {site}, "durationMinutes": {"90"}, "cronHours": {"2"}}
	id := created(send(e, "/ui/p/acme/schedules", "/ui/p/acme/schedules", sched), "created")
	if got, err := e.inv.Get(ctx, proj, eim.KindRepeatedSchedule, id); err != nil || got.(*eim.RepeatedSchedule).DurationSeconds != 5400 || got.(*eim.RepeatedSchedule).TargetSiteID != site {
		t.Errorf("the schedule made by the form: %+v %v", got, err)
	}

	// A single window of one host.
	one := url.Values{"name": {"swap-disk"}, "kind": {"single"}, "host": {hostID}, "target": {site}, "start": {"2026-12-01T02:00"}, "end": {"2026-12-01T04:00"}}
	id = created(send(e, "/ui/p/acme/schedules", "/ui/p/acme/schedules", one), "created")
	if got, err := e.inv.Get(ctx, proj, eim.KindSingleSchedule, id); err != nil || got.(*eim.SingleSchedule).TargetHostID != hostID || got.(*eim.SingleSchedule).TargetSiteID != "" || got.(*eim.SingleSchedule).EndSeconds-got.(*eim.SingleSchedule).StartSeconds != 7200 {
		t.Errorf("the host's window made by the form: %+v %v", got, err)
	}
	one.Set("host", "plant-1")
	if w := send(e, "/ui/p/acme/schedules", "/ui/p/acme/schedules", one); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not a host ID") {
		t.Errorf("a window of a host named wrongly: got %d", w.Code)
	}

	// A deployment without the maintenance module: the API refuses the
	// schedule, and the form shows why.
	apiOnly := newEnvAt(t, proj, filepath.Join(t.TempDir(), "eim.db"), func(st *sqlstore.Store, inv *inventory.Service, authn tokens, o *ui.Options) {
		o.API = httpapi.InProcess(httpapi.New(inv, authn, httpapi.Options{Deployed: func() []string { return []string{"api", "onboarding", "provisioning"} }}))
	})
	w = send(apiOnly, "/ui/p/acme/schedules", "/ui/p/acme/schedules", sched)
	if w.Code != http.StatusNotImplemented || !strings.Contains(w.Body.String(), "maintenance") {
		t.Errorf("a schedule where maintenance runs nowhere: got %d %.400s", w.Code, w.Body.String())
	}
	if p, err := apiOnly.inv.List(ctx, proj, eim.KindRepeatedSchedule, inventory.ListQuery{}); err != nil || p.Total != 0 {
		t.Errorf("schedules written anyway: %d %v", p.Total, err)
	}
}

// TestSecondRegionSameNameWarns: the API allows two regions of one name
// (as the original's does), so a second "north" is made, but the page it
// lands on says which region already has the name; a first one does not.
func TestSecondRegionSameNameWarns(t *testing.T) {
	e := newEnv(t, proj)
	create := func(name string) (id, body string) {
		t.Helper()
		w := e.post(tokRW, "http://eim.test", "/ui/p/acme/regions", url.Values{"name": {name}, "csrf": {e.csrf(tokRW, "/ui/p/acme/locations")}})
		loc, err := url.Parse(w.Header().Get("Location"))
		if w.Code != http.StatusSeeOther || err != nil || loc.Query().Get("created") == "" {
			t.Fatalf("create %s: got %d to %q", name, w.Code, w.Header().Get("Location"))
		}
		return loc.Query().Get("created"), e.get(tokRW, loc.RequestURI()).Body.String()
	}
	first, body := create("north")
	if strings.Contains(body, `class="warn"`) {
		t.Errorf("the first region named north warns:\n%s", body)
	}
	if _, body = create("south"); strings.Contains(body, `class="warn"`) {
		t.Errorf("a region of another name warns")
	}
	_, body = create("north")
	if !strings.Contains(body, `<p class="warn" role="status">Another region is also named &#34;north&#34; (`+first+`)`) {
		t.Errorf("the second region named north: no warning naming %s:\n%s", first, body)
	}
	// The pickers tell the two apart.
	if !strings.Contains(body, `>north (`+first+`)</option>`) {
		t.Errorf("the region pickers do not show IDs")
	}
}

// TestLastHeard: the host page and the host table (a default column) say
// when the host module last recorded hearing from each node, relative to
// now, with the absolute time in <time datetime> and its title; a host
// never heard from says so. The CSV export has the absolute time.
func TestLastHeard(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	e := newEnv(t, proj, func(_ *sqlstore.Store, _ *inventory.Service, _ tokens, o *ui.Options) {
		o.Now = func() time.Time { return now }
	})
	hs := registerHosts(t, e, 3, "heard-")
	if err := e.st.SaveLastSeen(context.Background(), []eim.LastSeen{
		{Project: proj, HostID: hs[0].ResourceID, At: now.Add(-12 * time.Second)},
		{Project: proj, HostID: hs[1].ResourceID, At: now.Add(-3 * time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	heard0 := `<time datetime="2026-12-02T07:59:48Z" title="2026-12-02 07:59:48Z">12 s ago</time>`
	heard1 := `<time datetime="2026-12-02T05:00:00Z" title="2026-12-02 05:00:00Z">3 h ago</time>`
	if body := e.get(tokRO, "/ui/p/acme/hosts/"+hs[0].ResourceID).Body.String(); !strings.Contains(body, "<dt>Last heard</dt><dd>"+heard0) {
		t.Errorf("host page: no last heard %s:\n%s", heard0, body)
	}
	if body := e.get(tokRO, "/ui/p/acme/hosts/"+hs[2].ResourceID).Body.String(); !strings.Contains(body, "<dt>Last heard</dt><dd>never</dd>") {
		t.Errorf("host page of a host never heard from: no \"never\"")
	}
	body := e.get(tokRO, "/ui/p/acme/hosts?q=heard").Body.String()
	if !strings.Contains(body, ">Last heard<") {
		t.Errorf("host table: no Last heard column by default")
	}
	for i, want := range []string{heard0, heard1, "<td>never</td>"} {
		var row string
		for _, r := range strings.Split(body, "<tr") {
			if strings.Contains(r, hs[i].ResourceID) {
				row = r
			}
		}
		if !strings.Contains(row, want) {
			t.Errorf("host table, %s: want %s in\n%s", hs[i].Name, want, row)
		}
	}
	csv := e.get(tokRO, "/ui/p/acme/hosts.csv?q=heard&col=name&col=lastheard").Body.String()
	if !strings.Contains(csv, "heard-000,2026-12-02 07:59:48Z") || !strings.Contains(csv, "heard-002,\n") { // never: empty
		t.Errorf("CSV: %s", csv)
	}
}

// TestBMCKindInWords: the host page names the BMC in words, not with the
// API's enum value.
func TestBMCKindInWords(t *testing.T) {
	e := newEnv(t, proj)
	h := registerHosts(t, e, 1, "bmc-")[0]
	for kind, want := range map[eim.BaremetalControllerKind]string{
		"BAREMETAL_CONTROLLER_KIND_IPMI":       "<dt>BMC</dt><dd>IPMI, 192.0.2.7</dd>",
		"BAREMETAL_CONTROLLER_KIND_VPRO":       "<dt>BMC</dt><dd>Intel vPro (AMT), 192.0.2.7</dd>",
		"BAREMETAL_CONTROLLER_KIND_PDU":        "<dt>BMC</dt><dd>PDU, 192.0.2.7</dd>",
		eim.BaremetalControllerKindNone:        "<dt>BMC</dt><dd>None, 192.0.2.7</dd>",
		eim.BaremetalControllerKindUnspecified: "<dt>BMC</dt><dd>not reported, 192.0.2.7</dd>",
	} {
		err := e.inv.Store().Update(context.Background(), proj, func(tx eim.Tx) error {
			return tx.UpdateFields(context.Background(), &eim.Host{Meta: eim.Meta{ResourceID: h.ResourceID}, BmcKind: kind, BmcIP: "192.0.2.7"}, "bmcKind", "bmcIp")
		})
		if err != nil {
			t.Fatal(err)
		}
		if body := e.get(tokRO, "/ui/p/acme/hosts/"+h.ResourceID).Body.String(); !strings.Contains(body, want) {
			t.Errorf("%s: want %s in\n%s", kind, want, body)
		}
	}
}

// TestSettingsInMenu: the main menu has Settings for every reader of the
// project, marked as the current page on the settings page.
func TestSettingsInMenu(t *testing.T) {
	e := newEnv(t, proj)
	for _, tok := range []string{tokRO, tokRW} {
		if body := e.get(tok, "/ui/p/acme/").Body.String(); !regexp.MustCompile(`(?s)<nav aria-label="Main">.*<a href="/ui/p/acme/settings">Settings</a>.*</nav>`).MatchString(body) {
			t.Errorf("%s: the main menu has no Settings", tok)
		}
	}
	if body := e.get(tokRO, "/ui/p/acme/settings").Body.String(); !strings.Contains(body, `<a href="/ui/p/acme/settings" aria-current="page">Settings</a>`) {
		t.Errorf("the settings page: Settings is not the current menu entry")
	}
}

// TestSecureBootInWords: the host page says the Secure Boot state the
// node last reported, in words, with when; "not reported yet" before.
func TestSecureBootInWords(t *testing.T) {
	e := newEnv(t, proj)
	h := registerHosts(t, e, 1, "sb-")[0]
	if body := e.get(tokRO, "/ui/p/acme/hosts/"+h.ResourceID).Body.String(); !strings.Contains(body, `<dt>Secure Boot</dt><dd data-secure-boot="UNSPECIFIED">not reported yet</dd>`) {
		t.Errorf("a host never reported: want \"not reported yet\" in\n%s", body)
	}
	at := uint64(time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC).Unix())
	for state, want := range map[eim.SecureBootState]string{
		eim.SecureBootStateEnabled:   `<dd data-secure-boot="ENABLED">enforced <span class="sub">reported <time>`,
		eim.SecureBootStateDisabled:  `<dd data-secure-boot="DISABLED">disabled <span class="sub">`,
		eim.SecureBootStateSetupMode: `<dd data-secure-boot="SETUP_MODE">not enforced: firmware in setup mode (no platform key) <span class="sub">`,
		eim.SecureBootStateNotUEFI:   `<dd data-secure-boot="NOT_UEFI">none: legacy BIOS boot <span class="sub">`,
	} {
		err := e.inv.Store().Update(context.Background(), proj, func(tx eim.Tx) error {
			r, err := tx.Get(context.Background(), eim.KindHost, h.ResourceID)
			if err != nil {
				return err
			}
			return inventory.RecordSecureBoot(context.Background(), tx, r.(*eim.Host), state, at)
		})
		if err != nil {
			t.Fatal(err)
		}
		at += 1
		if body := e.get(tokRO, "/ui/p/acme/hosts/"+h.ResourceID).Body.String(); !strings.Contains(body, want) {
			t.Errorf("%s: want %s in\n%s", state, want, body)
		}
	}
}
