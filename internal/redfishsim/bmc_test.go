package redfishsim_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim/internal/redfishsim"
)

const sys1 = "/redfish/v1/Systems/1"

func power(t *testing.T, m *redfishsim.Memory) redfishsim.PowerState {
	t.Helper()
	s, err := m.PowerState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServiceRootAndDocuments(t *testing.T) {
	e := oneSystem(t, redfishsim.NewMemory(redfishsim.MemoryConfig{}), redfishsim.Faults{})
	noAuth := map[string]string{"Authorization": ""}
	for _, tc := range []struct {
		path string
		want []string // fields (a/b for nested) the document has
	}{
		{"/redfish", []string{"v1"}},
		{"/redfish/v1/", []string{"@odata.id", "@odata.type", "RedfishVersion", "UUID", "Systems/@odata.id", "Managers/@odata.id",
			"Chassis/@odata.id", "SessionService/@odata.id", "Links/Sessions/@odata.id"}},
		{"/redfish/v1", []string{"@odata.id"}},
		{"/redfish/v1/odata", []string{"value"}},
	} {
		a := e.do(t, "GET", tc.path, nil, noAuth) // readable without credentials (DSP0266)
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: got %d, want 200", tc.path, a.status)
		}
		for _, f := range tc.want {
			if field(a.body, strings.Split(f, "/")...) == nil {
				t.Errorf("GET %s: no %s in %s", tc.path, f, a.raw)
			}
		}
	}
	a := e.do(t, "GET", "/redfish/v1/$metadata", nil, noAuth)
	if a.status != http.StatusOK || !strings.Contains(string(a.raw), `Namespace="ComputerSystem.v1_13_0"`) {
		t.Errorf("$metadata: got %d %.200s", a.status, a.raw)
	}
	if a := e.do(t, "GET", sys1, nil, noAuth); a.status != http.StatusUnauthorized || a.errorID() != "Base.1.16.NoValidSession" ||
		a.header.Get("WWW-Authenticate") == "" {
		t.Errorf("system without credentials: got %d %s", a.status, a.raw)
	}
	for _, p := range []string{"/redfish/v1/Systems", sys1, "/redfish/v1/Managers", "/redfish/v1/Managers/BMC", "/redfish/v1/Managers/BMC/VirtualMedia",
		"/redfish/v1/Managers/BMC/VirtualMedia/Cd", "/redfish/v1/Chassis", "/redfish/v1/Chassis/1", "/redfish/v1/SessionService",
		"/redfish/v1/SessionService/Sessions"} {
		doc := e.get(t, p)
		if doc["@odata.id"] != strings.TrimSuffix(p, "/") || doc["@odata.type"] == nil {
			t.Errorf("GET %s: @odata.id %v, @odata.type %v", p, doc["@odata.id"], doc["@odata.type"])
		}
	}
	a = e.do(t, "GET", "/redfish/v1/Systems/9", nil, nil)
	if a.status != http.StatusNotFound || a.errorID() != "Base.1.16.ResourceNotFound" || field(a.body, "error", "code") != "Base.1.16.ResourceNotFound" {
		t.Errorf("unknown system: got %d %s", a.status, a.raw)
	}
	a = e.do(t, "DELETE", sys1, nil, nil)
	if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") == "" || a.errorID() != "Base.1.16.OperationNotAllowed" {
		t.Errorf("DELETE system: got %d %s (Allow %q)", a.status, a.raw, a.header.Get("Allow"))
	}
	// Plain HTTP serves the same.
	resp, err := http.Get(e.srv.HTTPURL + "/redfish/v1/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP service root: got %d", resp.StatusCode)
	}
}

