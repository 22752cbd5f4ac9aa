package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/eimhq/eim/api"
	"github.com/eimhq/eim/httpapi"
)

func (e *env) localAccount(t *testing.T, project, name string) string {
	return e.must(t, 200, "POST", "/v1/projects/"+project+"/localAccounts", tokAdmin,
		map[string]any{"username": name, "sshKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG user@example"}).str("resourceId")
}

func (e *env) customConfig(t *testing.T, project, name string) string {
	return e.must(t, 200, "POST", "/v1/projects/"+project+"/customConfigs", tokAdmin,
		map[string]any{"name": name, "config": "#cloud-config\nruncmd:\n  - echo hi\n"}).str("resourceId")
}

// settings returns the "settings" object of a project answer.
func settings(t *testing.T, r resp) map[string]any {
	t.Helper()
	s, ok := r.obj["settings"].(map[string]any)
	if !ok {
		t.Fatalf("no settings object in %s", r.raw)
	}
	return s
}

func TestGetProject(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	r := e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil)
	if r.str("name") != "p1" || r.str("id") == "" || r.str("createdAt") == "" {
		t.Fatalf("got %s, want p1 with its id and createdAt", r.raw)
	}
	got := string(r.raw)
	want := `"settings":{"defaultOsId":"","defaultLocalAccountId":"","defaultCustomConfigIds":[],"enrollment":false,"autoOnboardEnrolled":false,"heartbeatIntervalSeconds":0,"heartbeatTimeoutSeconds":0,"osSecurityFeatureEnable":false,"exporterPerHostOff":false,"edgeWorkloadsAllowPrivileged":false,"powerPolicy":""}`
	if !strings.Contains(got, want) {
		t.Fatalf("got %s, want it to contain %s", got, want)
	}
	e.must(t, 200, "GET", "/v1/projects/p1", tokAdmin, nil)
	e.must(t, 200, "GET", "/v1/projects/p1", tokRW, nil)
	wantError(t, e.do(t, "GET", "/v1/projects/p1", tokRW2, nil), 403, "PermissionDenied", "p1")
	wantError(t, e.do(t, "GET", "/v1/projects/p1", "", nil), 401, "Unauthenticated")
	wantError(t, e.do(t, "GET", "/v1/projects/nosuch", tokAdmin, nil), 404, "NotFound", "nosuch")
}

