package sqlstore

import (
	"encoding/json"
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
	for _, r := range []eim.Resource{
		&eim.Host{},
		&eim.Host{Name: "h \"1\" <&>", UUID: "8a6d1ec1-0f3a-4d1c-9d5e-0c8e6f3b2a11", SiteID: "site-1234abcd", SerialNumber: "SN1",
			Metadata: eim.Metadata{{Key: "k", Value: "v"}}, NodeSecretHash: "secret", HostStatus: "Running", HostStatusTimestamp: 17},
		&eim.Instance{Name: "i", OSID: "os-1", HostID: "host-1"},
		&eim.Site{Name: "s", RegionID: "region-1", SiteLat: 12, SiteLng: -3},
	} {
		c := codecOf(r.ResourceKind())
		got, want := createChangesJSON(c, r), byMap(c, r)
		if string(got) != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", r.ResourceKind(), got, want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: not JSON: %s", r.ResourceKind(), got)
		}
	}
}
