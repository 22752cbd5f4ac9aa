package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/client"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
)

// The web UI in a real browser: Debian's chromium, headless, driven over
// the DevTools protocol (chromedp), against the real server through Main
// and simulated nodes brought through Day 0. Each page visited is saved as
// a screenshot under $EIM_UI_SCREENSHOTS (default /tmp/eim-ui-screens).

// chromiumPath finds the browser, or skips the test (fails with
// EIM_REQUIRE_CHROMIUM set, as CI runs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("EIM_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium) and EIM_REQUIRE_CHROMIUM is set")
	}
	t.Skip("chromium is not installed (apt-get install chromium); set EIM_REQUIRE_CHROMIUM to fail instead")
	return ""
}

// browser is one headless chromium (its own profile: its own cookies).
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path := chromiumPath(t)
	dir, err := os.MkdirTemp("", "eim-ui-chromium")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		// The browser's children may write into the profile for a moment
		// after it stopped.
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	shots := os.Getenv("EIM_UI_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "eim-ui-screens")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, base: base, shots: shots}
}

func (b *browser) nav(path string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(b.base+path)); err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
}

// eval runs JavaScript in the page and decodes its JSON-able value.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// wait polls a JavaScript condition until it holds. A navigation in
// between makes an evaluation fail (its context went with the old
// page): that is polled again too.
func (b *browser) wait(what, cond string) {
	b.t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		cancel()
		if err == nil && ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
	b.shot("failed-" + what)
	b.t.Fatalf("waiting for %s (%s): not within 40 s (last error %v); the page shows:\n%s", what, cond, lastErr, body)
}