func TestSystemResource(t *testing.T) {
	e := oneSystem(t, redfishsim.NewMemory(redfishsim.MemoryConfig{On: true}), redfishsim.Faults{})
	doc := e.get(t, sys1)
	for f, want := range map[string]any{
		"PowerState":                           "On",
		"Boot/BootSourceOverrideTarget":        "None",
		"Boot/BootSourceOverrideEnabled":       "Disabled",
		"Boot/BootSourceOverrideMode":          "UEFI",
		"Boot/HttpBootUri":                     "",
		"Links/ManagedBy":                      []any{map[string]any{"@odata.id": "/redfish/v1/Managers/BMC"}},
		"Actions/#ComputerSystem.Reset/target": sys1 + "/Actions/ComputerSystem.Reset",
		"SerialNumber":                         "SIM1",
	} {
		if got := field(doc, strings.Split(f, "/")...); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", f, got, want)
		}
	}
	if uuid, _ := doc["UUID"].(string); len(uuid) != 36 {
		t.Errorf("UUID: got %q", uuid)
	}
	if got := fmt.Sprint(field(doc, "Actions", "#ComputerSystem.Reset", "ResetType@Redfish.AllowableValues")); !strings.Contains(got, "PushPowerButton") {
		t.Errorf("ResetType@Redfish.AllowableValues: got %v", got)
	}
	if got := fmt.Sprint(field(doc, "Boot", "BootSourceOverrideTarget@Redfish.AllowableValues")); !strings.Contains(got, "Pxe") || !strings.Contains(got, "UefiHttp") {
		t.Errorf("BootSourceOverrideTarget@Redfish.AllowableValues: got %v", got)
	}
}

// TestReset: what each reset type does from each state, with and without
// the iDRAC-like 409, on a machine whose transitions are instant.
func TestReset(t *testing.T) {
	on, off := redfishsim.PowerOn, redfishsim.PowerOff
	for _, tc := range []struct {
		from     redfishsim.PowerState
		reset    redfishsim.ResetType
		conflict bool
		status   int
		want     redfishsim.PowerState
		result   string
		boots    int
	}{
		{off, "On", false, 204, on, "done", 1},
		{on, "On", false, 204, on, "already", 0},
		{on, "On", true, 409, on, "conflict", 0},
		{off, "ForceOn", false, 204, on, "done", 1},
		{on, "ForceOff", false, 204, off, "done", 0},
		{off, "ForceOff", false, 204, off, "already", 0},
		{off, "ForceOff", true, 409, off, "conflict", 0},
		{on, "GracefulShutdown", false, 204, off, "done", 0},
		{off, "GracefulShutdown", false, 204, off, "already", 0},
		{off, "GracefulShutdown", true, 409, off, "conflict", 0},
		{on, "GracefulRestart", false, 204, on, "done", 1},
		{off, "GracefulRestart", false, 204, on, "done", 1},
		{off, "GracefulRestart", true, 409, off, "conflict", 0},
		{on, "ForceRestart", false, 204, on, "done", 1},
		{off, "ForceRestart", true, 409, off, "conflict", 0},
		{on, "PowerCycle", false, 204, on, "done", 1},
		{off, "PowerCycle", true, 204, on, "done", 1},
		{off, "PushPowerButton", false, 204, on, "done", 1},
		{on, "PushPowerButton", false, 204, off, "done", 0},
		{on, "Nmi", false, 204, on, "done", 0},
		{off, "Nmi", false, 204, off, "already", 0},
	} {
		t.Run(fmt.Sprintf("%s-%s-%v", tc.from, tc.reset, tc.conflict), func(t *testing.T) {
			m := redfishsim.NewMemory(redfishsim.MemoryConfig{On: tc.from == on})
			e := oneSystem(t, m, redfishsim.Faults{ConflictInState: tc.conflict})
			a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": tc.reset}, nil)
			if a.status != tc.status {
				t.Fatalf("got %d %s, want %d", a.status, a.raw, tc.status)
			}
			if tc.status == 409 && (field(a.body, "error", "code") != "Base.1.16.GeneralError" || !strings.Contains(string(a.raw), "already powered")) {
				t.Errorf("409 body: got %s", a.raw)
			}
			if got := power(t, m); got != tc.want {
				t.Errorf("power: got %s, want %s", got, tc.want)
			}
			if got := e.get(t, sys1)["PowerState"]; got != string(tc.want) {
				t.Errorf("PowerState: got %v, want %s", got, tc.want)
			}
			acts := e.bmc.Actions()
			if len(acts) != 1 || acts[0].Type != tc.reset || acts[0].Result != tc.result {
				t.Errorf("actions: got %+v, want one %s %s", acts, tc.reset, tc.result)
			}
			if got := len(m.Boots()); got != tc.boots {
				t.Errorf("boots: got %d, want %d", got, tc.boots)
			}
			if tc.reset == "Nmi" && tc.from == on && m.Nmis() != 1 {
				t.Errorf("NMIs: got %d, want 1", m.Nmis())
			}
		})
	}
}

