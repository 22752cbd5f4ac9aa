package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// Input the original's gateway let through and EIM refuses.
func TestStrictInput(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	region := e.region(t, "r")
	host := e.host(t, "h")

	t.Run("scheduleStatus UNSPECIFIED", func(t *testing.T) {
		single := map[string]any{"scheduleStatus": "SCHEDULE_STATUS_UNSPECIFIED", "startSeconds": 1700000000, "targetRegionId": region}
		wantError(t, e.do(t, "POST", "~/schedules/single", tokRW, single), 400, "InvalidArgument", "scheduleStatus")
		repeated := map[string]any{"scheduleStatus": "SCHEDULE_STATUS_UNSPECIFIED", "durationSeconds": 60, "cronMinutes": "0", "cronHours": "1",
			"cronDayMonth": "*", "cronMonth": "*", "cronDayWeek": "*", "targetRegionId": region}
		wantError(t, e.do(t, "POST", "~/schedules/repeated", tokRW, repeated), 400, "InvalidArgument", "scheduleStatus")
		single["scheduleStatus"] = "SCHEDULE_STATUS_MAINTENANCE"
		id := e.must(t, 200, "POST", "~/schedules/single", tokRW, single).str("resourceId")
		wantError(t, e.do(t, "PATCH", "~/schedules/single/"+id, tokRW, map[string]any{"scheduleStatus": "SCHEDULE_STATUS_UNSPECIFIED"}), 400, "InvalidArgument", "scheduleStatus")
	})

	t.Run("32-bit integers as strings", func(t *testing.T) {
		for _, c := range []struct {
			method, path, field string
			body                map[string]any
		}{
			{"POST", "~/sites", "siteLat", map[string]any{"name": "s", "siteLat": "12"}},
			{"POST", "~/sites", "siteLng", map[string]any{"name": "s", "siteLng": "-3"}},
			{"POST", "~/schedules/single", "startSeconds", map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "startSeconds": "1700000000", "targetRegionId": region}},
			{"POST", "~/schedules/repeated", "durationSeconds", map[string]any{"scheduleStatus": "SCHEDULE_STATUS_MAINTENANCE", "durationSeconds": "60"}},
			{"POST", "~/compute/hosts/register", "userLvmSize", map[string]any{"uuid": newUUID(), "userLvmSize": "10"}},
			{"PATCH", "/v1/projects/p1/settings", "heartbeatIntervalSeconds", map[string]any{"heartbeatIntervalSeconds": "30"}},
		} {
			wantError(t, e.do(t, c.method, c.path, tokRW, c.body), 400, "InvalidArgument", c.field, "string")
		}
		// As numbers they pass.
		e.must(t, 200, "POST", "~/sites", tokRW, map[string]any{"name": "s", "siteLat": 12, "siteLng": -3})
		e.must(t, 200, "PATCH", "/v1/projects/p1/settings", tokRW, map[string]any{"heartbeatIntervalSeconds": 30})
	})

	t.Run("read-only enums must be names", func(t *testing.T) {
		for _, body := range []map[string]any{
			{"currentState": "HOST_STATE_BOGUS"},
			{"hostStatusIndicator": "NOPE"},
			{"currentPowerState": 3},
		} {
			for _, m := range []string{"PATCH", "PUT"} {
				b := map[string]any{"name": "h"}
				for k, v := range body {
					b[k] = v
				}
				wantError(t, e.do(t, m, "~/compute/hosts/"+host, tokRW, b), 400, "InvalidArgument")
			}
		}
		// A valid name is ignored, as read-only fields are.
		r := e.must(t, 200, "PATCH", "~/compute/hosts/"+host, tokRW, map[string]any{"currentState": "HOST_STATE_ONBOARDED", "hostStatusIndicator": nil})
		if r.str("currentState") == "HOST_STATE_ONBOARDED" {
			t.Errorf("read-only currentState was written")
		}
	})

	// The Secure Boot state, an extension field of ours, is the node's to
	// report: shown on every host, ignored when a client writes it, a 400
	// naming it when the value is not a state.
	t.Run("secureBootState is read-only", func(t *testing.T) {
		r := e.must(t, 200, "GET", "~/compute/hosts/"+host, tokRW, nil)
		if _, ok := r.obj["secureBootStateTimestamp"]; r.str("secureBootState") != "SECURE_BOOT_STATE_UNSPECIFIED" || !ok || r.num("secureBootStateTimestamp") != 0 {
			t.Errorf("a new host: secureBootState %q at %v, want SECURE_BOOT_STATE_UNSPECIFIED at 0", r.str("secureBootState"), r.obj["secureBootStateTimestamp"])
		}
		r = e.must(t, 200, "PATCH", "~/compute/hosts/"+host, tokRW, map[string]any{"secureBootState": "SECURE_BOOT_STATE_ENABLED", "secureBootStateTimestamp": 1767225600})
		if r.str("secureBootState") != "SECURE_BOOT_STATE_UNSPECIFIED" || r.num("secureBootStateTimestamp") != 0 {
			t.Errorf("written by a client: secureBootState %q at %v, want it ignored", r.str("secureBootState"), r.obj["secureBootStateTimestamp"])
		}
		for _, bad := range []any{"SECURE_BOOT_STATE_MAYBE", 4} {
			wantError(t, e.do(t, "PATCH", "~/compute/hosts/"+host, tokRW, map[string]any{"secureBootState": bad}), 400, "InvalidArgument", "secureBootState")
		}
	})

	t.Run("Content-Type", func(t *testing.T) {
		send := func(method, path, ct, body string) resp {
			t.Helper()
			req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			tok := tokRW
			if path == "/v1/projects" {
				tok = tokAdmin
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			res, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			r := resp{status: res.StatusCode, raw: raw}
			r.obj = decodeObj(t, raw)
			return r
		}
		body := `{"name":"ct"}`
		for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "application/jsonx", "application/json; charset=latin1", "multipart/form-data; boundary=x"} {
			for _, m := range []struct{ method, path string }{
				{"POST", "/v1/projects/p1/regions"}, {"PATCH", "/v1/projects/p1/compute/hosts/" + host}, {"PUT", "/v1/projects/p1/regions/" + region},
				{"POST", "/v1/projects/p1/compute/hosts/register"}, {"PATCH", "/v1/projects/p1/settings"}, {"POST", "/v1/projects"},
			} {
				r := send(m.method, m.path, ct, body)
				if r.status != http.StatusUnsupportedMediaType || r.str("code") != "InvalidArgument" || !strings.Contains(r.str("message"), "application/json") {
					t.Errorf("%s %s with Content-Type %q: got %d %s, want 415 asking for application/json", m.method, m.path, ct, r.status, r.raw)
				}
			}
		}
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
			if r := send("POST", "/v1/projects/p1/regions", ct, body); r.status != 200 {
				t.Errorf("Content-Type %q: got %d %s, want 200", ct, r.status, r.raw)
			}
		}
		// A write without a body needs no Content-Type.
		if r := send("PUT", "/v1/projects/p1/compute/hosts/"+e.host(t, "inv")+"/invalidate", "", ""); r.status != 200 {
			t.Errorf("invalidate without a body: got %d %s, want 200", r.status, r.raw)
		}
	})

	t.Run("errors echo a prefix of a value", func(t *testing.T) {
		big := strings.Repeat("x", 60<<10)
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", "~/compute/hosts/host-" + big, nil},
			{"GET", "~/compute/hosts?filter=" + big, nil},
			{"GET", "~/compute/hosts?orderBy=" + big, nil},
			{"PATCH", "~/compute/hosts/" + host + "?fieldMask=" + big, map[string]any{}},
			{"POST", "~/regions", map[string]any{big: 1}},
			{"POST", "~/regions", map[string]any{"name": big[:90<<10/2]}},
			{"POST", "~/regions", map[string]any{"name": "r", "parentId": "region-" + big[:90<<10/2]}},
			{"PATCH", "~/compute/hosts/" + host, map[string]any{"desiredState": big[:90<<10/2]}},
			{"PATCH", "~/compute/hosts/" + host, map[string]any{"currentState": big[:90<<10/2]}},
			{"POST", "~/compute/hosts/register", map[string]any{"serialNumber": big[:90<<10/2]}},
			{"GET", "/v1/projects/" + big[:1000] + "/regions", nil},
		} {
			r := e.do(t, c.method, c.path, tokRW, c.body)
			if r.status < 400 || r.status >= 500 {
				t.Errorf("%s %.60s…: got %d, want a 4xx", c.method, c.path, r.status)
			}
			if len(r.raw) > 2<<10 || strings.Contains(r.str("message"), strings.Repeat("x", 65)) {
				t.Errorf("%s %.60s…: error of %d bytes echoes %d x's: %.200s", c.method, c.path, len(r.raw), strings.Count(r.str("message"), "x"), r.raw)
			}
		}
	})
}

func decodeObj(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var obj map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("response is not a JSON object: %v: %s", err, raw)
		}
	}
	return obj
}
