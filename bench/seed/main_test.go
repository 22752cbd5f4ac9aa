package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/agent/sim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/southbound"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
)

func TestSeedSQLite(t *testing.T) {
	testSeed(t, filepath.Join(t.TempDir(), "eim.db"))
}

func TestSeedPostgres(t *testing.T) {
	testSeed(t, storetest.PostgresURL(t))
}

// openStore opens dsn with the default project, as a server's first start
// leaves it.
func openStore(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := inventory.New(st, inventory.Options{}).CreateProject(ctx, eim.DefaultProject, ""); err != nil {
		t.Fatal(err)
	}
	return st
}

func testSeed(t *testing.T, dsn string) {
	ctx := context.Background()
	st := openStore(t, dsn)
	var progress bytes.Buffer
	c := &config{project: eim.DefaultProject, nodes: 25, batch: 4, parallel: 3, seed: 7, tokenURL: "https://127.0.0.1:8443/oauth2/token"}
	res, err := seed(ctx, st, c, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.nodes) != 25 || !strings.Contains(progress.String(), "seeding: 25/25 nodes") {
		t.Fatalf("got %d nodes, progress %q; want 25 and the last count", len(res.nodes), progress.String())
	}
	ids := sim.Generate(25, 7)
	seen, err := st.LastSeen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 25 {
		t.Errorf("last seen: got %d hosts, want 25", len(seen))
	}
	err = st.View(ctx, eim.DefaultProject, func(tx eim.Tx) error {
		for i, n := range res.nodes {
			if n.Project != eim.DefaultProject || n.ClientID != southbound.ClientID(n.HostID) || n.TokenURL != c.tokenURL || n.Hostname != ids[i].Hostname {
				t.Errorf("node %d: got %+v", i, n)
			}
			r, err := tx.Get(ctx, eim.KindHost, n.HostID)
			if err != nil {
				return err
			}
			h := r.(*eim.Host)
			// The node authenticates as one onboarded by Discover.
			if !southbound.CheckSecret(h.NodeSecretHash, n.ClientSecret) || h.NodeCredGen != 1 {
				t.Errorf("node %d: credentials %q, generation %d do not take its secret, generation 1", i, h.NodeSecretHash, h.NodeCredGen)
			}
			if h.DesiredState != eim.HostStateOnboarded || h.CurrentState != eim.HostStateOnboarded ||
				h.UUID != ids[i].UUID || h.SerialNumber != ids[i].Serial || h.Name != ids[i].Hostname || h.Hostname != ids[i].Hostname ||
				h.RegistrationStatus != "Host is Registered" || h.OnboardingStatus != "Onboarded" || h.HostStatus != "Running" ||
				h.HostStatusIndicator != eim.StatusIdle || h.CurrentPowerState != eim.PowerStateOn || h.OnboardingStatusIndicator != eim.StatusIdle || h.HostStatusTimestamp == 0 {
				t.Errorf("host %d: got %+v, want it onboarded and running", i, h)
			}
			items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: n.HostID}}})
			if err != nil {
				return err
			}
			if len(items) != 1 {
				t.Fatalf("host %d: got %d instances, want 1", i, len(items))
			}
			in := items[0].(*eim.Instance)
			if in.DesiredState != eim.InstanceStateRunning || in.CurrentState != eim.InstanceStateRunning || in.OSID != res.osID ||
				in.Kind != eim.InstanceKindMetal || in.ProvisioningStatus != "Provisioned" || in.InstanceStatus != "Running" ||
				in.ProvisioningStatusIndicator != eim.StatusIdle {
				t.Errorf("instance of host %d: got %+v, want it provisioned and running with OS %s", i, in, res.osID)
			}
		}
		r, err := tx.Get(ctx, eim.KindOS, res.osID)
		if err != nil {
			return err
		}
		if o := r.(*eim.OS); o.Name != seedOSName {
			t.Errorf("OS: got %+v, want %s", o, seedOSName)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Again, with the OS given and not: more nodes, new identities, the
	// same OS.
	for _, c2 := range []*config{
		{project: eim.DefaultProject, nodes: 2, batch: 2000, parallel: 1, seed: 8, osID: res.osID},
		{project: eim.DefaultProject, nodes: 1, batch: 2000, parallel: 1, seed: 9},
	} {
		if res2, err := seed(ctx, st, c2, &progress); err != nil || res2.osID != res.osID || len(res2.nodes) != c2.nodes {
			t.Errorf("seed again (--os %q): got %+v, %v; want %d nodes with OS %s", c2.osID, res2, err, c2.nodes, res.osID)
		}
	}
	for _, tc := range []struct {
		name string
		c    *config
		want string
	}{
		{"same identities", &config{project: eim.DefaultProject, nodes: 3, batch: 1, parallel: 2, seed: 7}, "seed again with another --seed"},
		{"no project", &config{project: "nope", nodes: 1, batch: 1, parallel: 1, seed: 9}, `project "nope" not found (start the server once`},
		{"no OS", &config{project: eim.DefaultProject, nodes: 1, batch: 1, parallel: 1, seed: 9, osID: "os-00000000"}, "--os os-00000000 in project default: "},
	} {
		if _, err := seed(ctx, st, tc.c, &progress); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	var n int
	err = st.View(ctx, eim.DefaultProject, func(tx eim.Tx) error {
		n, err = tx.Count(ctx, eim.KindHost, eim.Query{})
		return err
	})
	if err != nil || n != 28 {
		t.Errorf("hosts after the failed seeds: got %d (%v), want 28 (a failed batch writes nothing)", n, err)
	}

	// --sites: the hosts placed in the sites in turn, across batches.
	reg := &eim.Region{Meta: eim.Meta{ResourceID: eim.NewID(eim.KindRegion)}, Name: "r"}
	sites := []*eim.Site{{Meta: eim.Meta{ResourceID: eim.NewID(eim.KindSite)}, Name: "s1", RegionID: reg.ResourceID},
		{Meta: eim.Meta{ResourceID: eim.NewID(eim.KindSite)}, Name: "s2", RegionID: reg.ResourceID}}
	err = st.Update(ctx, eim.DefaultProject, func(tx eim.Tx) error {
		if err := tx.Create(ctx, reg); err != nil {
			return err
		}
		for _, s := range sites {
			if err := tx.Create(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cs := &config{project: eim.DefaultProject, nodes: 5, batch: 2, parallel: 2, seed: 10, osID: res.osID, sites: []string{sites[0].ResourceID, sites[1].ResourceID}}
	res3, err := seed(ctx, st, cs, &progress)
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, eim.DefaultProject, func(tx eim.Tx) error {
		for i, nd := range res3.nodes {
			r, err := tx.Get(ctx, eim.KindHost, nd.HostID)
			if err != nil {
				return err
			}
			if got, want := r.(*eim.Host).SiteID, cs.sites[i%2]; got != want {
				t.Errorf("node %d with --sites: got site %q, want %q", i, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The command on a server's data directory writes the nodes file, mode
// 0600, that "eim-agent simulate --nodes-file" reads.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "eim.db"))
	st.Close()
	out := filepath.Join(dir, "nodes.jsonl")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"--database", dir, "--nodes", "12", "--out", out, "--batch", "5"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "seeded 12 running nodes") {
		t.Errorf("stdout: got %q", stdout.String())
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("nodes file mode: got %v, want 0600", fi.Mode().Perm())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nodes, err := sim.ReadNodes(f)
	if err != nil || len(nodes) != 12 {
		t.Errorf("nodes file: got %d nodes, %v; want 12", len(nodes), err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".nodes.jsonl") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "1", "--out", out}, "--database is required"},
		{[]string{"--database", dir, "--out", out}, "--nodes must be positive"},
		{[]string{"--database", dir, "--nodes", "1"}, "--out is required"},
		{[]string{"--database", dir, "--nodes", "1", "--out", out, "--batch", "0"}, "--batch and --parallel must be positive"},
		{[]string{"--database", dir, "--nodes", "1", "--out", out, "--parallel", "0"}, "--batch and --parallel must be positive"},
		{[]string{"--database", filepath.Join(dir, "none"), "--nodes", "1", "--out", out}, "no SQLite store at " + filepath.Join(dir, "none") + " (start the server once on it)"},
	} {
		if err := run(context.Background(), tc.args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}