func TestResetBadRequests(t *testing.T) {
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m, ResetTypes: []redfishsim.ResetType{"On", "ForceOff"}}}})
	target := sys1 + "/Actions/ComputerSystem.Reset"
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		id                 string
	}{
		{"no ResetType", "POST", target, map[string]any{}, 400, "Base.1.16.ActionParameterMissing"},
		{"unknown value", "POST", target, map[string]any{"ResetType": "Explode"}, 400, "Base.1.16.ActionParameterValueNotInList"},
		{"not allowed here", "POST", target, map[string]any{"ResetType": "GracefulShutdown"}, 400, "Base.1.16.ActionParameterValueNotInList"},
		{"wrong type", "POST", target, map[string]any{"ResetType": 3}, 400, "Base.1.16.ActionParameterValueTypeError"},
		{"unknown parameter", "POST", target, map[string]any{"ResetType": "On", "Force": true}, 400, "Base.1.16.ActionParameterUnknown"},
		{"malformed", "POST", target, `{"ResetType":`, 400, "Base.1.16.MalformedJSON"},
		{"GET", "GET", target, nil, 405, "Base.1.16.OperationNotAllowed"},
		{"unknown action", "POST", sys1 + "/Actions/ComputerSystem.Explode", map[string]any{}, 400, "Base.1.16.ActionNotSupported"},
		{"unknown system", "POST", "/redfish/v1/Systems/2/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, 404, "Base.1.16.ResourceNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(t, tc.method, tc.path, tc.body, nil)
			if a.status != tc.status || a.errorID() != tc.id {
				t.Errorf("got %d %s, want %d %s", a.status, a.raw, tc.status, tc.id)
			}
			if msg, _ := field(a.body, "error", "message").(string); msg == "" {
				t.Errorf("no error.message in %s", a.raw)
			}
		})
	}
	if got := power(t, m); got != redfishsim.PowerOff {
		t.Errorf("power after bad requests: got %s, want Off", got)
	}
	doc := e.get(t, sys1)
	if got := fmt.Sprint(field(doc, "Actions", "#ComputerSystem.Reset", "ResetType@Redfish.AllowableValues")); got != "[On ForceOff]" {
		t.Errorf("AllowableValues: got %s, want [On ForceOff]", got)
	}
}

