package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/eimhq/eim"
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

// Nested resources sent back are checked a few levels deep, naming the
// field by its path; deeper, they are not looked into, so a body nesting
// objects thousands deep is read a bounded number of times.
func TestNestedReadOnlyTypes(t *testing.T) {
	deep := func(levels int, inner string) string {
		var b strings.Builder
		b.WriteString(`{"name":"i",`)
		for range levels {
			b.WriteString(`"host":{"instance":{`)
		}
		b.WriteString(inner)
		for range levels {
			b.WriteString(`}}`)
		}
		b.WriteString(`}`)
		return b.String()
	}
	for _, tt := range []struct {
		name, body, err string
	}{
		{"site's region's name", `{"host":{"site":{"region":{"name":12,"unmodelled":true}}}}`, "host.site.region.name: want a string"},
		{"site's region's timestamps", `{"host":{"site":{"region":{"timestamps":{"updatedAt":1}}}}}`, "host.site.region.timestamps.updatedAt: want a string"},
		{"nested site's provider", `{"host":{"site":{"provider":"p"}}}`, "host.site.provider: want an object"},
		{"custom config in the list", `{"customConfig":[{"name":"a"},{"config":7}]}`, "customConfig[1].config: want a string"},
		{"host's hardware", `{"host":{"hostNics":[1]}}`, "host.hostNics[0]: want an object"},
		{"a GET answer's shape", `{"host":{"site":{"region":{"parentRegion":{"parentRegion":null},"totalSites":0}},"hostNics":[{"deviceName":"eth0"}],` +
			`"memoryBytes":"1024"},"os":{"name":"o"},"workloadMembers":[{"workload":{"members":[]},"kind":"WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}]}`, ""},
		{"two levels, wrong", deep(2, `"name":7`), "host.instance.host.instance.name: want a string"},
		{"beyond the depth looked into", deep(5000, `"name":7`), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeResource(eim.KindInstance, "", []byte(tt.body))
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("got %v, want %q", err, tt.err)
			}
		})
	}
}

// Every field type of every kind has a type check: whatever JSON a client
// sends on a read-only field, the answer is ok or a 400, never the 500 of
// a type without a decoder.
func TestReadOnlyCheckCoversEveryType(t *testing.T) {
	for _, k := range eim.Kinds() {
		for _, f := range eim.SchemaOf(k).Fields {
			if f.Name == "" {
				continue
			}
			for _, raw := range []string{`12`, `"x"`, `true`, `{}`, `[]`, `[{}]`, `null`} {
				if err := checkReadOnly(f.Name, f.Type, json.RawMessage(raw), 0); err != nil && eim.ErrorCode(err) != eim.EINVALID {
					t.Errorf("%s.%s (%s) = %s: got %v, want ok or %s", k, f.Name, f.Type, raw, err, eim.EINVALID)
				}
			}
		}
	}
}
