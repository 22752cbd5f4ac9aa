package filter_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

func TestOrderBySQL(t *testing.T) {
	for _, tc := range []struct {
		kind    eim.Kind
		orderBy string
		want    string
	}{
		{eim.KindHost, "", "hosts.id"},
		{eim.KindHost, "  ", "hosts.id"},
		{eim.KindHost, "name", "hosts.name, hosts.id"},
		{eim.KindHost, "name desc", "hosts.name DESC, hosts.id"},
		{eim.KindHost, "name DESC, resourceId", "hosts.name DESC, hosts.id"},
		{eim.KindHost, "resourceId desc", "hosts.id DESC"},
		{eim.KindHost, "resourceId, name", "hosts.id, hosts.name, hosts.id"},
		{eim.KindHost, "cpu_cores asc,name", "hosts.cpu_cores, hosts.name, hosts.id"},
		{eim.KindHost, "siteId desc", "hosts.site_id DESC NULLS LAST, hosts.id"},
		{eim.KindHost, "site_id", "hosts.site_id ASC NULLS FIRST, hosts.id"},
		{eim.KindHost, "timestamps.createdAt desc", "hosts.created_at DESC, hosts.id"},
		{eim.KindHost, "updatedAt", "hosts.updated_at, hosts.id"},
		{eim.KindSite, "siteID desc", "sites.id DESC"},
		{eim.KindOS, "name", "operating_systems.name, operating_systems.id"},
		// The original's clients' spellings: snake_case, and a reference's ID.
		{eim.KindHost, "resource_id desc", "hosts.id DESC"},
		{eim.KindHost, "timestamps.created_at", "hosts.created_at, hosts.id"},
		{eim.KindHost, "site.siteID asc", "hosts.site_id ASC NULLS FIRST, hosts.id"},
		{eim.KindHost, "site.resource_id desc", "hosts.site_id DESC NULLS LAST, hosts.id"},
		{eim.KindInstance, "host.resourceId, os.os_resource_id", "instances.host_id ASC NULLS FIRST, instances.os_id ASC NULLS FIRST, instances.id"},
		{eim.KindRegion, "parent_region.region_id", "regions.parent_id ASC NULLS FIRST, regions.id"},
		// The columns of the original's tables (its ent schema), in lists:
		// foreign keys, its row number, the tenant, columns EIM does not
		// keep (the same in every row: no key), lists it stored as text.
		{eim.KindSite, "site_resource_region desc, resource_id", "sites.region_id DESC NULLS LAST, sites.id"},
		{eim.KindSite, "siteResourceRegion, site_resource_ou, site_resource_provider desc, name", "sites.region_id ASC NULLS FIRST, sites.name, sites.id"},
		{eim.KindSite, "id desc", "sites.created_at DESC, sites.id"},
		{eim.KindSite, "tenant_id, dns_servers, name", "sites.name, sites.id"},
		{eim.KindRegion, "region_resource_parent_region, region_kind", "regions.parent_id ASC NULLS FIRST, regions.id"},
		{eim.KindHost, "host_resource_site desc, host_resource_provider", "hosts.site_id DESC NULLS LAST, hosts.provider_id ASC NULLS FIRST, hosts.id"},
		{eim.KindHost, "instance_resource_host", "(SELECT o.id FROM instances o WHERE o.host_id = hosts.id) ASC NULLS FIRST, hosts.id"},
		{eim.KindHost, "metadata desc, pxe_mac", "COALESCE(CAST(hosts.metadata AS TEXT), '') DESC, hosts.id"},
		{eim.KindInstance, "instance_resource_os, instance_resource_localaccount desc, instance_resource_os_update_policy, vm_cpu_cores",
			"instances.os_id ASC NULLS FIRST, instances.local_account_id DESC NULLS LAST, instances.os_update_policy_id ASC NULLS FIRST, instances.id"},
		{eim.KindSingleSchedule, "single_schedule_resource_target_host, single_schedule_resource_target_workload",
			"single_schedules.target_host_id ASC NULLS FIRST, single_schedules.id"},
		{eim.KindRepeatedSchedule, "repeated_schedule_resource_target_region desc",
			"repeated_schedules.target_region_id DESC NULLS LAST, repeated_schedules.id"},
		{eim.KindTelemetryProfile, "telemetry_profile_group, kind",
			"telemetry_profiles.logs_group_id ASC NULLS FIRST, telemetry_profiles.metrics_group_id ASC NULLS FIRST, telemetry_profiles.id"},
		{eim.KindTelemetryGroup, "groups", "COALESCE(CAST(telemetry_groups.group_items AS TEXT), ''), telemetry_groups.id"},
		{eim.KindOSUpdatePolicy, "os_update_policy_resource_target_os", "os_update_policies.target_os_id ASC NULLS FIRST, os_update_policies.id"},
		{eim.KindOSUpdateRun, "os_update_run_resource_instance, os_update_run_resource_applied_policy desc",
			"os_update_runs.instance_id ASC NULLS FIRST, os_update_runs.applied_policy_id DESC NULLS LAST, os_update_runs.id"},
		{eim.KindWorkloadMember, "workload_member_workload, workload_member_instance",
			"workload_members.workload_id ASC NULLS FIRST, workload_members.instance_id ASC NULLS FIRST, workload_members.id"},
	} {
		got, err := filter.OrderBy(tc.kind, tc.orderBy)
		if err != nil {
			t.Errorf("OrderBy(%s, %q): %v", tc.kind, tc.orderBy, err)
			continue
		}
		if got != tc.want {
			t.Errorf("OrderBy(%s, %q): got %q, want %q", tc.kind, tc.orderBy, got, tc.want)
		}
	}
}