// TestTransitions: slow transitions show PoweringOn and PoweringOff for
// their delay; a power-on during a graceful shutdown is lost; an OS that
// ignores the power button keeps the machine on.
func TestTransitions(t *testing.T) {
	clk := newClock()
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{Delay: 30 * time.Second, Now: clk.Now})
	e := start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: m}}, Now: clk.Now})
	reset := func(rt string) {
		t.Helper()
		if a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}, nil); a.status != 204 {
			t.Fatalf("%s: got %d %s", rt, a.status, a.raw)
		}
	}
	state := func() any { t.Helper(); return e.get(t, sys1)["PowerState"] }
	steps := []struct {
		reset   string
		advance time.Duration
		want    string
	}{
		{"On", 0, "PoweringOn"},
		{"", 29 * time.Second, "PoweringOn"},
		{"", time.Second, "On"},
		{"GracefulShutdown", 0, "PoweringOff"},
		{"On", 0, "PoweringOff"}, // lost
		{"", 30 * time.Second, "Off"},
		{"On", 30 * time.Second, "On"},
		{"GracefulRestart", 0, "PoweringOff"},
		{"", 30 * time.Second, "PoweringOn"},
		{"", 30 * time.Second, "On"},
		{"ForceOff", 0, "Off"},
		{"PowerCycle", 0, "PoweringOn"},
		{"", 30 * time.Second, "On"},
	}
	for i, st := range steps {
		if st.reset != "" {
			reset(st.reset)
		}
		clk.Add(st.advance)
		if got := state(); got != st.want {
			t.Fatalf("step %d (%s +%s): got %v, want %s", i, st.reset, st.advance, got, st.want)
		}
	}
	if acts := e.bmc.Actions(); acts[2].Type != "On" || acts[2].Result != "dropped" {
		t.Errorf("On during PoweringOff: got %+v, want dropped", acts[2])
	}
	if got := len(m.Boots()); got != 4 {
		t.Errorf("boots: got %d, want 4", got)
	}

	// An OS that ignores the power button.
	deaf := redfishsim.NewMemory(redfishsim.MemoryConfig{On: true, IgnoreGraceful: true, Delay: time.Second, Now: clk.Now})
	e = start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: deaf}}, Now: clk.Now})
	reset("GracefulShutdown")
	clk.Add(time.Minute)
	if got := state(); got != "On" {
		t.Errorf("graceful shutdown ignored: got %v, want On", got)
	}
	reset("ForceOff")
	if got := state(); got != "Off" {
		t.Errorf("force off: got %v, want Off", got)
	}
	// Switched on behind the BMC's back.
	deaf.Set(redfishsim.PowerOn)
	if got := state(); got != "On" {
		t.Errorf("after Set: got %v, want On", got)
	}
}

// TestDropPowerOns: the next N power-on requests answer 204 and do nothing.
func TestDropPowerOns(t *testing.T) {
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := oneSystem(t, m, redfishsim.Faults{DropPowerOns: 2})
	for i, want := range []redfishsim.PowerState{"Off", "Off", "On"} {
		a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil)
		if a.status != 204 {
			t.Fatalf("On %d: got %d %s", i, a.status, a.raw)
		}
		if got := power(t, m); got != want {
			t.Errorf("after On %d: got %s, want %s", i, got, want)
		}
	}
	var results []string
	for _, a := range e.bmc.Actions() {
		results = append(results, a.Result)
	}
	if got := strings.Join(results, " "); got != "dropped dropped done" {
		t.Errorf("results: got %s, want dropped dropped done", got)
	}
	if e.bmc.Faults().DropPowerOns != 0 {
		t.Errorf("DropPowerOns left: %d", e.bmc.Faults().DropPowerOns)
	}
}

