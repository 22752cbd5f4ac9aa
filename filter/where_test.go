package filter_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/filter"
)

type whereCase struct {
	kind   eim.Kind
	filter string
	want   []string // ids, sorted
}

func hosts(n ...string) []string  { return ids("host-0000000", n) }
func insts(n ...string) []string  { return ids("inst-0000000", n) }
func sites(n ...string) []string  { return ids("site-0000000", n) }
func region(n ...string) []string { return ids("region-0000000", n) }

func ids(prefix string, n []string) []string {
	out := []string{}
	for _, x := range n {
		out = append(out, prefix+x)
	}
	return out
}

var whereCases = []whereCase{
	// Strings: case-insensitive substring, * wildcards, LIKE metacharacters literal.
	{eim.KindHost, `name="edge"`, hosts("1", "2")},
	{eim.KindHost, `name='EDGE-NODE'`, hosts("1", "2")},
	{eim.KindHost, `name=edge`, hosts("1", "2")},
	{eim.KindHost, `name="edge*01"`, hosts("1")},
	{eim.KindHost, `name=*node*2`, hosts("2")},
	{eim.KindHost, `name="b_b"`, hosts("3")},
	{eim.KindHost, `name="e_n"`, hosts()},
	{eim.KindHost, `name!="edge"`, hosts("3", "4")},
	{eim.KindHost, `name=""`, hosts()},
	{eim.KindHost, `name!=""`, hosts("1", "2", "3", "4")},
	{eim.KindHost, `serialNumber=0012`, hosts("1")},
	{eim.KindHost, `serialNumber=12`, hosts("1", "2")},
	{eim.KindHost, `name>"f"`, hosts("3", "4")},
	// Enums: exact, case-insensitive name, unspecified matches unset.
	{eim.KindHost, `desiredState=HOST_STATE_ONBOARDED`, hosts("1", "3")},
	{eim.KindHost, `desired_state="HOST_STATE_REGISTERED"`, hosts("2")},
	{eim.KindHost, `desiredState=host_state_onboarded`, hosts("1", "3")},
	{eim.KindHost, `desiredState=HOST_STATE_UNSPECIFIED`, hosts("4")},
	{eim.KindHost, `desiredState!=HOST_STATE_ONBOARDED`, hosts("2", "4")},
	{eim.KindHost, `currentState=HOST_STATE_UNSPECIFIED`, hosts("1", "2", "3", "4")},
	// Integers.
	{eim.KindHost, `cpuCores>=8`, hosts("1", "3")},
	{eim.KindHost, `cpuCores=4`, hosts("2")},
	{eim.KindHost, `cpu_cores<8 AND cpuCores>0`, hosts("2")},
	{eim.KindHost, `cpuCores!=0`, hosts("1", "2", "3")},
	{eim.KindHost, `cpuCores>-1`, hosts("1", "2", "3", "4")},
	{eim.KindHost, `memoryBytes > 10000000000`, hosts("1")},
	{eim.KindHost, `cpuCores<=0x8 cpuCores>="5"`, hosts("1")},
	// Times: RFC 3339 or unix seconds.
	{eim.KindHost, `createdAt > "2025-06-01T00:00:00Z"`, hosts("2")},
	{eim.KindHost, `timestamps.createdAt < 1740000000 AND createdAt > 0`, hosts("1")},
	{eim.KindHost, `createdAt = "2025-07-01T12:00:00.250Z"`, hosts("2")},
	// Boolean structure. AIP-160: OR binds tighter than AND.
	{eim.KindHost, `name="edge" AND cpuCores=4 OR cpuCores=16`, hosts("2")},
	{eim.KindHost, `cpuCores=16 OR cpuCores=4 AND name="edge"`, hosts("2")},
	{eim.KindHost, `(name="edge" AND cpuCores=4) OR cpuCores=16`, hosts("2", "3")},
	{eim.KindHost, `NOT name="edge"`, hosts("3", "4")},
	{eim.KindHost, `-name="edge"`, hosts("3", "4")},
	{eim.KindHost, `NOT (cpuCores=8 OR cpuCores=4)`, hosts("3", "4")},
	{eim.KindHost, `NOT (NOT cpuCores=8)`, hosts("1")},
	{eim.KindHost, `name="edge" cpuCores=8`, hosts("1")},
	{eim.KindHost, `(name="spare" OR name="lab") AND cpuCores>0`, hosts("3")},
	// IDs: a full ID is equality, a part of one a substring.
	{eim.KindHost, `resourceId="host-00000002"`, hosts("2")},
	{eim.KindHost, `resourceId="00000002"`, hosts("2")},
	{eim.KindHost, `resourceId!="host-00000002"`, hosts("1", "3", "4")},
	{eim.KindHost, `siteId="site-00000001"`, hosts("1")},
	{eim.KindHost, `site_id="site-00000002"`, hosts("2")},
	{eim.KindHost, `siteId!="site-00000001"`, hosts("2", "3", "4")},
	{eim.KindHost, `siteId="site"`, hosts("1", "2")},
	{eim.KindHost, `siteId!="site"`, hosts("3", "4")},
	{eim.KindHost, `siteId=""`, hosts("3", "4")},
	{eim.KindInstance, `instanceID="inst-00000001"`, insts("1")},
	{eim.KindInstance, `hostId="host-00000001"`, insts("1")},
	// Nested over forward edges, 1–3 levels, under NOT and OR.
	{eim.KindHost, `site.name="berlin"`, hosts("1")},
	{eim.KindHost, `site.region.name="germany"`, hosts("1")},
	{eim.KindHost, `site.region.parentRegion.name="europe"`, hosts("1")},
	{eim.KindHost, `site.region.parent_region.resourceId="region-00000001"`, hosts("1")},
	{eim.KindHost, `site.region.resourceId="region-00000003"`, hosts("2")},
	{eim.KindHost, `site.resourceId="site-0000000"`, hosts("1", "2")},
	{eim.KindHost, `NOT site.name="berlin"`, hosts("2", "3", "4")},
	{eim.KindHost, `site.name!="berlin"`, hosts("2")},
	{eim.KindHost, `site.name="berlin" OR instance.desiredState=INSTANCE_STATE_DELETED`, hosts("1", "2")},
	{eim.KindHost, `site.name="berlin" OR site.name="austin"`, hosts("1", "2")},
	{eim.KindInstance, `host.name="node-02"`, insts("2")},
	{eim.KindInstance, `host.site.region.name="america"`, insts("2")},
	{eim.KindInstance, `os.name="toolkit"`, insts("2")},
	{eim.KindSite, `region.parentRegion.name="Europe"`, sites("1")},
	// Nested under NOT and !=: an absent edge (hosts 3 and 4 have no site,
	// site 3 no region, region 3 no parent) fails every nested comparison,
	// = and != alike, and so passes its negation.
	{eim.KindHost, `site.resourceId="site-00000001"`, hosts("1")},
	{eim.KindHost, `site.resourceId!="site-00000001"`, hosts("2")},
	{eim.KindHost, `NOT site.resourceId="site-00000001"`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT site.resourceId!="site-00000001"`, hosts("1", "3", "4")},
	{eim.KindHost, `site.siteID="site-00000002"`, hosts("2")},
	{eim.KindHost, `site.resourceId="SITE-00000001"`, hosts("1")},
	{eim.KindHost, `site.resourceId>"site-00000001"`, hosts("2")},
	{eim.KindHost, `site.region.resourceId!="region-00000002"`, hosts("2")},
	{eim.KindHost, `NOT site.region.resourceId="region-00000002"`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT site.region.resourceId!="region-00000002"`, hosts("1", "3", "4")},
	{eim.KindHost, `NOT site.region.name="germany"`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT site.region.name!="germany"`, hosts("1", "3", "4")},
	{eim.KindHost, `site.region.parentRegion.resourceId!="region-00000001"`, hosts()},
	{eim.KindHost, `NOT site.region.parentRegion.resourceId="region-00000001"`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT (site.name="berlin" OR instance.desiredState=INSTANCE_STATE_DELETED)`, hosts("3", "4")},
	{eim.KindHost, `NOT site.name="berlin" AND NOT site.name="austin"`, hosts("3", "4")},
	{eim.KindHost, `site.name="berlin" OR NOT site.region.name="america"`, hosts("1", "3", "4")},
	{eim.KindHost, `NOT has(site.region.parentRegion)`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT has(site.name)`, hosts("3", "4")},
	{eim.KindHost, `has(site.metadata)`, hosts("1")},
	{eim.KindHost, `NOT site.metadata='{"key":"env"}'`, hosts("2", "3", "4")},
	{eim.KindHost, `site.metadata!='{"key":"env"}'`, hosts("2")},
	{eim.KindSite, `region.resourceId!="region-00000002"`, sites("2")},
	{eim.KindSite, `NOT region.resourceId!="region-00000002"`, sites("1", "3")},
	{eim.KindSite, `region.parentRegion.name!="europe"`, sites()},
	{eim.KindSite, `NOT region.parentRegion.name!="europe"`, sites("1", "2", "3")},
	{eim.KindSite, `NOT region.parentRegion.name="europe"`, sites("2", "3")},
	{eim.KindInstance, `host.site.resourceId="site-00000002"`, insts("2")},
	{eim.KindInstance, `NOT host.site.resourceId="site-00000002"`, insts("1")},
	{eim.KindInstance, `NOT host.site.region.name="america"`, insts("1")},
	{eim.KindInstance, `host.resourceId!="host-00000001"`, insts("2")},
	// Back edges under NOT and !=.
	{eim.KindHost, `instance.resourceId="inst-00000001"`, hosts("1")},
	{eim.KindHost, `NOT instance.resourceId!="inst-00000001"`, hosts("1", "3", "4")},
	{eim.KindHost, `instance.desiredState!=INSTANCE_STATE_RUNNING`, hosts("2")},
	{eim.KindHost, `NOT instance.desiredState=INSTANCE_STATE_RUNNING`, hosts("2", "3", "4")},
	{eim.KindHost, `NOT instance.os.name="ubuntu"`, hosts("2", "3", "4")},
	{eim.KindHost, `instance.os.name!="ubuntu"`, hosts("2")},
	{eim.KindSite, `NOT has(hosts)`, sites("3")},
	{eim.KindSite, `hosts.resourceId="host-00000002"`, sites("2")},
	{eim.KindRegion, `NOT sites.hosts.name="01"`, region("1", "3")},
	{eim.KindRegion, `sites.name!="berlin"`, region("3")},
	{eim.KindRegion, `NOT sites.name!="berlin"`, region("1", "2")},
	{eim.KindRegion, `sites.resourceId="site-00000002"`, region("3")},
	{eim.KindRegion, `NOT has(sites.hosts)`, region("1")},
	// has().
	{eim.KindHost, `has(site)`, hosts("1", "2")},
	{eim.KindHost, `NOT has(site)`, hosts("3", "4")},
	{eim.KindHost, `has(site.region)`, hosts("1", "2")},
	{eim.KindHost, `has(site.region.parentRegion)`, hosts("1")},
	{eim.KindHost, `has(siteId)`, hosts("1", "2")},
	{eim.KindHost, `has(desiredState)`, hosts("1", "2", "3")},
	{eim.KindHost, `has(cpuCores)`, hosts("1", "2", "3")},
	{eim.KindHost, `has(metadata)`, hosts("1", "2")},
	{eim.KindInstance, `has(localaccount)`, insts()},
	{eim.KindInstance, `has(customConfigID)`, insts("1")},
	{eim.KindRegion, `has(parentRegion)`, region("2")},
	// Back edges.
	{eim.KindHost, `has(instance)`, hosts("1", "2")},
	{eim.KindHost, `NOT has(instance)`, hosts("3", "4")},
	{eim.KindHost, `instance.desiredState=INSTANCE_STATE_RUNNING`, hosts("1")},
	{eim.KindHost, `instance.os.name="ubuntu"`, hosts("1")},
	{eim.KindSite, `has(hosts)`, sites("1", "2")},
	{eim.KindRegion, `has(sites)`, region("2", "3")},
	{eim.KindRegion, `sites.hosts.name="01"`, region("2")},
	// Metadata and lists.
	{eim.KindHost, `metadata='{"key":"role","value":"gw"}'`, hosts("1")},
	{eim.KindHost, `metadata='{"key":"role"}'`, hosts("1", "2")},
	{eim.KindHost, `metadata!='{"key":"role"}'`, hosts("3", "4")},
	{eim.KindHost, `metadata='{"key":"env","value":"prod"}' AND metadata='{"key":"role","value":"gw"}'`, hosts("1")},
	{eim.KindHost, `metadata='{"key":"role","value":"GW"}'`, hosts()},
	{eim.KindHost, `site.metadata='{"key":"env"}'`, hosts("1")},
	{eim.KindRegion, `metadata='{"key":"geo","value":"eu"}'`, region("1")},
	// Several labels in one value, as the original's clients send them:
	// every one must be held, in any order.
	{eim.KindHost, `metadata='{"key":"env","value":"prod"},{"key":"role","value":"gw"}'`, hosts("1")},
	{eim.KindHost, `metadata='{"key":"role","value":"gw"}, {"key":"env"}'`, hosts("1")},
	{eim.KindHost, `metadata='{"key":"role"},{"key":"env","value":"dev"}'`, hosts()},
	{eim.KindHost, `metadata!='{"key":"role"},{"key":"env"}'`, hosts("2", "3", "4")},
	{eim.KindHost, `site.metadata='{"key":"env","value":"prod"},{"key":"env"}'`, hosts("1")},
	{eim.KindInstance, `customConfigID="customconfig-00000001"`, insts("1")},
	{eim.KindInstance, `customConfigID!="customconfig-00000001"`, insts("2")},
	// Empty.
	{eim.KindHost, ``, hosts("1", "2", "3", "4")},
	{eim.KindHost, `   `, hosts("1", "2", "3", "4")},
}

func TestWhere(t *testing.T) {
	for _, db := range engines(t) {
		db.insert(t, fixtures()...)
		t.Run(db.name(), func(t *testing.T) {
			for _, tc := range whereCases {
				t.Run(string(tc.kind)+":"+tc.filter, func(t *testing.T) {
					sql, args, err := filter.Where(db.d, tc.kind, tc.filter, argBase)
					if err != nil {
						t.Fatalf("Where(%q): %v", tc.filter, err)
					}
					if strings.TrimSpace(tc.filter) == "" && (sql != "" || len(args) != 0) {
						t.Fatalf("empty filter: got %q %v, want \"\" and no args", sql, args)
					}
					got, err := db.ids(t, tc.kind, sql, args, "")
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got, tc.want) {
						t.Errorf("Where(%q) selects %v, want %v\nSQL: %s %v", tc.filter, got, tc.want, sql, args)
					}
				})
			}
		})
	}
}

// Project p2 has a site and a host named as p1's. Nested filters follow
// references, which sqlstore's composite foreign keys keep within one
// project, so each project finds only its own host.
func TestWhereStaysInProject(t *testing.T) {
	for _, db := range engines(t) {
		db.insert(t, fixtures()...)
		for _, f := range []string{`site.name="berlin"`, `site.resourceId!="site-00000002"`, `NOT site.name="austin" AND has(site)`} {
			sql, args, err := filter.Where(db.d, eim.KindHost, f, 0)
			if err != nil {
				t.Fatal(err)
			}
			for project, want := range map[string]string{"p1": "host-00000001", "p2": "host-0000000e"} {
				var got []string
				rows, err := db.db.Query("SELECT id FROM hosts WHERE project = '"+project+"' AND "+sql, args...)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var id string
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					got = append(got, id)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
				if !slices.Equal(got, []string{want}) {
					t.Errorf("%s: %s in %s: got %v, want [%s]", db.name(), f, project, got, want)
				}
			}
		}
	}
}

func TestWherePlaceholders(t *testing.T) {
	const f = `name="a" AND site.region.name="b" OR metadata='{"key":"k","value":"v"}'`
	sql, args, err := filter.Where(filter.Postgres, eim.KindHost, f, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 3 {
		t.Fatalf("got %d args %v, want 3", len(args), args)
	}
	for _, p := range []string{"$4", "$5", "$6::jsonb"} {
		if !strings.Contains(sql, p) {
			t.Errorf("got %s, want placeholder %s", sql, p)
		}
	}
	if strings.Contains(sql, "$3") || strings.Contains(sql, "$7") || strings.Contains(sql, "?") {
		t.Errorf("got %s, want only $4…$6", sql)
	}
	sql, args, err = filter.Where(filter.SQLite, eim.KindHost, f, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(sql, "?"); got != len(args) {
		t.Errorf("got %d placeholders for %d args in %s", got, len(args), sql)
	}
	// Aliases are unique per expression.
	if strings.Count(sql, " t1 ") != 1 || strings.Count(sql, " t2 ") != 1 || strings.Count(sql, " t3 ") != 1 {
		t.Errorf("got %s, want aliases t1, t2, t3 declared once each", sql)
	}
}

func TestWhereErrors(t *testing.T) {
	long := `name="` + strings.Repeat("a", 995) + `"`
	for _, tc := range []struct {
		kind   eim.Kind
		filter string
		want   string // a part of the message
	}{
		{eim.KindHost, `name:"x"`, `":" (has) operator at position 1 is not supported`},
		{eim.KindHost, `foo="x"`, `unknown field "foo" for hosts (known: resourceId, createdAt, updatedAt, name, desiredState`},
		{eim.KindHost, `site.foo="x"`, `unknown field "foo" for sites in site.foo (known:`},
		{eim.KindHost, `desiredState=BOGUS`, `desiredState: "BOGUS" is not one of HOST_STATE_UNSPECIFIED, HOST_STATE_DELETED`},
		{eim.KindHost, `desiredState>HOST_STATE_ONBOARDED`, `desiredState is an enumeration: only = and != apply`},
		{eim.KindHost, `cpuCores="abc"`, `cpuCores: "abc" is not an integer`},
		{eim.KindHost, `cpuCores=1.5`, `cpuCores: "1.5" is not an integer`},
		{eim.KindHost, `cpuCores=99999999999999999999`, `syntax error`},
		{eim.KindHost, `name="x" AND`, `syntax error at position`},
		{eim.KindHost, `name="x`, `unterminated string`},
		{eim.KindHost, `name=edge-01`, `quote values that contain "-"`},
		{eim.KindHost, `name="x";`, `character ';' at position 9 is not allowed`},
		{eim.KindHost, "name=\"x\"\n", `character '\n' at position 9 is not allowed`},
		{eim.KindHost, `name="100%"`, `character '%' at position 10 is not allowed`},
		{eim.KindHost, long, `1002 characters, at most 1000 allowed`},
		{eim.KindHost, `site="x"`, `site is a reference; compare site.resourceId or use has(site)`},
		{eim.KindHost, `inheritedMetadata="x"`, `inheritedMetadata is not stored`},
		{eim.KindHost, `name.first="x"`, `"name" of hosts is not a reference`},
		{eim.KindHost, `metadata="foo"`, `metadata: want '{"key":"k","value":"v"}'`},
		{eim.KindHost, `metadata='{"value":"v"}'`, `metadata: want`},
		{eim.KindHost, `metadata='{"key":"a"},{"value":"v"}'`, `metadata: want`},
		{eim.KindHost, `metadata='{"key":"a"},'`, `several of them separated by commas`},
		{eim.KindHost, `metadata='{"key":"a"} {"key":"b"}'`, `metadata: want`},
		{eim.KindHost, `metadata='{"key":"a","other":"b"}'`, `metadata: want`},
		{eim.KindHost, `metadata>'{"key":"k"}'`, `metadata: only = and != apply`},
		{eim.KindHost, `createdAt > "yesterday"`, `createdAt: "yesterday" is not an RFC 3339 time or unix seconds`},
		{eim.KindHost, `name`, `"name" at position 1 is not a restriction`},
		{eim.KindHost, `  name="a" bogus`, `"bogus" at position 12 is not a restriction`},
		{eim.KindHost, `  name="a" AND`, `syntax error at position 11`},
		{eim.KindHost, `name="a" and name="b"`, `AND, OR and NOT must be upper case`},
		{eim.KindHost, `foo(name)`, `unsupported function "foo"`},
		{eim.KindHost, `has(name, site)`, `has() at position 1 takes one field, got 2`},
		{eim.KindHost, `has("x")`, `has() at position 5 takes a field name`},
		{eim.KindHost, `"name"="x"`, `left side of = at position 1 must be a field name`},
		{eim.KindHost, `name=has(site)`, `value at position 6 must be a string, number or name`},
		{eim.KindRegion, `parentRegion.parentRegion.parentRegion.parentRegion.parentRegion.parentRegion.name="x"`, `crosses more than 5 references`},
		{eim.KindInstance, `customConfigID>"x"`, `customConfigID is a list`},
	} {
		t.Run(tc.filter, func(t *testing.T) {
			_, _, err := filter.Where(filter.SQLite, tc.kind, tc.filter, 0)
			if err == nil {
				t.Fatalf("Where(%q): got no error, want %q", tc.filter, tc.want)
			}
			var e *eim.Error
			if !errors.As(err, &e) || e.Code != eim.EINVALID {
				t.Fatalf("Where(%q): got %v, want an EINVALID *eim.Error", tc.filter, err)
			}
			if !strings.Contains(e.Message, tc.want) {
				t.Errorf("Where(%q): got %q, want it to contain %q", tc.filter, e.Message, tc.want)
			}
			if !strings.HasPrefix(e.Message, "filter: ") {
				t.Errorf("Where(%q): got %q, want it to start with \"filter: \"", tc.filter, e.Message)
			}
		})
	}
}

func TestWhereMaxDepth(t *testing.T) {
	f := `parentRegion.parentRegion.parentRegion.parentRegion.parentRegion.name="x"`
	if _, _, err := filter.Where(filter.SQLite, eim.KindRegion, f, 0); err != nil {
		t.Errorf("Where(%q): got %v, want five levels accepted", f, err)
	}
}

// TestAuditResourceID: a full ID compared to the audit log's resourceId is
// plain equality (its index), whatever the ID's kind; anything else a
// substring match.
func TestAuditResourceID(t *testing.T) {
	for _, tc := range []struct{ filter, want string }{
		{`resourceId="host-1a2b3c4d"`, "audit_log.resource_id = ?"},
		{`resourceId="webhook-1a2b3c4d"`, "audit_log.resource_id = ?"},
		{`resourceId="1a2b"`, "audit_log.resource_id LIKE ? ESCAPE '\\'"},
	} {
		got, _, err := filter.WhereSchema(filter.SQLite, eim.AuditSchema(), tc.filter, 0)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.filter, got, err, tc.want)
		}
	}
}
