package amt

import (
	"testing"
)

// FuzzParsers: the parsers of the MPS's answers neither panic nor quote
// more than a bounded part of what they were given.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		`{"token":"eyJ.a.b"}`,
		`{"powerstate":2,"OSPowerSavingState":0}`,
		`{"Body":{"ReturnValue":0,"ReturnValueStr":"SUCCESS"}}`,
		`{"Power up":2,"Reset to PXE":400}`,
		`{"error":"Device not found/connected. Please connect again using CIRA.","errorDescription":"guid : x"}`,
		`{"errors":[{"msg":"Power action type does not exist"}]}`,
		`{"message":"Unauthorized"}`,
		`{"powerstate":-1}`, `[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = parseToken(data)
		if _, err := parsePowerState(data); err != nil && len(err.Error()) > 400 {
			t.Errorf("power state error too long: %d", len(err.Error()))
		}
		if _, text, err := parseActionResult(data); err == nil && len(text) > 64 {
			t.Errorf("ReturnValueStr not bounded: %d", len(text))
		}
		_, _ = parseCapabilities(data)
		if msg := parseError(data); len(msg) > 600 {
			t.Errorf("error text not bounded: %d", len(msg))
		}
	})
}
