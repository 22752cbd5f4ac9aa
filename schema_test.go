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

// The telemetry kinds hold two API types each: a hidden variant field, and
// fields that only one variant has.
func TestSchemaVariants(t *testing.T) {
	g := eim.SchemaOf(eim.KindTelemetryGroup)
	if g.Variant == nil || g.Variant.Name != "" || g.Variant.Column != "kind" || g.Variant.Writable {
		t.Fatalf("group variant field: got %+v, want the hidden, read-only column kind", g.Variant)
	}
	grp := &eim.TelemetryGroup{Type: eim.TelemetryMetrics}
	if v := g.VariantOf(grp); v != string(eim.TelemetryMetrics) {
		t.Errorf("VariantOf: got %q", v)
	}
	if v := eim.SchemaOf(eim.KindHost).VariantOf(&eim.Host{}); v != "" {
		t.Errorf("VariantOf(host): got %q, want \"\"", v)
	}
	p := eim.SchemaOf(eim.KindTelemetryProfile)
	logs, metrics := string(eim.TelemetryLogs), string(eim.TelemetryMetrics)
	for _, c := range []struct {
		field         string
		logs, metrics bool
	}{
		{"logLevel", true, false}, {"logsGroupId", true, false}, {"logsGroup", true, false},
		{"metricsInterval", false, true}, {"metricsGroupId", false, true}, {"metricsGroup", false, true},
		{"targetSite", true, true}, {"profileId", true, true},
	} {
		f, ok := p.Field(c.field)
		if !ok {
			t.Errorf("profile field %s missing", c.field)
			continue
		}
		if f.In(logs) != c.logs || f.In(metrics) != c.metrics || !f.In("") {
			t.Errorf("%s: In(logs)=%v In(metrics)=%v, want %v %v", c.field, f.In(logs), f.In(metrics), c.logs, c.metrics)
		}
	}
	if e, ok := p.Edge("logsGroup"); !ok || e.Kind != eim.KindTelemetryGroup || e.Column != "logs_group_id" {
		t.Errorf("logsGroup edge: got %+v", e)
	}
	if vs := eim.Variants(eim.KindTelemetryProfile); len(vs) != 2 || vs[0] != eim.TelemetryLogsProfile || vs[1] != eim.TelemetryMetricsProfile {
		t.Errorf("Variants(profile): got %v", vs)
	}
	if vs := eim.Variants(eim.KindHost); vs != nil {
		t.Errorf("Variants(host): got %v, want none", vs)
	}
	if v, ok := eim.VariantNamed(eim.KindTelemetryGroup, metrics); !ok || v.Plural != "telemetryMetricsGroups" {
		t.Errorf("VariantNamed: got %+v, %v", v, ok)
	}
	if k, ok := eim.KindOfID("telemetrygroup-0000abcd"); !ok || k != eim.KindTelemetryGroup {
		t.Errorf("KindOfID: got %q, %v", k, ok)
	}
}

func TestSeverityVerbosity(t *testing.T) {
	var prev int
	for _, l := range eim.SeverityLevel("").Values() {
		v := eim.SeverityLevel(l).Verbosity()
		if l != "SEVERITY_LEVEL_UNSPECIFIED" && v <= prev {
			t.Errorf("%s: verbosity %d, want more than %d", l, v, prev)
		}
		prev = v
	}
}