func TestUpdateProjectSettings(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	osID := e.os(t, "ubuntu")
	acct := e.localAccount(t, "p1", "ops")
	cc1, cc2 := e.customConfig(t, "p1", "a"), e.customConfig(t, "p1", "b")

	r := e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{
		"defaultOsId": osID, "defaultLocalAccountId": acct, "defaultCustomConfigIds": []string{cc1, cc2}, "autoOnboardEnrolled": true})
	s := settings(t, r)
	if s["defaultOsId"] != osID || s["defaultLocalAccountId"] != acct || s["autoOnboardEnrolled"] != true || s["enrollment"] != false {
		t.Fatalf("got %s", r.raw)
	}
	if ids, _ := s["defaultCustomConfigIds"].([]any); len(ids) != 2 || ids[0] != cc1 || ids[1] != cc2 {
		t.Fatalf("defaultCustomConfigIds: got %v, want [%s %s]", s["defaultCustomConfigIds"], cc1, cc2)
	}
	if _, ok := r.obj["enrollmentToken"]; ok {
		t.Fatalf("enrollmentToken in an answer that did not ask for one: %s", r.raw)
	}
	// Stored, and seen by GET (not a cached copy).
	p, err := e.inv.FindProject(context.Background(), "p1")
	if err != nil || p.Settings.DefaultOSID != osID || p.Settings.DefaultLocalAccountID != acct ||
		len(p.Settings.DefaultCustomConfigIDs) != 2 || !p.Settings.AutoOnboardEnrolled {
		t.Fatalf("stored settings: got %+v, %v", p, err)
	}
	if g := settings(t, e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil)); g["defaultOsId"] != osID {
		t.Fatalf("GET after PATCH: got defaultOsId %v, want %s", g["defaultOsId"], osID)
	}

	// A partial change keeps the rest; snake_case names are accepted.
	s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokAdmin, map[string]any{"auto_onboard_enrolled": false}))
	if s["defaultOsId"] != osID || s["defaultLocalAccountId"] != acct || s["autoOnboardEnrolled"] != false {
		t.Fatalf("partial change: got %v", s)
	}
	// The exporter's per-host switch (snake_case too), kept by other changes.
	if s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"exporter_per_host_off": true})); s["exporterPerHostOff"] != true {
		t.Fatalf("exporterPerHostOff: got %v", s)
	}
	if p, _ := e.inv.FindProject(context.Background(), "p1"); !p.Settings.ExporterPerHostOff {
		t.Fatalf("stored exporterPerHostOff: got %+v", p.Settings)
	}
	e.must(t, 400, "PATCH", "~/settings", tokRW, map[string]any{"exporterPerHostOff": "yes"})
	if s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"exporterPerHostOff": false})); s["exporterPerHostOff"] != false {
		t.Fatalf("exporterPerHostOff off again: got %v", s)
	}
	// An empty body changes nothing.
	if s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{})); s["defaultOsId"] != osID {
		t.Fatalf("empty change: got %v", s)
	}
	// "" and null clear an ID, [] and null the list.
	s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, `{"defaultOsId":"","defaultLocalAccountId":null,"defaultCustomConfigIds":[]}`))
	if s["defaultOsId"] != "" || s["defaultLocalAccountId"] != "" || len(s["defaultCustomConfigIds"].([]any)) != 0 {
		t.Fatalf("clear: got %v", s)
	}
	p, _ = e.inv.FindProject(context.Background(), "p1")
	if p.Settings.DefaultOSID != "" || p.Settings.DefaultLocalAccountID != "" || p.Settings.DefaultCustomConfigIDs != nil {
		t.Fatalf("stored after clear: got %+v", p.Settings)
	}
	e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"defaultCustomConfigIds": []string{cc2}})
	s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, `{"defaultCustomConfigIds":null}`))
	if len(s["defaultCustomConfigIds"].([]any)) != 0 {
		t.Fatalf("null list: got %v", s)
	}
}

func TestEnrollmentToken(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	ctx := context.Background()
	r := e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"enrollmentToken": "new"})
	tok := r.str("enrollmentToken")
	if b, err := base64.RawURLEncoding.DecodeString(tok); err != nil || len(b) != 32 {
		t.Fatalf("enrollmentToken %q: want 32 bytes base64url without padding (%v)", tok, err)
	}
	if settings(t, r)["enrollment"] != true {
		t.Fatalf("enrollment: got %s, want true", r.raw)
	}
	p, err := e.inv.FindProject(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(tok))
	if want := hex.EncodeToString(sum[:]); p.Settings.EnrollmentTokenHash != want {
		t.Fatalf("stored hash: got %q, want %q (hex SHA-256 of the token)", p.Settings.EnrollmentTokenHash, want)
	}
	// Never shown again, nor its hash.
	g := e.must(t, 200, "GET", "/v1/projects/p1", tokAdmin, nil)
	if settings(t, g)["enrollment"] != true {
		t.Fatalf("GET: got %s, want enrollment true", g.raw)
	}
	for _, tk := range []string{tokAdmin, tokRO} {
		l := e.must(t, 200, "GET", "/v1/projects?view=eim", tk, nil)
		for _, body := range [][]byte{g.raw, l.raw} {
			for _, secret := range []string{tok, p.Settings.EnrollmentTokenHash, "enrollmentToken", "Hash"} {
				if strings.Contains(string(body), secret) {
					t.Fatalf("GET shows %q: %s", secret, body)
				}
			}
		}
	}
	other := e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"autoOnboardEnrolled": true})
	if strings.Contains(string(other.raw), "enrollmentToken") || settings(t, other)["enrollment"] != true {
		t.Fatalf("a later change: got %s, want the token kept and not shown", other.raw)
	}
	// "new" again replaces it.
	tok2 := e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"enrollmentToken": "new"}).str("enrollmentToken")
	p2, _ := e.inv.FindProject(ctx, "p1")
	if tok2 == "" || tok2 == tok || p2.Settings.EnrollmentTokenHash == p.Settings.EnrollmentTokenHash {
		t.Fatalf("second token: got %q (first %q), hash changed %v", tok2, tok, p2.Settings.EnrollmentTokenHash != p.Settings.EnrollmentTokenHash)
	}
	// "none" clears it.
	r = e.must(t, 200, "PATCH", "~/settings", tokAdmin, map[string]any{"enrollmentToken": "none"})
	if settings(t, r)["enrollment"] != false || r.str("enrollmentToken") != "" {
		t.Fatalf("none: got %s", r.raw)
	}
	if p, _ := e.inv.FindProject(ctx, "p1"); p.Settings.EnrollmentTokenHash != "" || !p.Settings.AutoOnboardEnrolled {
		t.Fatalf("stored after none: got %+v", p.Settings)
	}
}