// TestBootOverride: a one-time override is used by the next boot and then
// reads Disabled; a continuous one stays; the faults that real BMCs show.
func TestBootOverride(t *testing.T) {
	for _, tc := range []struct {
		name       string
		faults     redfishsim.Faults
		enabled    string
		readBack   string // BootSourceOverrideEnabled after the PATCH
		bootTarget string // what the machine booted from
		afterBoot  string // BootSourceOverrideEnabled after the boot
		secondBoot string
	}{
		{"once", redfishsim.Faults{}, "Once", "Once", "Pxe", "Disabled", "None"},
		{"continuous", redfishsim.Faults{}, "Continuous", "Continuous", "Pxe", "Continuous", "Pxe"},
		{"once read back as continuous", redfishsim.Faults{OnceAsContinuous: true}, "Once", "Continuous", "Pxe", "Continuous", "Pxe"},
		{"once ignored", redfishsim.Faults{OnceIgnored: true}, "Once", "Once", "None", "Disabled", "None"},
		{"disabled", redfishsim.Faults{}, "Disabled", "Disabled", "None", "Disabled", "None"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
			e := oneSystem(t, m, tc.faults)
			a := e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": tc.enabled, "BootSourceOverrideMode": "Legacy"}}, nil)
			if a.status != 200 || field(a.body, "Boot", "BootSourceOverrideEnabled") != tc.readBack || field(a.body, "Boot", "BootSourceOverrideMode") != "Legacy" {
				t.Fatalf("PATCH: got %d %s, want 200 with %s", a.status, a.raw, tc.readBack)
			}
			if got := field(e.get(t, sys1), "Boot", "BootSourceOverrideEnabled"); got != tc.readBack {
				t.Errorf("read back: got %v, want %s", got, tc.readBack)
			}
			for _, rt := range []string{"On", "ForceRestart"} {
				if a := e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": rt}, nil); a.status != 204 {
					t.Fatalf("%s: got %d %s", rt, a.status, a.raw)
				}
				if rt == "On" {
					if got := field(e.get(t, sys1), "Boot", "BootSourceOverrideEnabled"); got != tc.afterBoot {
						t.Errorf("after the boot: got %v, want %s", got, tc.afterBoot)
					}
				}
			}
			boots := m.Boots()
			if len(boots) != 2 || boots[0].Target != tc.bootTarget || boots[1].Target != tc.secondBoot {
				t.Fatalf("boots: got %+v, want %s then %s", boots, tc.bootTarget, tc.secondBoot)
			}
			if tc.bootTarget == "Pxe" && boots[0].Mode != "Legacy" {
				t.Errorf("boot mode: got %q, want Legacy", boots[0].Mode)
			}
		})
	}

	t.Run("no boot mode", func(t *testing.T) {
		e := oneSystem(t, redfishsim.NewMemory(redfishsim.MemoryConfig{}), redfishsim.Faults{NoBootMode: true})
		if got := field(e.get(t, sys1), "Boot", "BootSourceOverrideMode"); got != nil {
			t.Errorf("BootSourceOverrideMode: got %v, want none", got)
		}
		a := e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "UEFI"}}, nil)
		if a.status != 400 || a.errorID() != "Base.1.16.PropertyUnknown" {
			t.Errorf("PATCH mode: got %d %s, want 400 PropertyUnknown", a.status, a.raw)
		}
	})

	t.Run("UEFI HTTP boot", func(t *testing.T) {
		m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
		e := oneSystem(t, m, redfishsim.Faults{})
		uri := "http://10.0.0.1:8080/boot.ipxe"
		a := e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "UefiHttp", "BootSourceOverrideEnabled": "Once", "HttpBootUri": uri}}, nil)
		if a.status != 200 || field(a.body, "Boot", "HttpBootUri") != uri {
			t.Fatalf("PATCH: got %d %s", a.status, a.raw)
		}
		e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil)
		if b := m.Boots(); len(b) != 1 || b[0].Target != "UefiHttp" || b[0].HTTPBootURI != uri {
			t.Errorf("boots: got %+v", b)
		}
	})
}

