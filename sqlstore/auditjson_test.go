package sqlstore

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eimhq/eim"
)

// A create's audit changes, written in one pass, are byte for byte what
// encoding/json makes of the map of those changes (the form every other
// record has): the fields set, in the order of their names, each from
// null, secrets redacted.
func TestCreateChangesJSON(t *testing.T) {
	byMap := func(c *codec, r eim.Resource) []byte {
		m := map[string]eim.Change{}
		for _, col := range c.cols {
			if !auditedField(col) || col.field.Value(r).IsZero() {
				continue
			}
			m[fieldName(col)] = eim.Change{Old: jsonNull, New: fieldJSON(col, r)}
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	check := func(r eim.Resource) {
		t.Helper()
		c := codecOf(r.ResourceKind())
		vals, err := values(r, c.cols)
		if err != nil {
			t.Fatal(err)
		}
		got, want := createChangesJSON(c, r, vals), string(byMap(c, r))
		if string(got) != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", r.ResourceKind(), got, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: not JSON: %s", r.ResourceKind(), got)
		}
	}
	for _, r := range []eim.Resource{
		&eim.Host{},
		&eim.Host{Name: "h \"1\" <&>", UUID: "8a6d1ec1-0f3a-4d1c-9d5e-0c8e6f3b2a11", SiteID: "site-1234abcd", SerialNumber: "SN1",
			Metadata: eim.Metadata{{Key: "k", Value: "v"}}, NodeSecretHash: "secret", HostStatus: "Running", HostStatusTimestamp: 17},
		&eim.Host{Name: "tab\tnew\nline\x01\x7f", Hostname: "é\u2028\u2029", BootID: "\xff\xfe", NodeCredGen: 3,
			HostStatus: `back\slash`, PowerStatusTimestamp: 1 << 62},
		&eim.Instance{Name: "i", OSID: "os-1", HostID: "host-1"},
		&eim.Instance{Name: "empty list", CustomConfigIDs: []string{}},
		&eim.Instance{Name: "list", CustomConfigIDs: []string{"cc-1", "<cc-2>"}},
		&eim.Site{Name: "s", RegionID: "region-1", SiteLat: 12, SiteLng: -3},
	} {
		check(r)
	}
	// Every kind, its scalar fields all set (strings that need escaping
	// and that do not, integers, booleans, times).
	texts := []string{"plain-value", "needs <escaping> & \"quotes\"\n"}
	for _, k := range eim.Kinds() {
		for _, text := range texts {
			c := codecOf(k)
			r := c.schema.New()
			for _, col := range c.cols {
				v := col.field.Value(r)
				switch {
				case col.kind == colTime:
					v.Set(reflect.ValueOf(eim.TimeFromUnixMilli(1_764_700_000_123)))
				case v.Kind() == reflect.String:
					v.SetString(text)
				case v.CanInt():
					v.SetInt(-7)
				case v.CanUint():
					v.SetUint(9)
				case v.Kind() == reflect.Bool:
					v.SetBool(true)
				}
			}
			check(r)
		}
	}
}

// FuzzCreateChangesJSON: whatever the text of a create's fields, its
// record's changes are encoding/json's.
func FuzzCreateChangesJSON(f *testing.F) {
	f.Add("h1", "Running", "")
	f.Add("<&>", "\u2028", "\xff")
	f.Add("\x00\x1f", "\"\\", "é")
	c := codecOf(eim.KindHost)
	f.Fuzz(func(t *testing.T, name, status, hostname string) {
		r := &eim.Host{Name: name, HostStatus: status, Hostname: hostname, NodeSecretHash: name}
		vals, err := values(r, c.cols)
		if err != nil {
			t.Skip()
		}
		got := createChangesJSON(c, r, vals)
		m := map[string]eim.Change{}
		for _, col := range c.cols {
			if auditedField(col) && !col.field.Value(r).IsZero() {
				m[fieldName(col)] = eim.Change{Old: jsonNull, New: fieldJSON(col, r)}
			}
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
}