// set types a value into the field sel.
func (b *browser) set(sel, value string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(function(){var e=document.querySelector(%s); if(!e){throw new Error("no "+%s)}; e.value=%s; return true})()`, jsq(sel), jsq(sel), jsq(value)))
}

// submit clicks the button sel and waits for the page it leads to.
func (b *browser) submit(sel string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(function(){window.__before=true; var e=document.querySelector(%s); if(!e){throw new Error("no "+%s)}; e.click(); return true})()`, jsq(sel), jsq(sel)))
	b.wait("the next page after "+sel, `!window.__before && document.readyState === "complete"`)
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(function(){var e=document.querySelector(%s); return e ? e.innerText : ""})()`, jsq(sel)))
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsq(sel)))
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, name)
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	b.nav("/ui/login")
	b.set("#token", token)
	b.submit("form button[type=submit]")
}

func jsq(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

func TestUIBrowser(t *testing.T) {
	chromiumPath(t)
	s := startDay0(t)
	ctx := context.Background()
	p := eim.DefaultProject
	adminTok, err := os.ReadFile(filepath.Join(s.dataDir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}

	// A fleet through Day 0: 6 nodes provisioned, 2 failing at an action,
	// 2 registered that never call home.
	osID := s.createOS(t, p)
	good, bad, silent := sim.Generate(6, 71), sim.Generate(2, 72), sim.Generate(2, 73)
	register(t, s, p, osID, good)
	register(t, s, p, osID, bad)
	register(t, s, p, "", silent)
	wantReport(t, s.fleet(t, ctx, good, sim.Options{Seed: 71}), 6, 0)
	wantReport(t, s.fleet(t, ctx, bad, sim.Options{FailShare: 1, Seed: 72}), 0, 2)

	b := newBrowser(t, s.api)

	t.Run("sign in with a token", func(t *testing.T) {
		b.t = t
		b.nav("/")
		b.wait("the sign-in page", `location.pathname === "/ui/login"`)
		b.shot("login")
		b.signIn(strings.TrimSpace(string(adminTok)))
		b.wait("the overview", `location.pathname === "/ui/p/default/" && !!document.querySelector("[data-count=running]")`)
		if got := eval[bool](b, `document.cookie.includes("eim_session")`); got {
			t.Errorf("the session cookie is readable by scripts; want HttpOnly")
		}
	})

	t.Run("overview counts match the API", func(t *testing.T) {
		b.t = t
		var all []*eim.Host
		for offset := 0; ; offset += 100 {
			hosts, page, err := client.ListOf[eim.Host](ctx, s.admin, p, client.ListOptions{PageSize: 100, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, hosts...)
			if !page.HasNext {
				break
			}
		}
		want := map[string]int{}
		for _, h := range all {
			if h.HostStatus == "Running" && h.HostStatusIndicator == eim.StatusIdle {
				want["running"]++
			}
			if h.Instance != nil && h.Instance.ProvisioningStatusIndicator == eim.StatusError {
				want["failed"]++
			}
			if h.Instance != nil && h.Instance.ProvisioningStatusIndicator == eim.StatusInProgress {
				want["provisioning"]++
			}
		}
		if want["running"] != 6 || want["failed"] != 2 || len(all) != 10 {
			t.Fatalf("the API shows %d hosts, %v; want 10 hosts, 6 running, 2 failed", len(all), want)
		}
		sum, err := s.admin.HostSummary(ctx, p, "")
		if err != nil {
			t.Fatal(err)
		}
		if sum.Running != want["running"] {
			t.Fatalf("the API's summary: %d running, its list %d", sum.Running, want["running"])
		}
		b.nav("/ui/p/default/")
		for _, k := range []string{"running", "failed", "provisioning"} {
			got, _ := strconv.Atoi(b.text(fmt.Sprintf("[data-count=%s]", k)))
			if got != want[k] {
				t.Errorf("overview %s: got %d, want %d (the API)", k, got, want[k])
			}
		}
		if got := b.text("#states-h"); !strings.Contains(got, "10 hosts") {
			t.Errorf("overview total: got %q, want 10 hosts", got)
		}
		if got := b.count("#fail-h + .table-wrap table tbody tr"); got != 2 {
			t.Errorf("recent failures: got %d rows, want 2", got)
		}
		b.shot("overview")
		// Each bar links to its hosts.
		b.submit("a[data-state=failed]")
		if got := b.count("table.hosts tbody tr"); got != 2 {
			t.Errorf("the failed bar's host list: got %d rows, want 2", got)
		}
	})

	t.Run("filter the host table", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/hosts")
		if got := b.count("table.hosts tbody tr"); got != 10 {
			t.Errorf("all hosts: got %d rows, want 10", got)
		}
		b.shot("hosts")
		b.set("#filter", fmt.Sprintf(`serialNumber=%q`, good[0].Serial))
		b.submit(".filters button[type=submit]")
		if got := b.count("table.hosts tbody tr"); got != 1 || !strings.Contains(b.text("table.hosts tbody"), good[0].Serial) {
			t.Errorf("filtered by serial: got %d rows (%q), want the one of %s", got, b.text("table.hosts tbody"), good[0].Serial)
		}
		if q := eval[string](b, `location.search`); !strings.Contains(q, "filter=") {
			t.Errorf("the URL does not hold the filter: %q", q)
		}
		b.set("#filter", "colour=blue")
		b.submit(".filters button[type=submit]")
		if got := b.text("#filter-error"); !strings.Contains(got, `unknown field "colour"`) || !strings.Contains(got, "known:") {
			t.Errorf("a wrong filter: got the error %q, want one naming the field and the known ones", got)
		}
		b.shot("hosts-filter-error")
		b.nav("/ui/p/default/hosts")
		b.submit(`.tabs a[href*="tab=registered"]`)
		rows := b.text("table.hosts tbody")
		if got := b.count("table.hosts tbody tr"); got != 2 || !strings.Contains(rows, silent[0].Serial) || !strings.Contains(rows, silent[1].Serial) {
			t.Errorf("the Registered tab: got %d rows (%q), want the 2 hosts that never called home", got, rows)
		}
		b.shot("hosts-registered")
	})

	t.Run("the provisioning log arrives live", func(t *testing.T) {
		b.t = t
		slow := sim.Generate(1, 74)
		ids := register(t, s, p, osID, slow)
		b.nav("/ui/p/default/hosts/" + ids[0])
		b.wait("the host page", `!!document.querySelector("ol.log")`)
		if n := b.count("ol.log li"); n != 0 {
			t.Fatalf("the log has %d lines before the node called home", n)
		}
		done := make(chan *sim.Report, 1)
		go func() { done <- s.fleet(t, ctx, slow, sim.Options{Seed: 74, ActionTime: 150 * time.Millisecond}) }()
		b.wait("log lines to arrive without a reload", `document.querySelectorAll("ol.log li").length >= 3`)
		b.shot("host-log-live")
		wantReport(t, <-done, 1, 0)
		b.wait("the log to end", `document.querySelector("ol.log").dataset.finished === "true" || document.querySelector("[data-log-state]").innerText.includes("SUCCEEDED")`)

		// A failed host: its failing action is highlighted, with a
		// reprovision button.
		hs, _, err := client.ListOf[eim.Host](ctx, s.admin, p, client.ListOptions{Filter: fmt.Sprintf("serialNumber=%q", bad[0].Serial)})
		if err != nil || len(hs) != 1 {
			t.Fatalf("failed host: %v, %d", err, len(hs))
		}
		b.nav("/ui/p/default/hosts/" + hs[0].ResourceID)
		if got := b.text("ol.actions li.failed"); !strings.Contains(got, "stream-image") {
			t.Errorf("failed action: got %q, want stream-image highlighted", got)
		}
		if b.count("ol.log li.failed") == 0 {
			t.Errorf("no log line is marked failed")
		}
		if b.count(`form[action$="/reprovision"] button`) != 1 {
			t.Errorf("no reprovision button on a failed host")
		}
		b.shot("host-failed")
	})

	t.Run("register hosts from CSV", func(t *testing.T) {
		b.t = t
		ids := sim.Generate(3, 75)
		badLine := fmt.Sprintf("Serial,UUID,OSProfile,Site,Secure,RemoteUser,Metadata\n%s,%s\n%s,%s\n%s,not-a-uuid\n",
			ids[0].Serial, ids[0].UUID, ids[1].Serial, ids[1].UUID, ids[2].Serial)
		b.nav("/ui/p/default/register")
		b.set("#csv-text", badLine)
		b.submit(`form[action$="/register/csv"] button[type=submit]`)
		if got := b.text("#csv-result"); !strings.Contains(got, "nothing was registered") || !strings.Contains(got, `UUID "not-a-uuid"`) {
			t.Errorf("a file with a bad line: got %q, want nothing registered and the line's error", got)
		}
		if !eval[bool](b, `(document.querySelector('a[download="hosts.errors.csv"]') || {href: ""}).href.startsWith("data:text/csv;base64,")`) {
			t.Errorf("no download of the error file")
		}
		b.shot("register-csv-error")
		for _, id := range ids {
			hs, _, err := client.ListOf[eim.Host](ctx, s.admin, p, client.ListOptions{Filter: fmt.Sprintf("serialNumber=%q", id.Serial)})
			if err != nil || len(hs) != 0 {
				t.Fatalf("host %s after a refused file: %v, %d hosts; want none", id.Serial, err, len(hs))
			}
		}
		fixed := strings.Replace(badLine, "not-a-uuid", ids[2].UUID, 1)
		b.set("#csv-text", fixed)
		b.submit(`form[action$="/register/csv"] button[type=submit]`)
		if got := b.text("#csv-result"); !strings.Contains(got, "3 hosts registered") {
			t.Errorf("the fixed file: got %q, want 3 hosts registered", got)
		}
		b.shot("register-csv-done")
		for _, id := range ids {
			hs, _, err := client.ListOf[eim.Host](ctx, s.admin, p, client.ListOptions{Filter: fmt.Sprintf("serialNumber=%q", id.Serial)})
			if err != nil || len(hs) != 1 || !strings.EqualFold(hs[0].UUID, id.UUID) {
				t.Errorf("host %s after the import: %v, %d hosts; want one with UUID %s", id.Serial, err, len(hs), id.UUID)
			}
		}
	})

	t.Run("locations and a repeated schedule on the calendar", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/locations")
		b.set("#nr-name", "europe")
		b.submit(`form[action$="/regions"] button`)
		b.wait("the region in the tree", `document.querySelector("table.tree") && document.querySelector("table.tree").innerText.includes("europe")`)
		region := eval[string](b, `document.querySelector("#ns-region option:nth-child(2)").value`)
		b.set("#ns-name", "plant-1")
		b.set("#ns-region", region)
		b.submit(`form[action$="/sites"] button`)
		b.wait("the site under its region", `document.querySelector("tr.site.depth-1") && document.querySelector("tr.site.depth-1").innerText.includes("plant-1")`)
		b.shot("locations")
		b.nav("/ui/p/default/schedules")
		site := eval[string](b, `Array.from(document.querySelectorAll("#s-target option")).find(o => o.textContent.includes("plant-1")).value`)
		b.set("#s-name", "nightly-patch")
		b.set("#s-target", site)
		b.set("#s-hour", "2")
		b.set("#s-dow", "1,3")
		b.submit(`#new-schedule button[type=submit]`)
		b.wait("the schedule created", `document.body.innerText.includes("Created schedule")`)
		// Mondays and Wednesdays of the month hold the window at 02:00.
		n := b.count("table.calendar li.win.repeated")
		if n < 8 || !strings.Contains(b.text("table.calendar"), "02:00 nightly-patch") {
			t.Errorf("the month calendar: %d windows (%q); want every Monday and Wednesday at 02:00", n, b.text("table.calendar"))
		}
		b.shot("schedules-month")
		b.nav("/ui/p/default/schedules?view=week")
		if n := b.count("table.calendar li.win.repeated"); n != 2 {
			t.Errorf("the week calendar: %d windows, want 2 (Monday and Wednesday)", n)
		}
		b.shot("schedules-week")
		// Per place: the site's windows apply to it; none apply to the
		// region above it (a region's are its own and its ancestors').
		b.nav("/ui/p/default/schedules?view=week&target=" + site)
		if n := b.count("table.calendar li.win.repeated"); n != 2 {
			t.Errorf("the week calendar of the site: %d windows, want 2", n)
		}
		b.nav("/ui/p/default/schedules?view=week&target=" + region)
		if n := b.count("table.calendar li.win.repeated"); n != 0 {
			t.Errorf("the week calendar of the region: %d windows, want none", n)
		}
		var rs []*eim.RepeatedSchedule
		rs, _, err := client.ListOf[eim.RepeatedSchedule](ctx, s.admin, p, client.ListOptions{})
		if err != nil || len(rs) != 1 || rs[0].TargetSiteID != site || rs[0].CronDayWeek != "1,3" {
			t.Errorf("the API's repeated schedules: %v %+v", err, rs)
		}
	})

	t.Run("the other resources", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/resources?kind=os")
		if got := b.text("table tbody"); !strings.Contains(got, "tiny-os") {
			t.Errorf("the OS profiles' page: %q, want tiny-os", got)
		}
		b.shot("resources-os")
		b.submit(`table tbody a`)
		if got := b.text("dl.fields"); !strings.Contains(got, "sha256") {
			t.Errorf("an OS profile's page: %q, want its fields", got)
		}
		b.nav("/ui/p/default/settings")
		b.shot("settings")
	})

	t.Run("resources created through the forms, an API error beside its field", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/resources?kind=osupdatepolicy")
		b.set("#new0-name", "to-tiny-os")
		b.set("#new0-targetOsId", osID)
		b.set("#new0-updatePolicy", "UPDATE_POLICY_TARGET")
		b.submit(`form.resform button[type=submit]`)
		b.wait("the policy listed", `document.body.innerText.includes("Created osupdatepolicy-") && document.querySelector("table tbody").innerText.includes("to-tiny-os")`)
		b.shot("resources-osupdatepolicy")
		b.nav("/ui/p/default/resources?kind=localaccount")
		b.set("#new0-username", "ops")
		b.set("#new0-sshKey", "not a key")
		b.submit(`form.resform button[type=submit]`)
		b.wait("the API's error beside the key", `!!document.querySelector("#new0-sshKey-err") && document.querySelector("#new0-sshKey[aria-invalid=true]") !== null`)
		if got := b.text("#new0-sshKey-err"); !strings.HasPrefix(got, "sshKey: ") {
			t.Errorf("the error beside sshKey: %q", got)
		}
		b.shot("resources-localaccount-error")
		b.set("#new0-sshKey", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB8mQ6u4GkNK1b0kv8lNqf5rDr0X5n7eF0nV5U9b3Q0t ops@lab")
		b.submit(`form.resform button[type=submit]`)
		b.wait("the account listed", `document.body.innerText.includes("Created localaccount-") && document.querySelector("table tbody").innerText.includes("ops")`)
		las, _, err := client.ListOf[eim.LocalAccount](ctx, s.admin, p, client.ListOptions{})
		if err != nil || len(las) != 1 || las[0].Username != "ops" {
			t.Errorf("the API's local accounts: %v %+v", err, las)
		}
		b.nav("/ui/p/default/audit?filter=" + url.QueryEscape(`kind="localaccount"`))
		if got := b.text("table.audit tbody"); !strings.Contains(got, "CREATED") || !strings.Contains(got, "user:") || !strings.Contains(got, "username") {
			t.Errorf("the audit log of local accounts: %q; want the create by a user, with its fields", got)
		}
		b.shot("audit")
		b.set("#audit-filter", `colour="red"`)
		b.submit(`form.filters button[type=submit]`)
		if got := b.text("#audit-filter-err"); !strings.Contains(got, "colour") {
			t.Errorf("an audit filter on an unknown field: %q", got)
		}
	})

	t.Run("a cluster created on a host through the form", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/clusters")
		b.submit(`a[href$="/newcluster"]`)
		hostID := eval[string](b, `(function(){var c=document.querySelector("input[name=node]"); c.checked=true; return c.value})()`)
		b.set("#new-name", "edge-ui")
		b.set("#new-labels", "env=lab")
		b.submit(`form[action$="/clusters"] button[type=submit]`)
		b.wait("the cluster listed with its phase", `location.pathname === "/ui/p/default/clusters" && /provisioning|active/.test((document.querySelector("tr[data-cluster=edge-ui] td.phase") || {}).innerText || "")`)
		b.shot("clusters")
		cl, err := s.admin.GetCluster(ctx, p, "edge-ui")
		if err != nil || len(cl.Nodes) != 1 || cl.Nodes[0].ID != hostID || cl.Labels["env"] != "lab" {
			t.Fatalf("the API's cluster edge-ui: %v %+v; want node %s, label env=lab", err, cl, hostID)
		}
		if got := b.text(`tr[data-cluster=edge-ui] td.phase`); !strings.Contains(got, cl.LifecyclePhase.Message) {
			t.Errorf("the listed phase %q, the API's %q", got, cl.LifecyclePhase.Message)
		}
		b.submit(`tr[data-cluster=edge-ui] a`)
		if n := b.count(`table.nodes a[href="/ui/p/default/hosts/` + hostID + `"]`); n != 1 {
			t.Errorf("the cluster's page links its node's host %d times, want 1", n)
		}
		if n := b.count(`form[action$="/edge-ui/nodes"], form[action$="/edge-ui/template"], form[action$="/edge-ui/labels"], form[action$="/edge-ui/delete"]`); n != 4 {
			t.Errorf("the cluster's page shows a writer %d of its 4 action forms", n)
		}
		b.shot("cluster")
	})

	t.Run("a read-only user sees no write controls and a forged write is refused", func(t *testing.T) {
		ro := newBrowser(t, s.api)
		roTok := mintToken(t, "--data-dir", s.dataDir, "--project", p, "--role", "r", "--ttl", "1h")
		ro.signIn(roTok)
		ro.wait("the overview", `!!document.querySelector("[data-count=running]")`)
		ro.nav("/ui/p/default/hosts")
		if n := ro.count("#bulk-action, input[name=id], a[href$='/register']"); n != 0 {
			t.Errorf("a read-only user sees %d write controls on the hosts page", n)
		}
		ro.shot("hosts-read-only")
		ro.nav("/ui/p/default/locations")
		if n := ro.count(`form[action$="/regions"], form[action$="/sites"]`); n != 0 {
			t.Errorf("a read-only user sees %d create forms on the locations page", n)
		}
		for _, path := range []string{"/ui/p/default/resources?kind=localaccount", "/ui/p/default/resources?kind=osupdatepolicy", "/ui/p/default/settings"} {
			ro.nav(path)
			if n := ro.count(`form.resform, form[action$="/delete"], button[name=enrollmentToken]`); n != 0 {
				t.Errorf("%s: a read-only user sees %d write controls", path, n)
			}
		}
		ro.nav("/ui/p/default/resources?kind=osupdatepolicy")
		ro.submit(`table tbody a`) // the policy's page: no delete button
		if n := ro.count(`form[method=post]:not(.logout)`); n != 0 {
			t.Errorf("a policy's page shows a read-only user %d forms", n)
		}
		ro.shot("resource-read-only")
		for _, path := range []string{"/ui/p/default/clusters", "/ui/p/default/clusters/edge-ui", "/ui/p/default/templates"} {
			ro.nav(path)
			if n := ro.count(`form[method=post]:not(.logout), a[href$="/newcluster"]`); n != 0 {
				t.Errorf("%s: a read-only user sees %d write controls", path, n)
			}
		}
		ro.shot("cluster-read-only")
		// A write forged from the page itself, with the session's own CSRF
		// token: the role is checked on the server.
		status := eval[int](ro, `(async function(){
			const csrf = document.querySelector("input[name=csrf]").value;
			const r = await fetch("/ui/p/default/regions", {method: "POST", credentials: "same-origin",
				headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "csrf=" + encodeURIComponent(csrf) + "&name=forged"});
			return r.status; })()`)
		if status != http.StatusForbidden {
			t.Errorf("a forged write by a read-only user: got %d, want 403", status)
		}
		rs, _, err := client.ListOf[eim.Region](ctx, s.admin, p, client.ListOptions{Filter: `name="forged"`})
		if err != nil || len(rs) != 0 {
			t.Errorf("regions named forged: %v, %d; want none", err, len(rs))
		}
	})

	t.Run("a CSRF attempt from another origin fails", func(t *testing.T) {
		b.t = t
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<!doctype html><form id=f method=post action="%s/ui/p/default/regions"><input name=name value=evil><input name=csrf value=guess></form>
<script>document.getElementById("f").submit()</script>`, s.api)
		}))
		defer evil.Close()
		if err := chromedp.Do(b.ctx, chromedp.Navigate(evil.URL)); err != nil {
			t.Fatal(err)
		}
		b.wait("the answer to the forged form", `location.href.startsWith(`+jsq(s.api)+`) && document.readyState === "complete"`)
		if got := b.text("body"); !strings.Contains(got, "refused") {
			t.Errorf("the forged form's answer: %q, want it refused", got)
		}
		b.shot("csrf-refused")
		rs, _, err := client.ListOf[eim.Region](ctx, s.admin, p, client.ListOptions{Filter: `name="evil"`})
		if err != nil || len(rs) != 0 {
			t.Errorf("regions named evil: %v, %d; want none", err, len(rs))
		}
	})

	t.Run("the overview refreshes itself from the change feed", func(t *testing.T) {
		b.t = t
		b.nav("/ui/p/default/")
		b.wait("the live stream", `document.getElementById("live-status").innerText === "Live"`)
		before := b.text("#states-h")
		eval[bool](b, `(function(){ window.__samePage = true; return true })()`)
		id := sim.Generate(1, 76)[0]
		if _, err := s.admin.RegisterHost(ctx, p, client.HostRegistration{Name: "live-1", SerialNumber: id.Serial}); err != nil {
			t.Fatal(err)
		}
		b.wait("the new host counted without a reload", `window.__samePage === true && document.querySelector("#states-h").innerText !== `+jsq(before))
		b.shot("overview-live")
	})

	t.Run("the enrollment lobby", func(t *testing.T) {
		b.t = t
		// A project of its own: the default project's hosts are counted
		// by the other subtests.
		const lp = "lobby-ui"
		if _, err := s.admin.CreateProject(ctx, lp); err != nil {
			t.Fatal(err)
		}
		ps, err := s.admin.UpdateProjectSettings(ctx, lp, client.SettingsChange{EnrollmentToken: "new"})
		if err != nil {
			t.Fatal(err)
		}
		dev := sim.Identity{UUID: "6f1f0b1e-0a4c-4c47-9d7e-00000000ab01", Serial: "SNLOBBYUI1"}
		ob := onboardingv1connect.NewOnboardingServiceClient(s.agentClient(t), s.agentURL)
		resp, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: dev.UUID, Serial: dev.Serial, EnrollmentToken: ps.EnrollmentToken,
			Labels: []*onboardingv1.Label{{Key: "line", Value: "4"}}, Hardware: &onboardingv1.HardwareSummary{CpuModel: "Atom", CpuCores: 4, Architecture: "amd64"}}))
		if err != nil || resp.Msg.GetStatus() != onboardingv1.DiscoverResponse_STATUS_PENDING {
			t.Fatalf("an unknown device's call: %v, %v; want PENDING", resp, err)
		}
		b.nav("/ui/p/" + lp + "/")
		if got := b.text("nav"); !strings.Contains(got, "Lobby") {
			t.Errorf("the menu: %q; want the Lobby", got)
		}
		b.nav("/ui/p/" + lp + "/lobby")
		if got := b.text("table.lobby tbody"); !strings.Contains(got, dev.Serial) || !strings.Contains(got, "PENDING") || !strings.Contains(got, "line=4") {
			t.Fatalf("the lobby: %q; want the device %s PENDING with its label", got, dev.Serial)
		}
		b.shot("lobby")
		b.set(`table.lobby form.inline input[name=name]`, "lobby-cam")
		b.set(`table.lobby form.inline input[name=labels]`, "role=camera, line=4")
		b.submit(`table.lobby form.inline button[type=submit]`)
		b.wait("the device approved", `document.querySelector("table.lobby tbody").innerText.includes("APPROVED")`)
		page, err := s.admin.ListEnrollmentRequests(ctx, lp, client.EnrollmentListOptions{SerialNumber: dev.Serial})
		if err != nil || len(page.EnrollmentRequests) != 1 || page.EnrollmentRequests[0].HostID == "" || !strings.HasPrefix(page.EnrollmentRequests[0].DecidedBy, "user:") {
			t.Fatalf("the request after the UI's approval: %+v, %v", page, err)
		}
		var h eim.Host
		if err := s.admin.Get(ctx, lp, eim.KindHost, page.EnrollmentRequests[0].HostID, &h); err != nil {
			t.Fatal(err)
		}
		if h.Name != "lobby-cam" || len(h.Metadata) != 2 || h.Metadata[0].Key != "role" {
			t.Errorf("the approved host: name %q, metadata %v; want lobby-cam with role=camera, line=4", h.Name, h.Metadata)
		}
		// The device onboards at its next call.
		resp, err = ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: dev.UUID, Serial: dev.Serial, EnrollmentToken: ps.EnrollmentToken}))
		if err != nil || resp.Msg.GetStatus() != onboardingv1.DiscoverResponse_STATUS_ONBOARDED || resp.Msg.GetHostId() != h.ResourceID {
			t.Errorf("the approved device's next call: %v, %v; want ONBOARDED as %s", resp, err, h.ResourceID)
		}
		// A second device left waiting, so that the page checked by
		// axe-core below shows the forms.
		if _, err := ob.Discover(ctx, connect.NewRequest(&onboardingv1.DiscoverRequest{Uuid: "6f1f0b1e-0a4c-4c47-9d7e-00000000ab02", Serial: "SNLOBBYUI2", EnrollmentToken: ps.EnrollmentToken})); err != nil {
			t.Fatal(err)
		}
	})

	var bmcHostPage string // a host with a BMC and an edge workload, for axe-core
	t.Run("edge workloads, a host's BMC and power, object storage", func(t *testing.T) {
		b.t = t
		hs, _, err := client.ListOf[eim.Host](ctx, s.admin, p, client.ListOptions{Filter: fmt.Sprintf("serialNumber=%q", good[1].Serial)})
		if err != nil || len(hs) != 1 {
			t.Fatalf("host %s: %v, %d", good[1].Serial, err, len(hs))
		}
		hostID := hs[0].ResourceID
		bmcHostPage = "/ui/p/default/hosts/" + hostID
		b.nav("/ui/p/default/")
		b.submit(`nav a[href="/ui/p/default/edgeworkloads"]`)
		if got := b.text("table.edgeworkloads tbody"); !strings.Contains(got, "No edge workloads") {
			t.Errorf("the list before any workload: %q", got)
		}
		// A spec the API refuses: its error, the text kept.
		b.set("#ew-name", "camera")
		b.set("#ew-spec", "device: "+hostID+"\npod:\n  spec:\n    containers:\n    - name: Cam\n      image: quay.io/acme/cam:1.0\n")
		b.submit(`#ew-apply button[type=submit]`)
		if got := b.text("#ew-err"); !strings.Contains(got, "name") {
			t.Errorf("a container name the API refuses: got the error %q, want one naming the field", got)
		}
		if got := eval[string](b, `document.querySelector("#ew-spec").value`); !strings.Contains(got, "name: Cam") {
			t.Errorf("the refused spec was not kept: %q", got)
		}
		b.set("#ew-spec", "device: "+hostID+"\npod:\n  spec:\n    containers:\n    - name: cam\n      image: quay.io/acme/cam:1.0\n")
		b.submit(`#ew-apply button[type=submit]`)
		b.wait("the workload's page", `location.pathname === "/ui/p/default/edgeworkloads/camera" && document.body.innerText.includes("revision 1")`)
		ew, err := s.admin.GetEdgeWorkload(ctx, p, "camera")
		if err != nil || ew.Revision != 1 || len(ew.Spec.Pod.Spec.Containers) != 1 || ew.Spec.Device != hostID {
			t.Fatalf("the workload through the API after the form: %+v, %v", ew, err)
		}
		// The module's targets loop picks the device.
		deadline := time.Now().Add(60 * time.Second)
		for b.count(`table.ewdevices tr[data-host="`+hostID+`"]`) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the device is not listed on the workload's page within 60 s: %q", b.text("table.ewdevices"))
			}
			time.Sleep(500 * time.Millisecond)
			b.nav("/ui/p/default/edgeworkloads/camera")
		}
		b.shot("edgeworkload")
		b.nav("/ui/p/default/edgeworkloads")
		if got := b.text(`tr[data-workload="camera"]`); !strings.Contains(got, "device "+hostID) {
			t.Errorf("the list's row: %q; want the device selected", got)
		}
		if got := b.text(`tr[data-workload="camera"] [data-devices=total]`); got != "1" {
			t.Errorf("the list's devices: got %q, want 1", got)
		}
		b.shot("edgeworkloads")

		// The host's BMC, set through the form; the password never shown.
		b.nav("/ui/p/default/hosts/" + hostID)
		if got := b.text(`table.hostworkloads`); !strings.Contains(got, "camera") {
			t.Errorf("the host's edge workloads: %q; want camera", got)
		}
		b.set("#bmc-protocol", "REDFISH")
		b.set("#bmc-address", "https://127.0.0.1:1")
		b.set("#bmc-user", "admin")
		b.set("#bmc-password", "pw-secret-1")
		eval[bool](b, `(function(){document.querySelector("#bmc-insecure").checked = true; return true})()`)
		b.submit(`#bmc-form button[type=submit]`)
		b.wait("the BMC saved", `document.body.innerText.includes("BMC saved")`)
		if got := b.text(`[data-bmc=tls]`); !strings.Contains(got, "insecure") {
			t.Errorf("the BMC's TLS: %q; want insecure said", got)
		}
		if strings.Contains(eval[string](b, `document.documentElement.outerHTML`), "pw-secret-1") {
			t.Errorf("the host page holds the BMC's password")
		}
		bmc, err := s.admin.GetBMC(ctx, p, hostID)
		if err != nil || bmc.Address != "https://127.0.0.1:1" || !bmc.PasswordSet || !bmc.Insecure {
			t.Fatalf("the BMC through the API after the form: %+v, %v", bmc, err)
		}
		b.set("#power-state", string(eim.PowerStateOn))
		b.submit(`#power-form button[type=submit]`)
		b.wait("the power job listed", `!!document.querySelector("table.powerjobs tr[data-job]")`)
		jobs, err := s.admin.PowerJobs(ctx, p, hostID, 10, 0)
		if err != nil || len(jobs.Jobs) == 0 || jobs.Jobs[0].Desired != eim.PowerStateOn {
			t.Fatalf("the power jobs through the API after the form: %+v, %v", jobs, err)
		}
		b.shot("host-bmc")

		b.nav("/ui/p/default/settings")
		if got := b.text("#storage"); !strings.Contains(got, "embedded store") {
			t.Errorf("the settings' object storage: %q; want the embedded store said", got)
		}
	})

	t.Run("every page passes axe-core's WCAG 2.1 A and AA rules", func(t *testing.T) {
		b.t = t
		src := axeSource(t)
		// The detail pages: the first of each list's links.
		first := func(list, sel string) string {
			t.Helper()
			b.nav(list)
			href := eval[string](b, fmt.Sprintf(`(function(){var a=document.querySelector(%s); return a ? a.getAttribute("href") : ""})()`, jsq(sel)))
			if href == "" {
				t.Fatalf("no link %s on %s", sel, list)
			}
			return href
		}
		pages := []string{"/ui/p/default/", "/ui/p/default/hosts", "/ui/p/default/register", "/ui/p/default/locations",
			"/ui/p/default/schedules", "/ui/p/default/resources", "/ui/p/default/settings", "/ui/p/default/audit",
			"/ui/p/default/lobby", "/ui/p/lobby-ui/lobby", "/ui/p/default/clusters", "/ui/p/default/newcluster", "/ui/p/default/templates",
			"/ui/p/default/edgeworkloads", "/ui/p/default/edgeworkloads/camera"}
		if bmcHostPage != "" {
			pages = append(pages, bmcHostPage)
		}
		pages = append(pages,
			first("/ui/p/default/hosts", `td a[href^="/ui/p/default/hosts/host-"]`),
			first("/ui/p/default/resources?kind=os", `td a[href^="/ui/p/default/resources/"]`),
			first("/ui/p/default/clusters", `a[href^="/ui/p/default/clusters/"]`))
		// The checker checks: an image without a text alternative, put on a
		// page, is found.
		b.nav("/ui/p/default/")
		eval[bool](b, `(function(){var i=document.createElement("img"); i.src="/ui/static/none.png"; document.querySelector("main").appendChild(i); return true})()`)
		if vs := b.axe(src); !slices.ContainsFunc(vs, func(v axeViolation) bool { return v.ID == "image-alt" }) {
			t.Fatalf("axe-core found no image-alt violation on a page given an image without alt: %+v", vs)
		}
		for _, page := range pages {
			b.nav(page)
			b.wait("the page "+page, `document.readyState === "complete"`)
			for _, v := range b.axe(src) {
				t.Errorf("%s: %s (%s): %s — %s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
			}
		}
		// By keyboard: the first Tab reaches "Skip to content", which takes
		// the focus past the menu to the page's content.
		b.nav("/ui/p/default/hosts")
		b.wait("the hosts page", `document.readyState === "complete"`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if got := eval[string](b, `document.activeElement.className + " " + document.activeElement.innerText`); got != "skip Skip to content" {
			t.Errorf("the first Tab focuses %q, want the skip link", got)
		}
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("\r")); err != nil {
			t.Fatal(err)
		}
		b.wait("the focus on the content", `document.activeElement.id === "main"`)
		if err := chromedp.Do(b.ctx, chromedp.KeyEvent("\t")); err != nil {
			t.Fatal(err)
		}
		if got := eval[bool](b, `document.querySelector("main").contains(document.activeElement) && document.activeElement !== document.querySelector("main")`); !got {
			t.Errorf("Tab after the skip link: focus on %q, want a control of the content", eval[string](b, `document.activeElement.outerHTML.slice(0, 120)`))
		}
		// Readable on a phone: at 390 × 844 CSS pixels no page is wider than
		// the screen (wide tables scroll inside their own box). A mobile
		// browser zooms out to show a page wider than its screen, so the
		// page's width is compared with the layout viewport's.
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
			t.Fatal(err)
		}
		for _, page := range pages {
			b.nav(page)
			b.wait("the page "+page, `document.readyState === "complete"`)
			if w := eval[[]int](b, `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] > w[1] {
				wide := eval[string](b, `(function(){var out=[]; document.querySelectorAll("body *").forEach(function(e){var r=e.getBoundingClientRect(); if(r.right>document.documentElement.clientWidth+1 && out.length<8){out.push(e.tagName.toLowerCase()+(e.className?"."+e.className:"")+(e.id?"#"+e.id:"")+" to "+Math.round(r.right))}}); return out.join(", ")})()`)
				t.Errorf("%s on a phone: %d CSS pixels wide on a %d-pixel screen: %s", page, w[0], w[1], wide)
				b.shot("phone-" + page)
			}
			if page == "/ui/p/default/hosts" {
				b.shot("phone-hosts")
			}
		}
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
			t.Fatal(err)
		}
		// The sign-in page, in a browser of its own (signed out).
		out := newBrowser(t, s.api)
		out.nav("/ui/login")
		out.wait("the sign-in page", `document.readyState === "complete" && !!document.querySelector("#token")`)
		for _, v := range out.axe(src) {
			t.Errorf("/ui/login: %s (%s): %s — %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
		}
	})
}

// axeSource is axe-core's script ($EIM_AXE_JS, which .ci/run fetches and
// pins), or the test is skipped (failed under EIM_REQUIRE_CHROMIUM).
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("EIM_AXE_JS")
	if path == "" {
		path = filepath.Join(os.Getenv("HOME"), ".cache", "eim-ci", "axe-core-4.14.1", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("EIM_REQUIRE_CHROMIUM") != "" {
			t.Fatalf("axe-core: %v (.ci/run fetches it; EIM_AXE_JS names it)", err)
		}
		t.Skipf("axe-core: %v (.ci/run fetches it; EIM_AXE_JS names it)", err)
	}
	return string(b)
}

// axeViolation is one rule a page breaks, with up to three of its
// elements.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axe runs axe-core on the page (injected over the DevTools protocol,
// which the page's Content-Security-Policy does not govern) with the
// WCAG 2.0/2.1 A and AA rules.
func (b *browser) axe(src string) []axeViolation {
	b.t.Helper()
	eval[bool](b, src+";true")
	return eval[[]axeViolation](b, `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}, resultTypes: ["violations"]})
		.then(r => r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))})))`)
}
