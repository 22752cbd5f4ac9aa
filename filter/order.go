package filter

import (
	"strings"

	"github.com/eimhq/eim"
)

// OrderBy compiles an AIP-132 order ("name desc, resourceId") into a SQL
// ORDER BY list (without the keywords), always ending with the table's id as
// tie-breaker so that pages are stable. "" → "<table>.id".
//
// Keys are top-level stored scalar fields, camelCase or snake_case, each
// optionally followed by asc or desc, and the columns of the original's
// inventory tables its clients send (see originalColumns). References
// sort absent (NULL) first in ascending order on both engines. The SQL is
// the same for both dialects; text sorts by the database's collation (byte
// order in SQLite).
func OrderBy(k eim.Kind, orderBy string) (string, error) {
	s := eim.SchemaOf(k)
	if s == nil {
		return "", eim.Errorf(eim.EINVALID, "orderBy: unknown kind %q", k)
	}
	if err := checkChars("orderBy", orderBy, isOrderChar); err != nil {
		return "", err
	}
	idKey := s.Table + ".id"
	if strings.TrimSpace(orderBy) == "" {
		return idKey, nil
	}
	var keys []string
	lastIsID := false
	for i, part := range strings.Split(orderBy, ",") {
		words := strings.Fields(part)
		if len(words) == 0 {
			return "", eim.Errorf(eim.EINVALID, "orderBy: empty key at position %d", i+1)
		}
		if len(words) > 2 {
			return "", eim.Errorf(eim.EINVALID, "orderBy: %q: want \"field\", \"field asc\" or \"field desc\"", strings.TrimSpace(part))
		}
		desc := false
		if len(words) == 2 {
			switch strings.ToLower(words[1]) {
			case "asc":
			case "desc":
				desc = true
			default:
				return "", eim.Errorf(eim.EINVALID, "orderBy: %q: direction must be asc or desc, not %q", strings.TrimSpace(part), words[1])
			}
		}
		sk, err := orderKeys(s, words[0])
		if err != nil {
			return "", err
		}
		for _, k := range sk {
			key := k.expr
			switch {
			case desc && k.nullable:
				key += " DESC NULLS LAST"
			case desc:
				key += " DESC"
			case k.nullable:
				key += " ASC NULLS FIRST"
			}
			keys = append(keys, key)
			lastIsID = k.expr == idKey
		}
	}
	if !lastIsID {
		keys = append(keys, idKey)
	}
	return strings.Join(keys, ", "), nil
}

// sortKey is one SQL expression of an ORDER BY list.
type sortKey struct {
	expr     string
	nullable bool // a reference: NULL when absent
}

// orderKeys resolves one key of an orderBy to the expressions it sorts by:
// one for a field, none for a column of the original's that is the same
// in every row here, two for one that EIM splits in two.
func orderKeys(s *eim.Schema, name string) ([]sortKey, error) {
	f, err := orderField(s, name)
	if err == nil {
		col := s.Table + "." + f.Column
		if textSortable(s, f) {
			col = "COALESCE(CAST(" + col + " AS TEXT), '')"
		}
		return []sortKey{{expr: col, nullable: f.Edge != nil}}, nil
	}
	target, ok := originalColumn(s.Kind, name)
	if !ok {
		return nil, err
	}
	var keys []sortKey
	for _, t := range target {
		if e, ok := s.Edge(t); ok && e.Back {
			// One-to-one back reference (a host's instance): the
			// referring row's ID.
			ts := eim.SchemaOf(e.Kind)
			keys = append(keys, sortKey{expr: "(SELECT o.id FROM " + ts.Table + " o WHERE o." + e.Column + " = " + s.Table + ".id)", nullable: true})
			continue
		}
		f, ok := s.Field(t)
		if !ok {
			f, ok = s.StoredField(t)
		}
		if !ok || !f.Stored() {
			return nil, eim.Errorf(eim.EINTERNAL, "orderBy: %q of %s maps to unknown field %q", name, s.Table, t)
		}
		keys = append(keys, sortKey{expr: s.Table + "." + f.Column, nullable: f.Edge != nil})
	}
	return keys, nil
}

// orderField resolves a sort key: a top-level stored scalar field, or a
// list the original stored as one text column (sorted by its JSON text).
func orderField(s *eim.Schema, name string) (*eim.Field, error) {
	if strings.Contains(name, ".") {
		n, ok := strings.CutPrefix(name, "timestamps.")
		if f := findField(s, n); ok && f != nil && f.Stored() && f.Type == timeType {
			return f, nil
		}
		if f := refIDField(s, name); f != nil {
			return f, nil
		}
		return nil, eim.Errorf(eim.EINVALID, "orderBy: %q: nested fields cannot be sorted on, except the ID of a reference (site.resourceId)", name)
	}
	f := findField(s, name)
	if f != nil && f.Alias {
		f, _ = s.Field("resourceId")
	}
	if f == nil || !f.Stored() {
		if f != nil || findEdge(s, name) != nil {
			return nil, eim.Errorf(eim.EINVALID, "orderBy: %q of %s is not stored and cannot be sorted on", name, s.Table)
		}
		return nil, unknownField("orderBy", s, name, name)
	}
	switch classify(f) {
	case kindMetadata, kindStrings, kindOther:
		if !textSortable(s, f) {
			return nil, eim.Errorf(eim.EINVALID, "orderBy: %q of %s is a list and cannot be sorted on", name, s.Table)
		}
	}
	return f, nil
}