func TestUpdateProjectSettingsRefused(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	osID := e.os(t, "ubuntu")
	acct := e.localAccount(t, "p1", "ops")
	cc := e.customConfig(t, "p1", "a")
	otherOS := e.must(t, 200, "POST", "/v1/projects/p2/compute/os", tokRW2,
		map[string]any{"name": "x", "sha256": sha, "profileName": "x", "osType": "OS_TYPE_MUTABLE"}).str("resourceId")
	otherAcct := e.localAccount(t, "p2", "ops")
	otherCC := e.customConfig(t, "p2", "a")

	tests := []struct {
		name   string
		token  string
		path   string
		body   any
		status int
		code   string
		words  []string
	}{
		{"no token", "", "~/settings", map[string]any{}, 401, "Unauthenticated", nil},
		{"read-only", tokRO, "~/settings", map[string]any{"autoOnboardEnrolled": true}, 403, "PermissionDenied", []string{"p1"}},
		{"other project's role", tokRW2, "~/settings", map[string]any{"autoOnboardEnrolled": true}, 403, "PermissionDenied", []string{"p1"}},
		{"no such project", tokAdmin, "/v1/projects/nosuch/settings", map[string]any{}, 404, "NotFound", []string{"nosuch"}},
		{"unknown field", tokRW, "~/settings", map[string]any{"defaultOs": osID}, 400, "InvalidArgument", []string{"defaultOs"}},
		{"hash", tokRW, "~/settings", map[string]any{"enrollmentTokenHash": "00"}, 400, "InvalidArgument", []string{"enrollmentTokenHash", "read-only"}},
		{"enrollment", tokRW, "~/settings", map[string]any{"enrollment": true}, 400, "InvalidArgument", []string{"enrollment"}},
		{"twice", tokRW, "~/settings", `{"defaultOsId":"","default_os_id":""}`, 400, "InvalidArgument", []string{"defaultOsId", "twice"}},
		{"not an object", tokRW, "~/settings", `[]`, 400, "InvalidArgument", []string{"object"}},
		{"bad JSON", tokRW, "~/settings", `{"defaultOsId":`, 400, "InvalidArgument", nil},
		{"malformed os", tokRW, "~/settings", map[string]any{"defaultOsId": "os-xyz"}, 400, "InvalidArgument", []string{"defaultOsId", "os-xyz"}},
		{"os of another kind", tokRW, "~/settings", map[string]any{"defaultOsId": acct}, 400, "InvalidArgument", []string{"defaultOsId"}},
		{"malformed account", tokRW, "~/settings", map[string]any{"defaultLocalAccountId": "acct"}, 400, "InvalidArgument", []string{"defaultLocalAccountId"}},
		{"malformed config", tokRW, "~/settings", map[string]any{"defaultCustomConfigIds": []string{cc, "x"}}, 400, "InvalidArgument", []string{"defaultCustomConfigIds[1]"}},
		{"duplicate config", tokRW, "~/settings", map[string]any{"defaultCustomConfigIds": []string{cc, cc}}, 400, "InvalidArgument", []string{"defaultCustomConfigIds[1]", "more than once"}},
		{"os not a string", tokRW, "~/settings", map[string]any{"defaultOsId": 5}, 400, "InvalidArgument", []string{"defaultOsId"}},
		{"list not a list", tokRW, "~/settings", map[string]any{"defaultCustomConfigIds": cc}, 400, "InvalidArgument", []string{"defaultCustomConfigIds"}},
		{"bool not a bool", tokRW, "~/settings", map[string]any{"autoOnboardEnrolled": "yes"}, 400, "InvalidArgument", []string{"autoOnboardEnrolled"}},
		{"token value", tokRW, "~/settings", map[string]any{"enrollmentToken": "secret"}, 400, "InvalidArgument", []string{"enrollmentToken"}},
		{"token empty", tokRW, "~/settings", map[string]any{"enrollmentToken": ""}, 400, "InvalidArgument", []string{"enrollmentToken"}},
		{"token null", tokRW, "~/settings", `{"enrollmentToken":null}`, 400, "InvalidArgument", []string{"enrollmentToken"}},
		{"missing os", tokRW, "~/settings", map[string]any{"defaultOsId": "os-0000beef"}, 404, "NotFound", []string{"defaultOsId", "os-0000beef"}},
		{"os of p2", tokRW, "~/settings", map[string]any{"defaultOsId": otherOS}, 404, "NotFound", []string{"defaultOsId", otherOS}},
		{"account of p2", tokRW, "~/settings", map[string]any{"defaultLocalAccountId": otherAcct}, 404, "NotFound", []string{"defaultLocalAccountId"}},
		{"config of p2", tokRW, "~/settings", map[string]any{"defaultCustomConfigIds": []string{cc, otherCC}}, 404, "NotFound", []string{"defaultCustomConfigIds[1]", otherCC}},
		{"valid os, missing account", tokAdmin, "~/settings", map[string]any{"defaultOsId": osID, "defaultLocalAccountId": "localaccount-0000beef"}, 404, "NotFound", []string{"defaultLocalAccountId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, e.do(t, "PATCH", tt.path, tt.token, tt.body), tt.status, tt.code, tt.words...)
		})
	}
	// Nothing of the refused changes was stored; the enrollment token
	// value was not either.
	p, err := e.inv.FindProject(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Settings; s.DefaultOSID != "" || s.DefaultLocalAccountID != "" || s.DefaultCustomConfigIDs != nil || s.AutoOnboardEnrolled || s.EnrollmentTokenHash != "" {
		t.Fatalf("settings after refused changes: got %+v, want the zero value", s)
	}
}

// The heartbeat settings: set, shown, validated together (a timeout under
// two intervals is a 400 naming the field), and 0 restores the default.
func TestHeartbeatSettings(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	s := settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"heartbeatIntervalSeconds": 30}))
	if s["heartbeatIntervalSeconds"] != float64(30) || s["heartbeatTimeoutSeconds"] != float64(0) {
		t.Fatalf("settings %v, want interval 30, timeout 0", s)
	}
	s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"heartbeat_timeout_seconds": 90}))
	if s["heartbeatIntervalSeconds"] != float64(30) || s["heartbeatTimeoutSeconds"] != float64(90) {
		t.Fatalf("settings %v, want interval 30, timeout 90", s)
	}
	for _, tc := range []struct {
		body any
		word string
	}{
		{map[string]any{"heartbeatTimeoutSeconds": 59}, "heartbeatTimeoutSeconds"},
		{map[string]any{"heartbeatIntervalSeconds": 4}, "heartbeatIntervalSeconds"},
		{map[string]any{"heartbeatIntervalSeconds": 3601}, "heartbeatIntervalSeconds"},
		{map[string]any{"heartbeatIntervalSeconds": -1}, "heartbeatIntervalSeconds"},
		{map[string]any{"heartbeatIntervalSeconds": "soon"}, "heartbeatIntervalSeconds"},
	} {
		wantError(t, e.do(t, "PATCH", "~/settings", tokRW, tc.body), 400, "InvalidArgument", tc.word)
	}
	s = settings(t, e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"heartbeatIntervalSeconds": 0, "heartbeatTimeoutSeconds": 0}))
	if s["heartbeatIntervalSeconds"] != float64(0) || s["heartbeatTimeoutSeconds"] != float64(0) {
		t.Fatalf("settings %v, want the defaults back", s)
	}
}

