package eim_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

const (
	goodUUID = "0c6c0a4e-4ad4-4f0f-9d1b-2f1c1d1e1f10"
	goodSha  = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	goodKey  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxkZXYta2V5LWZvci10ZXN0cw== user@example"
)

func TestValidate(t *testing.T) {
	meta := func(n int) eim.Metadata {
		md := make(eim.Metadata, n)
		for i := range md {
			md[i] = eim.MetadataItem{Key: fmt.Sprintf("k%d", i), Value: "v"}
		}
		return md
	}
	host := func(f func(*eim.Host)) *eim.Host {
		h := &eim.Host{Name: "edge-1", UUID: goodUUID}
		f(h)
		return h
	}
	inst := func(f func(*eim.Instance)) *eim.Instance {
		in := &eim.Instance{HostID: "host-0000abcd", OSID: "os-0000abcd"}
		f(in)
		return in
	}
	single := func(f func(*eim.SingleSchedule)) *eim.SingleSchedule {
		s := &eim.SingleSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", StartSeconds: 100, TargetHostID: "host-0000abcd"}
		f(s)
		return s
	}
	repeated := func(f func(*eim.RepeatedSchedule)) *eim.RepeatedSchedule {
		s := &eim.RepeatedSchedule{ScheduleStatus: "SCHEDULE_STATUS_MAINTENANCE", DurationSeconds: 3600,
			CronMinutes: "0", CronHours: "2,3", CronDayMonth: "*", CronMonth: "*", CronDayWeek: "1,5", TargetSiteID: "site-0000abcd"}
		f(s)
		return s
	}
	lgroup := func(f func(*eim.TelemetryGroup)) *eim.TelemetryGroup {
		g := &eim.TelemetryGroup{Type: eim.TelemetryLogs, Name: "System logs", CollectorKind: "TELEMETRY_COLLECTOR_KIND_HOST",
			Groups: []string{"systemd.service", `kern "x" (y)`}}
		f(g)
		return g
	}
	lprof := func(f func(*eim.TelemetryProfile)) *eim.TelemetryProfile {
		p := &eim.TelemetryProfile{Type: eim.TelemetryLogs, TargetSite: "site-0000abcd", LogLevel: "SEVERITY_LEVEL_INFO", LogsGroupID: "telemetrygroup-0000abcd"}
		f(p)
		return p
	}
	mprof := func(f func(*eim.TelemetryProfile)) *eim.TelemetryProfile {
		p := &eim.TelemetryProfile{Type: eim.TelemetryMetrics, TargetInstance: "inst-0000abcd", MetricsInterval: 30, MetricsGroupID: "telemetrygroup-0000abcd"}
		f(p)
		return p
	}
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("m", i)
		}
		return out
	}
	cases := []struct {
		name string
		r    eim.Resource
		want string // substring of the message; "" = valid
	}{
		{"telemetry group ok", lgroup(func(*eim.TelemetryGroup) {}), ""},
		{"telemetry group metrics", lgroup(func(g *eim.TelemetryGroup) { g.Type = eim.TelemetryMetrics }), ""},
		{"telemetry group no type", lgroup(func(g *eim.TelemetryGroup) { g.Type = "" }), "type:"},
		{"telemetry group no name", lgroup(func(g *eim.TelemetryGroup) { g.Name = "" }), "name: is required"},
		{"telemetry group bad name", lgroup(func(g *eim.TelemetryGroup) { g.Name = "a;b" }), "name:"},
		{"telemetry group no collector", lgroup(func(g *eim.TelemetryGroup) { g.CollectorKind = "" }), "collectorKind: is required"},
		{"telemetry group unspecified collector", lgroup(func(g *eim.TelemetryGroup) { g.CollectorKind = "TELEMETRY_COLLECTOR_KIND_UNSPECIFIED" }), "collectorKind: is required"},
		{"telemetry group bad collector", lgroup(func(g *eim.TelemetryGroup) { g.CollectorKind = "X" }), "collectorKind: \"X\" is not one of"},
		{"telemetry group no groups", lgroup(func(g *eim.TelemetryGroup) { g.Groups = nil }), "groups: is required"},
		{"telemetry group 100", lgroup(func(g *eim.TelemetryGroup) { g.Groups = many(100) }), ""},
		{"telemetry group 101", lgroup(func(g *eim.TelemetryGroup) { g.Groups = many(101) }), "groups: has 101 items"},
		{"telemetry group empty item", lgroup(func(g *eim.TelemetryGroup) { g.Groups = []string{"a", ""} }), "groups[1]: is required"},
		{"telemetry group bad item", lgroup(func(g *eim.TelemetryGroup) { g.Groups = []string{"a/b"} }), "groups[0]:"},
		{"telemetry group long item", lgroup(func(g *eim.TelemetryGroup) { g.Groups = []string{strings.Repeat("a", 1001)} }), "groups[0]: is 1001"},
		{"telemetry group dup item", lgroup(func(g *eim.TelemetryGroup) { g.Groups = []string{"cpu", "cpu"} }), "groups[1]: \"cpu\" appears more than once"},
		{"logs profile ok", lprof(func(*eim.TelemetryProfile) {}), ""},
		{"logs profile no target", lprof(func(p *eim.TelemetryProfile) { p.TargetSite = "" }), "exactly one of targetInstance, targetSite, targetRegion is required, got 0"},
		{"logs profile two targets", lprof(func(p *eim.TelemetryProfile) { p.TargetRegion = "region-0000abcd" }), "got 2"},
		{"logs profile bad target", lprof(func(p *eim.TelemetryProfile) { p.TargetSite = "region-0000abcd" }), "targetSite:"},
		{"logs profile no level", lprof(func(p *eim.TelemetryProfile) { p.LogLevel = "" }), "logLevel: is required"},
		{"logs profile bad level", lprof(func(p *eim.TelemetryProfile) { p.LogLevel = "SEVERITY_LEVEL_TRACE" }), "logLevel:"},
		{"logs profile no group", lprof(func(p *eim.TelemetryProfile) { p.LogsGroupID = "" }), "logsGroupId: is required"},
		{"logs profile bad group", lprof(func(p *eim.TelemetryProfile) { p.LogsGroupID = "telemetryprofile-0000abcd" }), "logsGroupId:"},
		{"logs profile with interval", lprof(func(p *eim.TelemetryProfile) { p.MetricsInterval = 5 }), "a logs profile has no metricsInterval"},
		{"metrics profile ok", mprof(func(*eim.TelemetryProfile) {}), ""},
		{"metrics profile 1 s", mprof(func(p *eim.TelemetryProfile) { p.MetricsInterval = 1 }), ""},
		{"metrics profile a day", mprof(func(p *eim.TelemetryProfile) { p.MetricsInterval = 86400 }), ""},
		{"metrics profile 0 s", mprof(func(p *eim.TelemetryProfile) { p.MetricsInterval = 0 }), "metricsInterval: 0 is out of range [1, 86400]"},
		{"metrics profile too long", mprof(func(p *eim.TelemetryProfile) { p.MetricsInterval = 86401 }), "metricsInterval: 86401"},
		{"metrics profile no group", mprof(func(p *eim.TelemetryProfile) { p.MetricsGroupID = "" }), "metricsGroupId: is required"},
		{"metrics profile with level", mprof(func(p *eim.TelemetryProfile) { p.LogLevel = "SEVERITY_LEVEL_INFO" }), "a metrics profile has no logLevel"},
		{"profile no type", mprof(func(p *eim.TelemetryProfile) { p.Type = "" }), "type:"},
		{"region ok", &eim.Region{Name: "eu west/1: a.b_c-d", ParentID: "region-0000abcd", Metadata: eim.Metadata{{Key: "env", Value: "prod"}}}, ""},
		{"region bad name", &eim.Region{Name: "eu;west"}, "name:"},
		{"region long name", &eim.Region{Name: strings.Repeat("a", 51)}, "name: is 51 characters long"},
		{"region bad parent", &eim.Region{ParentID: "site-0000abcd"}, "parentId:"},
		{"region self parent", &eim.Region{Meta: eim.Meta{ResourceID: "region-0000abcd"}, ParentID: "region-0000abcd"}, "parentId: a region cannot be its own parent"},
		{"region bad id", &eim.Region{Meta: eim.Meta{ResourceID: "region-XYZ"}}, "resourceId:"},
		{"metadata 100", &eim.Region{Metadata: meta(100)}, ""},
		{"metadata 101", &eim.Region{Metadata: meta(101)}, "metadata: has 101 items"},
		{"metadata dup key", &eim.Site{Metadata: eim.Metadata{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}}, "metadata[1].key: \"a\" appears more than once"},
		{"metadata bad key", &eim.Site{Metadata: eim.Metadata{{Key: "Env", Value: "1"}}}, "metadata[0].key"},
		{"metadata prefixed key", &eim.Site{Metadata: eim.Metadata{{Key: "example.com/zone", Value: "z-1"}}}, ""},
		{"metadata empty key", &eim.Site{Metadata: eim.Metadata{{Key: "", Value: "1"}}}, "metadata[0].key: is required"},
		{"metadata bad value", &eim.Host{Name: "h", UUID: goodUUID, Metadata: eim.Metadata{{Key: "a", Value: "-x"}}}, "metadata[0].value"},
		{"metadata long value", &eim.Site{Metadata: eim.Metadata{{Key: "a", Value: strings.Repeat("a", 64)}}}, "metadata[0].value: is 64"},
		{"site ok", &eim.Site{Name: "s", RegionID: "region-0000abcd", SiteLat: 900000000, SiteLng: -1800000000}, ""},
		{"site lat", &eim.Site{SiteLat: 900000001}, "siteLat:"},
		{"site lng", &eim.Site{SiteLng: -1800000001}, "siteLng:"},
		{"site region kind", &eim.Site{RegionID: "host-0000abcd"}, "regionId:"},
		{"host ok", host(func(*eim.Host) {}), ""},
		{"host serial only", host(func(h *eim.Host) { h.UUID, h.SerialNumber = "", "ABC123" }), ""},
		{"host no name", host(func(h *eim.Host) { h.Name = "" }), ""}, // as the original accepts it
		{"host no id", host(func(h *eim.Host) { h.UUID = "" }), "uuid: a uuid or a serialNumber is required"},
		{"host bad uuid", host(func(h *eim.Host) { h.UUID = "not-a-uuid" }), "uuid:"},
		{"host bad serial", host(func(h *eim.Host) { h.SerialNumber = "To Be Filled" }), "serialNumber:"},
		{"host bad site", host(func(h *eim.Host) { h.SiteID = "site-1" }), "siteId:"},
		{"host bad enum", host(func(h *eim.Host) { h.DesiredPowerState = "POWER_STATE_MAYBE" }), "desiredPowerState: \"POWER_STATE_MAYBE\" is not one of"},
		{"host bad amt", host(func(h *eim.Host) { h.AmtControlMode = "ACM" }), "amtControlMode:"},
		{"host note", host(func(h *eim.Host) { h.Note = "bad`note" }), "note:"},
		{"host status long", host(func(h *eim.Host) { h.HostStatus = strings.Repeat("x", 1025) }), "hostStatus: is 1025"},
		{"instance ok", inst(func(in *eim.Instance) {
			in.LocalAccountID, in.CustomConfigIDs, in.OSUpdatePolicyID = "localaccount-0000abcd", []string{"customconfig-0000abcd"}, "osupdatepolicy-0000abcd"
		}), ""},
		{"instance no host", inst(func(in *eim.Instance) { in.HostID = "" }), "hostID: is required"},
		{"instance no os", inst(func(in *eim.Instance) { in.OSID = "" }), "osID: is required"},
		{"instance bad os", inst(func(in *eim.Instance) { in.OSID = "os-1" }), "osID:"},
		{"instance bad account", inst(func(in *eim.Instance) { in.LocalAccountID = "account-0000abcd" }), "localAccountID:"},
		{"instance dup config", inst(func(in *eim.Instance) {
			in.CustomConfigIDs = []string{"customconfig-0000abcd", "customconfig-0000abcd"}
		}), "customConfigID[1]"},
		{"instance bad kind", inst(func(in *eim.Instance) { in.Kind = "INSTANCE_KIND_VM" }), "kind:"},
		{"instance bad security", inst(func(in *eim.Instance) { in.SecurityFeature = "x" }), "securityFeature:"},
		{"os ok", &eim.OS{Name: "Ubuntu 24.04 (LTS)", Sha256: goodSha, OsType: "OS_TYPE_MUTABLE", TLSCaCert: "QUJD", Metadata: `{"a":"b"}`}, ""},
		{"os no sha", &eim.OS{Name: "u"}, "sha256: is required"},
		{"os bad sha", &eim.OS{Sha256: strings.ToUpper(goodSha)}, "sha256:"},
		{"os short sha", &eim.OS{Sha256: "abc"}, "sha256:"},
		{"os bad type", &eim.OS{Sha256: goodSha, OsType: "WINDOWS"}, "osType:"},
		{"os bad cert", &eim.OS{Sha256: goodSha, TLSCaCert: "-----BEGIN"}, "tlsCaCert:"},
		{"os long arch", &eim.OS{Sha256: goodSha, Architecture: strings.Repeat("x", 21)}, "architecture:"},
		{"provider ok", &eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", Name: "p", APIEndpoint: "https://x/api", APICredentials: []string{"v1/secret"}}, ""},
		{"provider no kind", &eim.Provider{Name: "p", APIEndpoint: "x"}, "providerKind: is required"},
		{"provider no endpoint", &eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", Name: "p"}, "apiEndpoint: is required"},
		{"provider long name", &eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", Name: strings.Repeat("p", 41), APIEndpoint: "x"}, "name: is 41"},
		{"provider bad vendor", &eim.Provider{ProviderKind: "PROVIDER_KIND_BAREMETAL", ProviderVendor: "X", Name: "p", APIEndpoint: "x"}, "providerVendor:"},
		{"account ok", &eim.LocalAccount{Username: "admin-1", SSHKey: goodKey}, ""},
		{"account bad user", &eim.LocalAccount{Username: "Admin", SSHKey: goodKey}, "username:"},
		{"account rsa key", &eim.LocalAccount{Username: "a", SSHKey: "ssh-rsa AAAA"}, "sshKey:"},
		{"account no key", &eim.LocalAccount{Username: "a"}, "sshKey: is required"},
		{"config ok", &eim.CustomConfig{Name: "nginx", Config: "#cloud-config\n"}, ""},
		{"config bad name", &eim.CustomConfig{Name: "Nginx", Config: "x"}, "name:"},
		{"config no body", &eim.CustomConfig{Name: "n"}, "config: is required"},
		{"config long body", &eim.CustomConfig{Name: "n", Config: strings.Repeat("x", 16385)}, "config: is 16385"},
		{"single ok", single(func(*eim.SingleSchedule) {}), ""},
		{"single end", single(func(s *eim.SingleSchedule) { s.EndSeconds = 200 }), ""},
		{"single end before start", single(func(s *eim.SingleSchedule) { s.EndSeconds = 100 }), "endSeconds: 100 must be after startSeconds 100"},
		{"single no start", single(func(s *eim.SingleSchedule) { s.StartSeconds = 0 }), "startSeconds: is required"},
		{"single no status", single(func(s *eim.SingleSchedule) { s.ScheduleStatus = "" }), "scheduleStatus: is required"},
		{"single no target", single(func(s *eim.SingleSchedule) { s.TargetHostID = "" }), ""}, // as the original: applies to nothing
		{"single two targets", single(func(s *eim.SingleSchedule) { s.TargetSiteID = "site-0000abcd" }), "got 2"},
		{"single bad target", single(func(s *eim.SingleSchedule) { s.TargetHostID = "site-0000abcd" }), "targetHostId:"},
		{"repeated ok", repeated(func(*eim.RepeatedSchedule) {}), ""},
		{"repeated 0 s", repeated(func(s *eim.RepeatedSchedule) { s.DurationSeconds = 0 }), "durationSeconds: 0 is out of range [1, 86400]"},
		{"repeated max", repeated(func(s *eim.RepeatedSchedule) { s.DurationSeconds = 86400 }), ""},
		{"repeated too long", repeated(func(s *eim.RepeatedSchedule) { s.DurationSeconds = 86401 }), "durationSeconds: 86401"},
		{"repeated minute 60", repeated(func(s *eim.RepeatedSchedule) { s.CronMinutes = "60" }), "cronMinutes:"},
		{"repeated hours 24", repeated(func(s *eim.RepeatedSchedule) { s.CronHours = "1,24" }), "cronHours:"},
		{"repeated dom 0", repeated(func(s *eim.RepeatedSchedule) { s.CronDayMonth = "0" }), "cronDayMonth:"},
		{"repeated month 13", repeated(func(s *eim.RepeatedSchedule) { s.CronMonth = "13" }), "cronMonth:"},
		{"repeated dow 7", repeated(func(s *eim.RepeatedSchedule) { s.CronDayWeek = "7" }), "cronDayWeek:"},
		{"repeated range", repeated(func(s *eim.RepeatedSchedule) { s.CronHours = "1-3" }), "cronHours:"},
		{"repeated empty cron", repeated(func(s *eim.RepeatedSchedule) { s.CronMonth = "" }), "cronMonth: is required"},
		{"nil", nil, "resource is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := eim.Validate(c.r)
			if c.want == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var e *eim.Error
			if !errors.As(err, &e) || e.Code != eim.EINVALID {
				t.Fatalf("got %v, want an EINVALID error", err)
			}
			if !strings.Contains(e.Message, c.want) {
				t.Fatalf("got message %q, want it to contain %q", e.Message, c.want)
			}
		})
	}
}

func TestValidUUIDSerialName(t *testing.T) {
	for _, c := range []struct {
		s                string
		uuid, ser, named bool
	}{
		{goodUUID, true, false, true},
		{strings.ToUpper(goodUUID), true, false, true},
		{"ABC12", false, true, true},
		{"", false, true, true},
		{"To Be Filled", false, false, true},
		{"a;b", false, false, false},
	} {
		if got := eim.ValidUUID(c.s); got != c.uuid {
			t.Errorf("ValidUUID(%q): got %v, want %v", c.s, got, c.uuid)
		}
		if got := eim.ValidSerial(c.s); got != c.ser {
			t.Errorf("ValidSerial(%q): got %v, want %v", c.s, got, c.ser)
		}
		if got := eim.ValidName(c.s); got != c.named {
			t.Errorf("ValidName(%q): got %v, want %v", c.s, got, c.named)
		}
	}
}
