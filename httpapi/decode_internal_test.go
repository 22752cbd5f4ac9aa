package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// 64-bit integers may come as strings (the schemas declare them strings,
// as protojson writes them); 32-bit ones, declared integers, may not.
func TestIntegersFromStrings(t *testing.T) {
	tests := []struct {
		name string
		dst  any
		raw  string
		ok   bool
	}{
		{"int64 string", new(int64), `"-12"`, true},
		{"uint64 string", new(uint64), `"18446744073709551615"`, true},
		{"int64 number", new(int64), `-12`, true},
		{"int32 string", new(int32), `"12"`, false},
		{"uint32 string", new(uint32), `"12"`, false},
		{"uint32 number", new(uint32), `12`, true},
		{"uint32 float", new(uint32), `1.5`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := setField("f", reflect.ValueOf(tt.dst).Elem(), json.RawMessage(tt.raw))
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want ok %v", err, tt.ok)
			}
		})
	}
	var n uint64
	if err := decodeUint("userLvmSize", json.RawMessage(`"10"`), 32, &n); err == nil {
		t.Errorf("decodeUint of a 32-bit field from a string: got %d, want an error", n)
	}
}

func TestClipEchoes(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := []struct{ in, want string }{
		{`short "value"`, `short "value"`},
		{`id: "` + long + `" is not valid`, `id: "` + long[:64] + `…" is not valid`},
		{`two "` + long + `" and "` + long + `"`, `two "` + long[:64] + `…" and "` + long[:64] + `…"`},
		{`escaped "\"` + long + `" end`, `escaped "\"` + long[:62] + `…" end`},
		{`unbalanced "` + long, `unbalanced "` + long[:64] + `…`},
		{`runes "` + strings.Repeat("é", 40) + `"`, `runes "` + strings.Repeat("é", 32) + `…"`},
		{strings.Repeat("b", 2000), strings.Repeat("b", maxMessage) + "…"},
	}
	for _, tt := range tests {
		if got := clipEchoes(tt.in); got != tt.want {
			t.Errorf("clipEchoes(%.40q…):\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}