// TestDefaultProviderSettings: the provider infra_onboarding and the
// project's settings show the same zero-touch choices, and a change of
// either is a change of both.
func TestDefaultProviderSettings(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	provider := func() resp {
		t.Helper()
		items := e.must(t, 200, "GET", "~/providers?filter=name%3D%22infra_onboarding%22", tokRO, nil).items("providers")
		if len(items) != 1 {
			t.Fatalf("default provider: got %d, want 1", len(items))
		}
		return resp{obj: items[0].(map[string]any)}
	}
	p := provider()
	if p.str("providerKind") != "PROVIDER_KIND_BAREMETAL" || p.str("apiEndpoint") != "null" ||
		p.str("config") != `{"defaultOs":"","autoProvision":false,"defaultLocalAccount":"","osSecurityFeatureEnable":false}` {
		t.Fatalf("default provider: got %v", p.obj)
	}
	osID := e.os(t, "ztp")
	e.must(t, 200, "PATCH", "~/settings", tokRW, map[string]any{"defaultOsId": osID, "osSecurityFeatureEnable": true})
	if got, want := provider().str("config"), `{"defaultOs":"`+osID+`","autoProvision":true,"defaultLocalAccount":"","osSecurityFeatureEnable":true}`; got != want {
		t.Errorf("provider config after the settings: got %s, want %s", got, want)
	}
	// As the original's UI and CLI: the provider deleted and created again
	// with another config (providers have no PUT or PATCH).
	e.must(t, 200, "DELETE", "~/providers/"+provider().str("resourceId"), tokRW, nil)
	if s := settings(t, e.must(t, 200, "GET", "~", tokRO, nil)); s["defaultOsId"] != "" {
		t.Errorf("settings without the default provider: got %v, want no default OS", s)
	}
	e.must(t, 200, "POST", "~/providers", tokRW, map[string]any{"name": "infra_onboarding", "providerKind": "PROVIDER_KIND_BAREMETAL", "apiEndpoint": "null",
		"config": `{"defaultOs":"` + osID + `","autoProvision":true,"defaultLocalAccount":"","osSecurityFeatureEnable":false}`})
	s := settings(t, e.must(t, 200, "GET", "~", tokRO, nil))
	if s["defaultOsId"] != osID || s["osSecurityFeatureEnable"] != false {
		t.Errorf("settings after the provider's creation: got %v, want default OS %s, security feature off", s, osID)
	}
	wantError(t, e.do(t, "POST", "~/providers", tokRW, map[string]any{"name": "infra_onboarding", "providerKind": "PROVIDER_KIND_BAREMETAL", "apiEndpoint": "null",
		"config": `{"defaultOs":"os-0000beef","autoProvision":true}`}), 404, "NotFound", "config.defaultOs")
}