func TestPatchBadRequests(t *testing.T) {
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := oneSystem(t, m, redfishsim.Faults{})
	for _, tc := range []struct {
		name    string
		body    any
		id      string
		related string
	}{
		{"target not in list", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Floppy"}}, "Base.1.16.PropertyValueNotInList", "#/Boot/BootSourceOverrideTarget"},
		{"enabled not in list", map[string]any{"Boot": map[string]any{"BootSourceOverrideEnabled": "Twice"}}, "Base.1.16.PropertyValueNotInList", "#/Boot/BootSourceOverrideEnabled"},
		{"mode not in list", map[string]any{"Boot": map[string]any{"BootSourceOverrideMode": "BIOS"}}, "Base.1.16.PropertyValueNotInList", "#/Boot/BootSourceOverrideMode"},
		{"wrong type", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": 1}}, "Base.1.16.PropertyValueTypeError", "#/Boot/BootSourceOverrideTarget"},
		{"bad URI", map[string]any{"Boot": map[string]any{"HttpBootUri": "not a uri"}}, "Base.1.16.PropertyValueFormatError", "#/Boot/HttpBootUri"},
		{"unknown boot property", map[string]any{"Boot": map[string]any{"BootNext": "0001"}}, "Base.1.16.PropertyUnknown", "#/Boot/BootNext"},
		{"read-only", map[string]any{"PowerState": "On"}, "Base.1.16.PropertyNotWritable", "#/PowerState"},
		{"unknown", map[string]any{"Colour": "blue"}, "Base.1.16.PropertyUnknown", "#/Colour"},
		{"Boot not an object", map[string]any{"Boot": "Pxe"}, "Base.1.16.PropertyValueTypeError", "#/Boot"},
		{"malformed", `{"Boot": {`, "Base.1.16.MalformedJSON", ""},
		{"one bad of two", map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Never"}}, "Base.1.16.PropertyValueNotInList", "#/Boot/BootSourceOverrideEnabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(t, "PATCH", sys1, tc.body, nil)
			if a.status != 400 || a.errorID() != tc.id {
				t.Fatalf("got %d %s, want 400 %s", a.status, a.raw, tc.id)
			}
			if tc.related != "" && !strings.Contains(string(a.raw), `"RelatedProperties":["`+tc.related+`"]`) {
				t.Errorf("RelatedProperties: got %s, want %s", a.raw, tc.related)
			}
		})
	}
	if target, enabled, _, _ := e.bmc.BootOverride("1"); target != "None" || enabled != "Disabled" {
		t.Errorf("after bad PATCHes: got %s %s, want None Disabled (all or nothing)", target, enabled)
	}

	// If-Match: the ETag of the last GET, or 412.
	get := e.do(t, "GET", sys1, nil, nil)
	tag := get.header.Get("ETag")
	if !strings.HasPrefix(tag, `"`) {
		t.Fatalf("ETag: got %q", tag)
	}
	patch := map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Hdd"}}
	if a := e.do(t, "PATCH", sys1, patch, map[string]string{"If-Match": `"0000"`}); a.status != 412 || a.errorID() != "Base.1.16.PreconditionFailed" {
		t.Errorf("stale If-Match: got %d %s, want 412", a.status, a.raw)
	}
	if a := e.do(t, "PATCH", sys1, patch, map[string]string{"If-Match": "W/" + tag}); a.status != 200 || a.header.Get("ETag") == tag {
		t.Errorf("current If-Match: got %d %s (ETag %s), want 200 and a new ETag", a.status, a.raw, a.header.Get("ETag"))
	}
	if a := e.do(t, "PATCH", sys1, patch, map[string]string{"If-Match": tag}); a.status != 412 {
		t.Errorf("If-Match of before the change: got %d, want 412", a.status)
	}
}

func TestSessions(t *testing.T) {
	clk := newClock()
	e := start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})}},
		MaxSessions: 2, SessionTimeout: 10 * time.Minute, Now: clk.Now})
	noAuth := map[string]string{"Authorization": ""}
	login := func() answer {
		t.Helper()
		return e.do(t, "POST", "/redfish/v1/SessionService/Sessions", map[string]any{"UserName": user, "Password": password}, noAuth)
	}
	a := login()
	tok, loc := a.header.Get("X-Auth-Token"), a.header.Get("Location")
	if a.status != 201 || tok == "" || loc != "/redfish/v1/SessionService/Sessions/1" || a.body["Id"] != "1" || a.body["UserName"] != user {
		t.Fatalf("login: got %d %s (token %q, Location %q)", a.status, a.raw, tok, loc)
	}
	byToken := map[string]string{"Authorization": "", "X-Auth-Token": tok}
	if a := e.do(t, "GET", sys1, nil, byToken); a.status != 200 {
		t.Errorf("GET with the token: got %d", a.status)
	}
	if members := field(e.get(t, "/redfish/v1/SessionService/Sessions"), "Members@odata.count"); members != float64(1) {
		t.Errorf("sessions: got %v, want 1", members)
	}
	second := login()
	if second.status != 201 {
		t.Fatalf("second login: got %d", second.status)
	}
	// The limit: a third answers 503 SessionLimitExceeded.
	if a := login(); a.status != 503 || a.errorID() != "Base.1.16.SessionLimitExceeded" {
		t.Errorf("third login: got %d %s, want 503 SessionLimitExceeded", a.status, a.raw)
	}
	// Logging out frees a place.
	if a := e.do(t, "DELETE", loc, nil, byToken); a.status != 204 {
		t.Errorf("logout: got %d %s", a.status, a.raw)
	}
	if a := e.do(t, "GET", sys1, nil, byToken); a.status != 401 {
		t.Errorf("GET with a logged-out token: got %d, want 401", a.status)
	}
	third := login()
	if third.status != 201 {
		t.Fatalf("login after logout: got %d %s", third.status, third.raw)
	}
	// Idle sessions expire and free their places.
	clk.Add(11 * time.Minute)
	if e.bmc.Sessions() != 0 {
		t.Errorf("sessions after the timeout: got %d, want 0", e.bmc.Sessions())
	}
	if a := e.do(t, "GET", sys1, nil, map[string]string{"Authorization": "", "X-Auth-Token": third.header.Get("X-Auth-Token")}); a.status != 401 {
		t.Errorf("expired token: got %d, want 401", a.status)
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		id     string
	}{
		{"wrong password", map[string]any{"UserName": user, "Password": "nope"}, 401, "Base.1.16.ResourceAtUriUnauthorized"},
		{"no password", map[string]any{"UserName": user}, 400, "Base.1.16.CreateFailedMissingReqProperties"},
		{"malformed", "{", 400, "Base.1.16.MalformedJSON"},
	} {
		if a := e.do(t, "POST", "/redfish/v1/SessionService/Sessions", tc.body, noAuth); a.status != tc.status || a.errorID() != tc.id {
			t.Errorf("%s: got %d %s, want %d %s", tc.name, a.status, a.raw, tc.status, tc.id)
		}
	}
	if a := e.do(t, "GET", sys1, nil, map[string]string{"Authorization": "", "X-Auth-Token": "forged"}); a.status != 401 {
		t.Errorf("forged token: got %d, want 401", a.status)
	}

	// iDRAC's answer to the limit instead of bmcweb's.
	e = start(t, redfishsim.Config{Systems: []redfishsim.SystemConfig{{Machine: redfishsim.NewMemory(redfishsim.MemoryConfig{})}},
		MaxSessions: 1, SessionLimitStatus: 400})
	login()
	if a := login(); a.status != 400 || a.errorID() != "Base.1.16.SessionLimitExceeded" {
		t.Errorf("limit as 400: got %d %s", a.status, a.raw)
	}
}

