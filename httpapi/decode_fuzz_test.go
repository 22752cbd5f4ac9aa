package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/eimhq/eim"
)

// The decoder is internal, so its fuzz test is too; the HTTP tests cover
// it black-box. Seeds are in testdata/fuzz/FuzzDecodeResource.
func FuzzDecodeResource(f *testing.F) {
	f.Add(uint8(2), []byte(`{"name":"h1","uuid":"6e0b2a4c-7a3f-4d7e-9a4a-6a0b9c1d2e3f","metadata":[{"key":"a","value":"b"}]}`))
	f.Add(uint8(1), []byte(`{"name":"s","siteLat":"12","siteLng":-3,"region_id":"region-0000abcd"}`))
	kinds := eim.Kinds()
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		k := kinds[int(kind)%len(kinds)]
		r, fields, err := decodeResource(k, body)
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
	})
}