// TestProjectSettingsDocumented compares the settings a project's answer
// carries with the document's ProjectSettings (every member documented
// and required: the server always writes them all), and the members the
// answer shows that a client may change with ProjectSettingsChange
// (closed: a client checking its body against it could send no other).
func TestProjectSettingsDocumented(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					ReadOnly bool `yaml:"readOnly"`
				} `yaml:"properties"`
				Required []string `yaml:"required"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.Spec(), &doc); err != nil {
		t.Fatalf("parse api.Spec(): %v", err)
	}
	schema, change := doc.Components.Schemas["ProjectSettings"], doc.Components.Schemas["ProjectSettingsChange"]
	e := newEnv(t, httpapi.Options{})
	answer := settings(t, e.must(t, 200, "GET", "/v1/projects/p1", tokRO, nil))
	var got []string
	for name := range answer {
		got = append(got, name)
	}
	sort.Strings(got)
	var documented []string
	for name := range schema.Properties {
		documented = append(documented, name)
	}
	sort.Strings(documented)
	required := slices.Clone(schema.Required)
	sort.Strings(required)
	if !slices.Equal(got, documented) {
		t.Errorf("ProjectSettings properties: got %v documented, want %v (the answer's)", documented, got)
	}
	if !slices.Equal(got, required) {
		t.Errorf("ProjectSettings required: got %v, want %v (the answer's, all always written)", required, got)
	}
	for _, name := range got {
		if _, ok := change.Properties[name]; !ok && !schema.Properties[name].ReadOnly {
			t.Errorf("ProjectSettingsChange lacks %s, a setting the answer shows and is not read-only", name)
		}
	}
	for name := range change.Properties {
		if _, ok := answer[name]; !ok && name != "enrollmentToken" {
			t.Errorf("ProjectSettingsChange has %s, which the answer does not show", name)
		}
	}
}