func TestOrderByRows(t *testing.T) {
	for _, db := range engines(t) {
		db.insert(t, fixtures()...)
		for _, tc := range []struct {
			orderBy string
			want    []string
		}{
			{"", hosts("1", "2", "3", "4")},
			{"resourceId desc", hosts("4", "3", "2", "1")},
			{"cpuCores desc", hosts("3", "1", "2", "4")},
			{"cpuCores", hosts("4", "2", "1", "3")},
			{"desiredState desc, cpuCores", hosts("2", "1", "3", "4")},
			{"desired_state, name desc", hosts("4", "3", "1", "2")},
			{"siteId", hosts("3", "4", "1", "2")},
			{"siteId desc", hosts("2", "1", "3", "4")},
			{"createdAt desc, resourceId desc", hosts("2", "1", "4", "3")},
			// The original's columns.
			{"host_resource_site", hosts("3", "4", "1", "2")},
			{"host_resource_site desc, tenant_id, pxe_mac", hosts("2", "1", "3", "4")},
			{"id desc", hosts("2", "1", "3", "4")},
			{"instance_resource_host", hosts("3", "4", "1", "2")},
			{"instance_resource_host desc", hosts("2", "1", "3", "4")},
			{"metadata", hosts("4", "3", "1", "2")},
		} {
			order, err := filter.OrderBy(eim.KindHost, tc.orderBy)
			if err != nil {
				t.Fatalf("OrderBy(%q): %v", tc.orderBy, err)
			}
			got, err := db.ids(t, eim.KindHost, "", nil, order)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: orderBy %q (%s): got %v, want %v", db.name(), tc.orderBy, order, got, tc.want)
			}
		}
	}
}

func TestOrderByErrors(t *testing.T) {
	for _, tc := range []struct {
		orderBy string
		want    string
	}{
		{"site.name", `orderBy: "site.name": nested fields cannot be sorted on`},
		{"foo", `orderBy: unknown field "foo" for hosts (known: resourceId`},
		{"name up", `orderBy: "name up": direction must be asc or desc, not "up"`},
		{"name desc desc", `orderBy: "name desc desc": want "field", "field asc" or "field desc"`},
		{"hostNics", `orderBy: "hostNics" of hosts is a list and cannot be sorted on`},
		{"site_resource_region", `orderBy: unknown field "site_resource_region" for hosts`},
		{"site", `orderBy: "site" of hosts is not stored`},
		{",name", `orderBy: empty key at position 1`},
		{"name,", `orderBy: empty key at position 2`},
		{"name;", `orderBy: character ';' at position 5 is not allowed`},
		{"name=x", `orderBy: character '=' at position 5 is not allowed`},
		{strings.Repeat("name,", 201), `orderBy: 1005 characters, at most 1000 allowed`},
	} {
		_, err := filter.OrderBy(eim.KindHost, tc.orderBy)
		var e *eim.Error
		switch {
		case err == nil:
			t.Errorf("OrderBy(%q): got no error, want %q", tc.orderBy, tc.want)
		case !errors.As(err, &e) || e.Code != eim.EINVALID:
			t.Errorf("OrderBy(%q): got %v, want an EINVALID *eim.Error", tc.orderBy, err)
		case !strings.Contains(e.Message, tc.want):
			t.Errorf("OrderBy(%q): got %q, want it to contain %q", tc.orderBy, e.Message, tc.want)
		}
	}
}