// textSortable reports whether f is a list the original stored as one text
// column, which its orderBy sorted by that text; EIM sorts by the list's
// JSON text.
func textSortable(s *eim.Schema, f *eim.Field) bool {
	switch classify(f) {
	case kindMetadata, kindStrings:
	default:
		return false
	}
	switch s.Kind {
	case eim.KindRegion, eim.KindSite, eim.KindHost:
		return f.Name == "metadata"
	case eim.KindProvider:
		return f.Name == "apiCredentials"
	case eim.KindOSUpdatePolicy:
		return f.Name == "updateSources"
	case eim.KindTelemetryGroup:
		return f.Name == "groups"
	}
	return false
}

// originalColumns are the columns of the original's inventory tables (its
// ent schema: the original's orderBy snake-cases each key and takes any
// column of the kind's table) that EIM's fields do not already spell, with
// the fields they sort by here: a foreign key "<kind>_resource_<edge>"
// sorts by the reference (its ID; the original's by the referenced row's
// number, its creation order), "id" (the original's row number) by the
// creation time, and a column EIM does not keep (organisational units,
// deprecated or virtual-machine columns, the tenant, which every row of a
// list shares) by nothing: the same in every row, it changes no order.
// Keys are folded (lower case, no underscores), so the camelCase forms
// (siteResourceRegion), which the original snake-cased, match too.
var originalColumns = map[eim.Kind]map[string][]string{
	eim.KindRegion: {
		"region_resource_parent_region": {"parentId"},
		"region_kind":                   nil,
	},
	eim.KindSite: {
		"site_resource_region":   {"regionId"},
		"site_resource_ou":       nil,
		"site_resource_provider": nil,
		"dns_servers":            nil,
		"docker_registries":      nil,
		"metrics_endpoint":       nil,
		"http_proxy":             nil,
		"https_proxy":            nil,
		"ftp_proxy":              nil,
		"no_proxy":               nil,
	},
	eim.KindHost: {
		"host_resource_site":     {"siteId"},
		"host_resource_provider": {"providerId"},
		"instance_resource_host": {"instance"},
		"kind":                   nil,
		"hardware_kind":          nil,
		"mgmt_ip":                nil,
		"bmc_username":           nil,
		"bmc_password":           nil,
		"pxe_mac":                nil,
	},
	eim.KindInstance: {
		"instance_resource_os":               {"osID"},
		"instance_resource_localaccount":     {"localAccountID"},
		"instance_resource_os_update_policy": {"osUpdatePolicyID"},
		"instance_resource_provider":         nil,
		"vm_memory_bytes":                    nil,
		"vm_cpu_cores":                       nil,
		"vm_storage_bytes":                   nil,
	},
	eim.KindSingleSchedule: {
		"single_schedule_resource_target_site":     {"targetSiteId"},
		"single_schedule_resource_target_host":     {"targetHostId"},
		"single_schedule_resource_target_region":   {"targetRegionId"},
		"single_schedule_resource_target_workload": nil,
	},
	eim.KindRepeatedSchedule: {
		"repeated_schedule_resource_target_site":     {"targetSiteId"},
		"repeated_schedule_resource_target_host":     {"targetHostId"},
		"repeated_schedule_resource_target_region":   {"targetRegionId"},
		"repeated_schedule_resource_target_workload": nil,
	},
	eim.KindTelemetryGroup: {
		"kind": nil, // logs or metrics: one per list
	},
	eim.KindTelemetryProfile: {
		"kind":                       nil,
		"telemetry_profile_region":   {"targetRegion"},
		"telemetry_profile_site":     {"targetSite"},
		"telemetry_profile_instance": {"targetInstance"},
		// One group column there, one per kind of profile here (the
		// other is NULL in every row of a list).
		"telemetry_profile_group": {"logsGroupId", "metricsGroupId"},
	},
	eim.KindOSUpdatePolicy: {
		"os_update_policy_resource_target_os": {"targetOsId"},
	},
	eim.KindOSUpdateRun: {
		"os_update_run_resource_applied_policy": {"applied_policy_id"},
		"os_update_run_resource_instance":       {"instance_id"},
	},
	eim.KindWorkload: {
		"desired_state": nil,
		"current_state": nil,
		"metadata":      nil,
	},
	eim.KindWorkloadMember: {
		"workload_member_workload": {"workloadId"},
		"workload_member_instance": {"instanceId"},
	},
}

// originalColumn looks name up among the original's columns of kind k and
// those every table had (id, tenant_id).
func originalColumn(k eim.Kind, name string) ([]string, bool) {
	n := fold(name)
	switch n {
	case "id":
		return []string{"createdAt"}, true
	case "tenantid":
		return nil, true
	}
	for col, fields := range originalColumns[k] {
		if fold(col) == n {
			return fields, true
		}
	}
	return nil, false
}

// refIDField resolves "<reference>.<its ID>" ("site.resourceId",
// "site.siteID", "site.resource_id"), which clients built for the original
// send to sort by a reference, to the stored reference field (siteId): the
// only nested key that needs no join.
func refIDField(s *eim.Schema, name string) *eim.Field {
	ref, sub, _ := strings.Cut(name, ".")
	e := findEdge(s, ref)
	if e == nil || e.Back {
		return nil
	}
	ts := eim.SchemaOf(e.Kind)
	if ts == nil {
		return nil
	}
	if tf := findField(ts, sub); tf == nil || (tf.Name != "resourceId" && !tf.Alias) {
		return nil
	}
	for _, f := range s.Fields {
		if f.Edge != nil && f.Edge.Name == e.Name && f.Stored() {
			return f
		}
	}
	return nil
}
