package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/eimhq/eim/httpapi"
)

// metadataOf renders a MetadataResponse as "key=v1,v2;…".
func metadataOf(t *testing.T, r resp) string {
	t.Helper()
	var body struct {
		Metadata []struct {
			Key    string
			Values []string
		}
	}
	if err := json.Unmarshal(r.raw, &body); err != nil || body.Metadata == nil {
		t.Fatalf("not a MetadataResponse (%v): %s", err, r.raw)
	}
	out := ""
	for _, m := range body.Metadata {
		out += m.Key + "="
		for i, v := range m.Values {
			if i > 0 {
				out += ","
			}
			out += v
		}
		out += ";"
	}
	return out
}

// TestMetadataBroker: …/metadata serves the original metadata broker's
// calls: the labels of the project's regions, sites and hosts and the
// pairs posted, each key once; changes need write access.
func TestMetadataBroker(t *testing.T) {
	e := newEnv(t, httpapi.Options{})
	if got := metadataOf(t, e.must(t, 200, "GET", "~/metadata", tokRO, nil)); got != "" {
		t.Errorf("empty project: got %s, want none", got)
	}
	md := func(kv ...string) []any {
		var out []any
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, map[string]any{"key": kv[i], "value": kv[i+1]})
		}
		return out
	}
	region := e.must(t, 200, "POST", "~/regions", tokRW, map[string]any{"name": "r", "metadata": md("customer", "acme", "zone", "eu")}).str("resourceId")
	e.must(t, 200, "POST", "~/sites", tokRW, map[string]any{"name": "s", "regionId": region, "metadata": md("zone", "berlin")})
	for range 3 {
		e.must(t, 200, "POST", "~/compute/hosts", tokRW, map[string]any{"name": "h", "uuid": newUUID(), "metadata": md("customer", "acme", "rack", "1")})
	}
	e.must(t, 200, "POST", "/v1/projects/p2/regions", tokRW2, map[string]any{"name": "other", "metadata": md("secret", "x")})
	if got, want := metadataOf(t, e.must(t, 200, "GET", "~/metadata", tokRO, nil)), "customer=acme;rack=1;zone=berlin,eu;"; got != want {
		t.Errorf("labels in use: got %s, want %s", got, want)
	}

	// POST records pairs, lower-cased, and answers the set.
	got := metadataOf(t, e.must(t, 200, "POST", "~/metadata", tokRW, map[string]any{"metadata": md("Customer", "Globex", "tier", "gold", "zone", "eu")}))
	if want := "customer=acme,globex;rack=1;tier=gold;zone=berlin,eu;"; got != want {
		t.Errorf("after POST: got %s, want %s", got, want)
	}
	if got := metadataOf(t, e.must(t, 200, "GET", "/v1/projects/p2/metadata", tokRW2, nil)); got != "secret=x;" {
		t.Errorf("other project: got %s, want secret=x only", got)
	}
	// DELETE forgets a posted pair; a label in use stays.
	if got := metadataOf(t, e.must(t, 200, "DELETE", "~/metadata?key=tier&value=GOLD", tokRW, nil)); got != "customer=acme,globex;rack=1;zone=berlin,eu;" {
		t.Errorf("after DELETE tier=gold: got %s", got)
	}
	e.must(t, 200, "DELETE", "~/metadata?key=zone&value=eu", tokRW, nil)
	if got := metadataOf(t, e.must(t, 200, "GET", "~/metadata", tokRO, nil)); got != "customer=acme,globex;rack=1;zone=berlin,eu;" {
		t.Errorf("a label in use stays: got %s", got)
	}
	wantError(t, e.do(t, "DELETE", "~/metadata?key=zone&value=eu", tokRW, nil), 404, "NotFound")

	// Bad input is a 400 naming the field; reading needs a role, writing
	// write access.
	for _, c := range []struct {
		body any
		word string
	}{
		{map[string]any{"metadata": md("", "x")}, "metadata[0].key"},
		{map[string]any{"metadata": md("a b", "x")}, "metadata[0].key"},
		{map[string]any{"metadata": md("a", "x y")}, "metadata[0].value"},
		{map[string]any{"metadata": []any{"a=b"}}, "metadata[0]"},
		{map[string]any{"metadata": []any{map[string]any{"key": "a", "value": "b", "extra": 1}}}, "metadata[0].extra"},
		{map[string]any{"labels": md("a", "b")}, "labels"},
		{map[string]any{}, "metadata"},
	} {
		wantError(t, e.do(t, "POST", "~/metadata", tokRW, c.body), 400, "InvalidArgument", c.word)
	}
	wantError(t, e.do(t, "DELETE", "~/metadata", tokRW, nil), 400, "InvalidArgument", "key")
	wantError(t, e.do(t, "POST", "~/metadata", tokRO, map[string]any{"metadata": md("a", "b")}), 403, "PermissionDenied")
	wantError(t, e.do(t, "GET", "~/metadata", tokRW2, nil), 403, "PermissionDenied")
}