func TestVirtualMedia(t *testing.T) {
	m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
	e := oneSystem(t, m, redfishsim.Faults{})
	cd := "/redfish/v1/Managers/BMC/VirtualMedia/Cd"
	image := "https://eim.example/boot/micro-os.iso"
	if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": image, "TransferProtocolType": "HTTPS"}, nil); a.status != 204 {
		t.Fatalf("insert: got %d %s", a.status, a.raw)
	}
	doc := e.get(t, cd)
	if doc["Image"] != image || doc["Inserted"] != true || doc["ImageName"] != "micro-os.iso" || doc["ConnectedVia"] != "URI" {
		t.Errorf("inserted CD: got %v", doc)
	}
	if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.InsertMedia", map[string]any{"Image": image}, nil); a.status != 409 || a.errorID() != "Base.1.16.ResourceInUse" {
		t.Errorf("insert twice: got %d %s, want 409", a.status, a.raw)
	}
	e.do(t, "PATCH", sys1, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}, nil)
	e.do(t, "POST", sys1+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil)
	if b := m.Boots(); len(b) != 1 || b[0].Target != "Cd" || b[0].Image != image {
		t.Errorf("boot from the CD: got %+v", b)
	}
	if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.EjectMedia", nil, nil); a.status != 204 { // no body, as sushy posts it
		t.Fatalf("eject: got %d %s", a.status, a.raw)
	}
	if doc := e.get(t, cd); doc["Inserted"] != false || doc["Image"] != "" {
		t.Errorf("ejected CD: got %v", doc)
	}
	for _, tc := range []struct {
		name string
		body any
		id   string
	}{
		{"no image", map[string]any{"Inserted": true}, "Base.1.16.ActionParameterMissing"},
		{"not a URI", map[string]any{"Image": "micro-os.iso"}, "Base.1.16.ActionParameterValueFormatError"},
		{"unknown parameter", map[string]any{"Image": image, "Speed": 1}, "Base.1.16.ActionParameterUnknown"},
		{"bad transfer method", map[string]any{"Image": image, "TransferMethod": "Carrier pigeon"}, "Base.1.16.ActionParameterValueNotInList"},
		{"wrong type", map[string]any{"Image": image, "Inserted": "yes"}, "Base.1.16.ActionParameterValueTypeError"},
	} {
		if a := e.do(t, "POST", cd+"/Actions/VirtualMedia.InsertMedia", tc.body, nil); a.status != 400 || a.errorID() != tc.id {
			t.Errorf("%s: got %d %s, want 400 %s", tc.name, a.status, a.raw, tc.id)
		}
	}
}

