package httpapi

import (
	"testing"

	"github.com/eimhq/eim"
)

// FuzzDecodeWebhook: whatever the body of POST …/webhooks, decoding it
// answers a value or EINVALID, never panics; seeds in
// testdata/fuzz/FuzzDecodeWebhook.
func FuzzDecodeWebhook(f *testing.F) {
	f.Add([]byte(`{"url":"https://x.example/h","eventTypes":["host.onboarded"],"secret":"0123456789abcdef"}`))
	f.Add([]byte(`{"url":1,"eventTypes":"host.onboarded"}`))
	f.Add([]byte(`{"event_types":[null],"webhookId":"x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeWebhook(body)
		if err != nil {
			if got := eim.ErrorCode(err); got != eim.EINVALID {
				t.Fatalf("decode %q: got code %q (%v), want %q", body, got, err, eim.EINVALID)
			}
			return
		}
		// What decodes is then checked field by field.
		_ = eim.CheckWebhookURL(in.URL, eim.URLPolicy{})
		_ = eim.CheckEventTypes(in.EventTypes)
	})
}
