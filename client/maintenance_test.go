package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/inventory"
)

// Policies and runs through their collections, decoded into the domain
// types, and the updates summary.
func TestOSUpdates(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.admin
	if _, err := c.CreateProject(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	var os eim.OS
	if err := c.Create(ctx, "acme", eim.KindOS, map[string]any{"name": "emt", "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "osType": "OS_TYPE_IMMUTABLE"}, &os); err != nil {
		t.Fatal(err)
	}
	var pol eim.OSUpdatePolicy
	err := c.Create(ctx, "acme", eim.KindOSUpdatePolicy, map[string]any{"name": "to emt", "updatePolicy": "UPDATE_POLICY_TARGET", "targetOsId": os.ResourceID}, &pol)
	if err != nil || pol.TargetOs == nil || pol.TargetOs.ResourceID != os.ResourceID {
		t.Fatalf("create policy: %+v, %v", pol, err)
	}
	err = c.Create(ctx, "acme", eim.KindOSUpdatePolicy, map[string]any{"name": "x", "updatePolicy": "UPDATE_POLICY_LATEST", "updatePackages": "vim"}, nil)
	if eim.ErrorCode(err) != eim.EINVALID {
		t.Fatalf("LATEST with packages: got %v, want InvalidArgument", err)
	}
	var h eim.Host
	if err := c.Create(ctx, "acme", eim.KindHost, map[string]any{"name": "h", "uuid": "6e0b2a4c-7a3f-4d7e-9a4a-6a0b9c1d2e3f"}, &h); err != nil {
		t.Fatal(err)
	}
	var in eim.Instance
	if err := c.Create(ctx, "acme", eim.KindInstance, map[string]any{"hostID": h.ResourceID, "osID": os.ResourceID, "osUpdatePolicyID": pol.ResourceID}, &in); err != nil {
		t.Fatal(err)
	}
	if in.UpdatePolicy == nil || in.UpdatePolicy.ResourceID != pol.ResourceID {
		t.Fatalf("instance's updatePolicy: %+v", in.UpdatePolicy)
	}
	err = e.inv.Store().Update(ctx, "acme", func(tx eim.Tx) error {
		return inventory.CreateOSUpdateRun(ctx, tx, &eim.OSUpdateRun{InstanceID: in.ResourceID, AppliedPolicyID: pol.ResourceID}, time.Unix(1_800_000_000, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	runs, page, err := client.ListOf[eim.OSUpdateRun](ctx, c, "acme", client.ListOptions{Filter: `instance.resourceId="` + in.ResourceID + `"`})
	if err != nil || page.Total != 1 || runs[0].Instance == nil || runs[0].Instance.ResourceID != in.ResourceID || runs[0].AppliedPolicy == nil {
		t.Fatalf("runs: %+v, %+v, %v", runs, page, err)
	}
	sum, err := c.UpdatesSummary(ctx, "acme", "")
	if err != nil || sum.Total != 1 || sum.Unknown != 1 || len(sum.OperatingSystems) != 1 || sum.OperatingSystems[0].Name != "emt" {
		t.Fatalf("UpdatesSummary: %+v, %v", sum, err)
	}
	if err := c.Delete(ctx, "acme", eim.KindOSUpdateRun, runs[0].ResourceID); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "acme", eim.KindOSUpdatePolicy, pol.ResourceID); eim.ErrorCode(err) != eim.EPRECONDITION {
		t.Fatalf("delete a policy in use: got %v, want FailedPrecondition", err)
	}
}