func TestSeveralSystems(t *testing.T) {
	var ms []*redfishsim.Memory
	var cfg redfishsim.Config
	for range 3 {
		m := redfishsim.NewMemory(redfishsim.MemoryConfig{})
		ms = append(ms, m)
		cfg.Systems = append(cfg.Systems, redfishsim.SystemConfig{Machine: m})
	}
	e := start(t, cfg)
	if got := field(e.get(t, "/redfish/v1/Systems"), "Members@odata.count"); got != float64(3) {
		t.Fatalf("systems: got %v, want 3", got)
	}
	if got := field(e.get(t, "/redfish/v1/Systems/2"), "Links", "ManagedBy"); fmt.Sprint(got) != "[map[@odata.id:/redfish/v1/Managers/BMC-2]]" {
		t.Errorf("system 2 managed by: got %v", got)
	}
	e.do(t, "POST", "/redfish/v1/Systems/2/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}, nil)
	var got []redfishsim.PowerState
	for _, m := range ms {
		got = append(got, power(t, m))
	}
	if !slices.Equal(got, []redfishsim.PowerState{"Off", "On", "Off"}) {
		t.Errorf("power: got %v, want only system 2 on", got)
	}
	uuids := map[any]bool{}
	for _, id := range []string{"1", "2", "3"} {
		uuids[e.get(t, "/redfish/v1/Systems/"+id)["UUID"]] = true
	}
	if len(uuids) != 3 {
		t.Errorf("UUIDs not distinct: %v", uuids)
	}
	if _, err := redfishsim.New(redfishsim.Config{Username: "u", Systems: []redfishsim.SystemConfig{{ID: "a", Machine: ms[0]}, {ID: "a", Machine: ms[1]}}}); err == nil {
		t.Error("two systems of one ID: got no error")
	}
}
