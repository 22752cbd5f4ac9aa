package eim_test

import (
	"testing"

	"github.com/eimhq/eim"
)

func TestSchemaColumns(t *testing.T) {
	cases := []struct {
		kind       eim.Kind
		field, col string
		writable   bool
	}{
		{eim.KindHost, "resourceId", "id", false},
		{eim.KindHost, "siteId", "site_id", true},
		{eim.KindHost, "site_id", "site_id", true},
		{eim.KindHost, "bmcIp", "bmc_ip", false},
		{eim.KindHost, "desiredState", "desired_state", false},
		{eim.KindInstance, "hostID", "host_id", true},
		{eim.KindInstance, "osUpdatePolicyID", "os_update_policy_id", true},
		{eim.KindOS, "tlsCaCert", "tls_ca_cert", true},
		{eim.KindOS, "imageUrl", "image_url", true},
		{eim.KindRegion, "parentId", "parent_id", true},
		{eim.KindSite, "siteLat", "site_lat", true},
	}
	for _, c := range cases {
		s := eim.SchemaOf(c.kind)
		f, ok := s.Field(c.field)
		if !ok {
			t.Errorf("%s.%s: not found", c.kind, c.field)
			continue
		}
		if f.Column != c.col || f.Writable != c.writable {
			t.Errorf("%s.%s: got column %q writable %v, want %q %v", c.kind, c.field, f.Column, f.Writable, c.col, c.writable)
		}
	}
	h := eim.SchemaOf(eim.KindHost)
	for _, name := range []string{"site", "provider", "instance"} {
		if _, ok := h.Edge(name); !ok {
			t.Errorf("host edge %q missing", name)
		}
	}
	if f, _ := h.Field("createdAt"); f == nil || f.Column != "created_at" {
		t.Errorf("createdAt: got %+v, want column created_at", f)
	}
	if f, _ := h.Field("inheritedMetadata"); f == nil || f.Stored() {
		t.Errorf("inheritedMetadata must be virtual, got %+v", f)
	}
}

func TestIDs(t *testing.T) {
	id := eim.NewID(eim.KindHost)
	if !eim.ValidID(eim.KindHost, id) {
		t.Fatalf("NewID gave invalid %q", id)
	}
	for _, bad := range []string{"host-1234567", "host-1234567g", "site-12345678", "host-ABCDEF12", "host-123456789"} {
		if eim.ValidID(eim.KindHost, bad) {
			t.Errorf("ValidID(%q) = true, want false", bad)
		}
	}
	if k, ok := eim.KindOfID("repeatedsche-0000abcd"); !ok || k != eim.KindRepeatedSchedule {
		t.Errorf("KindOfID: got %q %v", k, ok)
	}
}
