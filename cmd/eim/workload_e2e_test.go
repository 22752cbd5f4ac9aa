package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Workloads and their members through the CLI against the real server:
// a cluster of two instances is made, shown from both ends, found by a
// filter on the instances' memberships, and taken apart again.
func TestWorkloadNounsSQLite(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	testWorkloadNouns(t, url, dataDir)
}

func TestWorkloadNounsPostgres(t *testing.T) {
	pg := freshPostgres(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir, "--database", pg)
	testWorkloadNouns(t, url, dataDir)
}

func testWorkloadNouns(t *testing.T, url, dataDir string) {
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	admin.must("project", "create", "acme")
	in := func(args ...string) []string { return append([]string{"--project", "acme"}, args...) }
	id := func(args ...string) string { return strings.TrimSpace(admin.must(in(append(args, "-o", "id")...)...)) }
	const sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	os := id("os", "create", "--name", "ubuntu", "--sha256", sha, "--os-type", "OS_TYPE_MUTABLE")
	var insts []string
	for _, n := range []string{"n1", "n2", "n3"} {
		h := id("host", "create", "--name", n, "--uuid", newTestUUID(t))
		insts = append(insts, id("instance", "create", "--name", n, "--host", h, "--os", os))
	}

	w := id("workload", "create", "--name", "edge-cluster", "--kind", "WORKLOAD_KIND_CLUSTER", "--external-id", "cl-1")
	m1 := id("workload-member", "create", "--workload", w, "--instance", insts[0], "--kind", "WORKLOAD_MEMBER_KIND_CLUSTER_NODE")
	id("workload-member", "create", "--workload", w, "--instance", insts[1], "--kind", "WORKLOAD_MEMBER_KIND_CLUSTER_NODE")

	table := admin.must(in("workload", "list")...)
	if !strings.Contains(table, "EXTERNAL-ID") || !strings.Contains(table, "cl-1") || !strings.Contains(table, "CLUSTER") {
		t.Errorf("workload list:\n%s", table)
	}
	var wl struct {
		Members []struct {
			Instance struct{ ResourceID string } `json:"instance"`
		} `json:"members"`
	}
	admin.json(&wl, in("workload", "get", w)...)
	if len(wl.Members) != 2 {
		t.Fatalf("workload members: %+v", wl)
	}
	got := admin.must(in("workload-member", "get", m1)...)
	if !strings.Contains(got, "edge-cluster") || !strings.Contains(got, insts[0]) {
		t.Errorf("workload-member get:\n%s", got)
	}
	members := strings.Fields(admin.must(in("instance", "list", "--filter", "has(workload_members)", "-o", "id")...))
	if len(members) != 2 || strings.Contains(strings.Join(members, " "), insts[2]) {
		t.Errorf("instances in a workload: got %v, want %v", members, insts[:2])
	}
	admin.must(in("workload", "patch", w, "--set", "status=Ready")...)
	if s := admin.must(in("workload", "list", "--filter", `status="Ready"`, "-o", "id")...); strings.TrimSpace(s) != w {
		t.Errorf("workload after patch: %q", s)
	}

	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"workload-member", "create", "--workload", w, "--instance", insts[0], "--kind", "WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}, []string{"instanceId", "already a member"}},
		{[]string{"workload", "create", "--name", "x"}, []string{"kind: is required"}},
		{[]string{"workload", "delete", w}, []string{"workload members"}},
		{[]string{"workload-member", "patch", m1, "--set", "kind=WORKLOAD_MEMBER_KIND_CLUSTER_NODE"}, []string{"no patch"}},
	} {
		_, err := admin.run(in(c.args...)...)
		for _, word := range c.want {
			if err == nil || !strings.Contains(err.Error(), word) {
				t.Errorf("eim %s: got %v, want an error mentioning %q", strings.Join(c.args, " "), err, word)
			}
		}
	}

	for _, m := range strings.Fields(admin.must(in("workload-member", "list", "--filter", `workload.externalId="cl-1"`, "-o", "id")...)) {
		admin.must(in("workload-member", "delete", m)...)
	}
	admin.must(in("workload", "delete", w)...)
	if s := strings.TrimSpace(admin.must(in("workload", "list", "-o", "id")...)); s != "" {
		t.Errorf("workloads after delete: %q", s)
	}
}
