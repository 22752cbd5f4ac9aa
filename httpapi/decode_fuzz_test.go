package httpapi

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/eimhq/eim"
)

// The decoder is internal, so its fuzz test is too; the HTTP tests cover
// it black-box. Seeds are in testdata/fuzz/FuzzDecodeResource.
func FuzzDecodeResource(f *testing.F) {
	f.Add(uint8(2), []byte(`{"name":"h1","uuid":"6e0b2a4c-7a3f-4d7e-9a4a-6a0b9c1d2e3f","metadata":[{"key":"a","value":"b"}]}`))
	f.Add(uint8(1), []byte(`{"name":"s","siteLat":"12","siteLng":-3,"region_id":"region-0000abcd"}`))
	// Every API type: each kind, and each variant of the kinds that have
	// them (their decoding knows the variant's fields).
	type apiType struct {
		k       eim.Kind
		variant string
	}
	var types []apiType
	for _, k := range eim.Kinds() {
		types = append(types, apiType{k, ""})
		for _, v := range eim.Variants(k) {
			types = append(types, apiType{k, v.Value})
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		typ := types[int(kind)%len(types)]
		k := typ.k
		r, fields, err := decodeResource(k, typ.variant, body)
		if err != nil {
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Fatalf("decode %s %q: got code %q (%v), want %q", k, body, got, err, eim.EINVALID)
			}
			return
		}
		if fields == nil {
			t.Fatalf("decode %s %q: fields is nil, want non-nil", k, body)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("decoded %s %q does not marshal: %v", k, body, err)
		}
		sc := eim.SchemaOf(k)
		if got := sc.VariantOf(r); typ.variant != "" && got != typ.variant {
			t.Fatalf("decoded %s %q: variant %q, want %q", k, body, got, typ.variant)
		}
		for _, name := range fields {
			if fd, _ := sc.Field(name); fd == nil || !fd.In(typ.variant) {
				t.Fatalf("decoded %s %q: field %s is not of variant %q", k, body, name, typ.variant)
			}
		}
	})
}

// The profile lists' query: any input is a query or an InvalidArgument,
// and what passes is within the API's bounds. Seeds are in
// testdata/fuzz/FuzzTelemetryProfileQuery.
func FuzzTelemetryProfileQuery(f *testing.F) {
	f.Add("instanceId=inst-0000abcd&showInherited=true&pageSize=5&offset=10&orderBy=metricsInterval%20desc")
	f.Add("siteId=site-0000abcd&regionId=region-0000abcd&showInherited=1")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		tq, err := telemetryProfileQuery(q)
		if err != nil {
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Fatalf("query %q: got code %q (%v), want %q", raw, got, err, eim.EINVALID)
			}
			return
		}
		if tq.PageSize < 1 || tq.PageSize > maxPageSize || tq.Offset < 0 || tq.Offset > maxOffset {
			t.Fatalf("query %q: paging %d/%d out of bounds", raw, tq.PageSize, tq.Offset)
		}
		for _, c := range []struct {
			k  eim.Kind
			id string
		}{{eim.KindInstance, tq.InstanceID}, {eim.KindSite, tq.SiteID}, {eim.KindRegion, tq.RegionID}} {
			if c.id != "" && !eim.ValidID(c.k, c.id) {
				t.Fatalf("query %q: %s ID %q passed", raw, c.k, c.id)
			}
		}
	})
}
