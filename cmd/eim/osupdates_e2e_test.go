package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/sqlstore"
)

// OS update policies and runs and the fleet-wide update view end to end,
// through the CLI against the real server (Main): policies of each type
// are created, the original's rules refuse the rest with messages naming
// the field, an instance names a policy, and the summary counts instances
// by update state per OS profile. The maintenance module's writes (runs,
// update status) are made through a second store on the same database, as
// the module makes them; TestMaintenance* drives them with real agents.
func TestOSUpdatesSQLite(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir)
	testOSUpdates(t, url, dataDir, filepath.Join(dataDir, "eim.db"))
}

func TestOSUpdatesPostgres(t *testing.T) {
	pg := freshPostgres(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	url, _ := startServer(t, dataDir, "--database", pg)
	testOSUpdates(t, url, dataDir, pg)
}

func testOSUpdates(t *testing.T, url, dataDir, dsn string) {
	admin := cliRunner{t: t, url: url, tokenFile: filepath.Join(dataDir, adminTokenFile)}
	admin.must("project", "create", "acme")
	in := func(args ...string) []string { return append([]string{"--project", "acme"}, args...) }
	id := func(args ...string) string { return strings.TrimSpace(admin.must(in(append(args, "-o", "id")...)...)) }
	const sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	emt := id("os", "create", "--name", "emt 3.0", "--sha256", sha, "--os-type", "OS_TYPE_IMMUTABLE")
	emtNext := id("os", "create", "--name", "emt 3.1", "--sha256", sha, "--os-type", "OS_TYPE_IMMUTABLE")
	ubuntu := id("os", "create", "--name", "ubuntu 24.04", "--sha256", sha, "--os-type", "OS_TYPE_MUTABLE")

	// One policy of each type.
	latest := id("os-update-policy", "create", "--name", "latest", "--policy", "UPDATE_POLICY_LATEST")
	target := id("os-update-policy", "create", "--name", "to 3.1", "--policy", "UPDATE_POLICY_TARGET", "--target-os", emtNext)
	deb822 := filepath.Join(t.TempDir(), "noble.sources")
	if err := os.WriteFile(deb822, []byte("Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble-updates\nComponents: main universe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var apt eim.OSUpdatePolicy
	admin.json(&apt, in("os-update-policy", "create", "--name", "apt", "--description", "security (weekly)", "--policy", "UPDATE_POLICY_TARGET",
		"--source", "deb [arch=amd64,arm64] http://archive.ubuntu.com/ubuntu noble-security main", "--source", "@"+deb822,
		"--package", "openssl", "--package", "libssl3", "--kernel-command", "quiet splash")...)
	if len(apt.UpdateSources) != 2 || !strings.Contains(apt.UpdateSources[0], "amd64,arm64") || !strings.HasPrefix(apt.UpdateSources[1], "Types: deb\n") ||
		apt.UpdatePackages != "openssl\nlibssl3" || apt.UpdateKernelCommand != "quiet splash" || apt.TargetOs != nil {
		t.Fatalf("mutable policy: %+v", apt)
	}
	var got eim.OSUpdatePolicy
	admin.json(&got, in("os-update-policy", "get", target)...)
	if got.UpdatePolicy != eim.UpdatePolicyTarget || got.TargetOs == nil || got.TargetOs.Name != "emt 3.1" {
		t.Fatalf("target policy: %+v", got)
	}
	if ids := strings.Fields(admin.must(in("os-update-policy", "list", "--filter", "updatePolicy=UPDATE_POLICY_TARGET", "-o", "id")...)); len(ids) != 2 {
		t.Fatalf("TARGET policies: %v", ids)
	}
	table := admin.must(in("os-update-policy", "list", "--order-by", "name")...)
	for _, want := range []string{"POLICY", "TARGET-OS-NAME", "emt 3.1", "LATEST", latest} {
		if !strings.Contains(table, want) {
			t.Errorf("policy table lacks %q:\n%s", want, table)
		}
	}

	// The rules, each refused with a message that names the field.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_LATEST", "--package", "vim"}, []string{"updatePackages", "UPDATE_POLICY_LATEST"}},
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_LATEST", "--target-os", emtNext}, []string{"targetOsId", "UPDATE_POLICY_LATEST"}},
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_TARGET", "--target-os", emtNext, "--kernel-command", "quiet"},
			[]string{"targetOsId", "cannot be combined"}},
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_TARGET"}, []string{"UPDATE_POLICY_TARGET needs"}},
		{[]string{"os-update-policy", "create", "--name", "x"}, []string{"updatePolicy: is required"}},
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_TARGET", "--target-os", ubuntu}, []string{"targetOsId", "mutable"}},
		{[]string{"os-update-policy", "create", "--name", "x", "--policy", "UPDATE_POLICY_TARGET", "--target-os", "os-00000000"}, []string{"targetOsId", "not found"}},
		{[]string{"os-update-policy", "update", target, "--set", "name=y"}, []string{"no update"}},
		{[]string{"os-update-run", "create", "--set", "name=y"}, []string{"no create"}},
	} {
		_, err := admin.run(in(c.args...)...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("eim %s: got %v, want an error mentioning %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
	if ids := strings.Fields(admin.must(in("os-update-policy", "list", "-o", "id")...)); len(ids) != 3 {
		t.Fatalf("policies after the refusals: %v, want the 3 created", ids)
	}

	// Instances: two on EMT (one naming the target policy), one on Ubuntu.
	instance := func(name, osID string, extra ...string) string {
		host := id("host", "create", "--name", name, "--uuid", newTestUUID(t))
		return id(append([]string{"instance", "create", "--name", name, "--host", host, "--os", osID}, extra...)...)
	}
	i1 := instance("e1", emt, "--set", "osUpdatePolicyID="+target)
	i2 := instance("e2", emt)
	i3 := instance("u1", ubuntu)
	var inst eim.Instance
	admin.json(&inst, in("instance", "get", i1)...)
	if inst.UpdatePolicy == nil || inst.UpdatePolicy.ResourceID != target || inst.UpdatePolicy.TargetOs == nil || inst.UpdatePolicy.TargetOs.ResourceID != emtNext {
		t.Fatalf("instance's updatePolicy: %+v", inst.UpdatePolicy)
	}
	admin.must(in("instance", "patch", i3, "--set", "osUpdatePolicyID="+apt.ResourceID)...)
	if _, err := admin.run(in("os-update-policy", "delete", target)...); err == nil || !strings.Contains(err.Error(), "in use by 1 instances ("+i1+")") {
		t.Fatalf("deleting a policy in use: got %v", err)
	}
	if _, err := admin.run(in("os", "delete", emtNext)...); err == nil || !strings.Contains(err.Error(), "OS update policies ("+target+")") {
		t.Fatalf("deleting a policy's target OS: got %v", err)
	}

	// The maintenance module's writes: i1 updating (with its run), i2
	// failed, i3 up to date with a newer OS known.
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	var runID string
	err = st.Update(ctx, "acme", func(tx eim.Tx) error {
		r, err := tx.Get(ctx, eim.KindInstance, i1)
		if err != nil {
			return err
		}
		pol, err := inventory.OSUpdatePolicyOf(ctx, tx, r.(*eim.Instance))
		if err != nil {
			return err
		}
		run := &eim.OSUpdateRun{InstanceID: i1, AppliedPolicyID: pol.ResourceID}
		if err := inventory.CreateOSUpdateRun(ctx, tx, run, now); err != nil {
			return err
		}
		runID = run.ResourceID
		for _, s := range []struct {
			inst, text string
			ind        eim.StatusIndication
		}{{i1, eim.UpdateStatusUpdating, eim.StatusInProgress}, {i2, eim.UpdateStatusFailed, eim.StatusError}, {i3, eim.UpdateStatusUpToDate, eim.StatusIdle}} {
			if _, err := inventory.SetInstanceUpdateStatus(ctx, tx, s.inst, s.text, s.ind, now); err != nil {
				return err
			}
		}
		r, err = tx.Get(ctx, eim.KindInstance, i3)
		if err != nil {
			return err
		}
		r.(*eim.Instance).OsUpdateAvailable = "ubuntu 24.04.2"
		return tx.Update(ctx, r)
	})
	if err != nil {
		t.Fatal(err)
	}

	var sum struct {
		Total, UpToDate, Updating, Failed, Unknown, OSUpdateAvailable int
		OperatingSystems                                              []struct {
			OSResourceID, Name                                            string
			Total, UpToDate, Updating, Failed, Unknown, OSUpdateAvailable int
		}
	}
	admin.json(&sum, in("instance", "updates-summary")...)
	if sum.Total != 3 || sum.Updating != 1 || sum.Failed != 1 || sum.UpToDate != 1 || sum.Unknown != 0 || sum.OSUpdateAvailable != 1 ||
		len(sum.OperatingSystems) != 2 {
		t.Fatalf("summary: %+v", sum)
	}
	if o := sum.OperatingSystems[0]; o.OSResourceID != emt || o.Name != "emt 3.0" || o.Total != 2 || o.Updating != 1 || o.Failed != 1 {
		t.Errorf("summary of emt 3.0: %+v", o)
	}
	if o := sum.OperatingSystems[1]; o.OSResourceID != ubuntu || o.Total != 1 || o.UpToDate != 1 || o.OSUpdateAvailable != 1 {
		t.Errorf("summary of ubuntu: %+v", o)
	}
	out := admin.must(in("instance", "updates-summary", "--filter", `os.name="emt*"`)...)
	for _, want := range []string{"UP-TO-DATE", "UPDATE-AVAILABLE", emt, "(all)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, ubuntu) {
		t.Errorf("filtered summary shows %s:\n%s", ubuntu, out)
	}

	// The run, through the CLI.
	if ids := strings.Fields(admin.must(in("os-update-run", "list", "--filter", `instance.resourceId="`+i1+`"`, "-o", "id")...)); len(ids) != 1 || ids[0] != runID {
		t.Fatalf("runs of %s: %v, want %s", i1, ids, runID)
	}
	shown := admin.must(in("os-update-run", "get", runID)...)
	for _, want := range []string{"instance.resourceId:", i1, "appliedPolicy.resourceId:", target, eim.UpdateStatusUpdating} {
		if !strings.Contains(shown, want) {
			t.Errorf("eim os-update-run get lacks %q:\n%s", want, shown)
		}
	}
	admin.must(in("os-update-run", "delete", runID)...)
	admin.must(in("instance", "patch", i1, "--set", "osUpdatePolicyID=")...)
	admin.must(in("os-update-policy", "delete", target, latest)...)
}

// newTestUUID returns a random RFC 4122 UUID.
func newTestUUID(t *testing.T) string {
	t.Helper()
	return eim.NewID("x")[2:] + "-0000-4000-8000-" + strings.TrimPrefix(eim.NewID("y"), "y-") + "0000"
}
