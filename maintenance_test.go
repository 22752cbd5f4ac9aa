package eim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eimhq/eim"
)

func TestValidateOSUpdates(t *testing.T) {
	latest := func(f func(*eim.OSUpdatePolicy)) *eim.OSUpdatePolicy {
		p := &eim.OSUpdatePolicy{Name: "latest", UpdatePolicy: eim.UpdatePolicyLatest}
		f(p)
		return p
	}
	mutable := func(f func(*eim.OSUpdatePolicy)) *eim.OSUpdatePolicy {
		p := &eim.OSUpdatePolicy{Name: "apt", Description: "security fixes (weekly)", UpdatePolicy: eim.UpdatePolicyTarget,
			UpdateSources:  []string{"Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble-security\nComponents: main"},
			UpdatePackages: "openssl\nlibssl3\n", UpdateKernelCommand: "quiet splash intel_iommu=on"}
		f(p)
		return p
	}
	immutable := func(f func(*eim.OSUpdatePolicy)) *eim.OSUpdatePolicy {
		p := &eim.OSUpdatePolicy{Name: "emt 3.1", UpdatePolicy: eim.UpdatePolicyTarget, TargetOsID: "os-0000abcd"}
		f(p)
		return p
	}
	run := func(f func(*eim.OSUpdateRun)) *eim.OSUpdateRun {
		r := &eim.OSUpdateRun{Name: "update 1", InstanceID: "inst-0000abcd", AppliedPolicyID: "osupdatepolicy-0000abcd", HostID: "host-0000abcd",
			Status: eim.UpdateStatusUpdating, StatusIndicator: eim.StatusInProgress, StartTime: 100}
		f(r)
		return r
	}
	cases := []struct {
		name string
		r    eim.Resource
		want string // substring of the message; "" = valid
	}{
		{"latest ok", latest(func(*eim.OSUpdatePolicy) {}), ""},
		{"latest with sources", latest(func(p *eim.OSUpdatePolicy) { p.UpdateSources = []string{"deb x"} }), "updateSources: must not be set with UPDATE_POLICY_LATEST"},
		{"latest with packages", latest(func(p *eim.OSUpdatePolicy) { p.UpdatePackages = "vim" }), "updatePackages: must not be set"},
		{"latest with kernel", latest(func(p *eim.OSUpdatePolicy) { p.UpdateKernelCommand = "quiet" }), "updateKernelCommand: must not be set"},
		{"latest with target", latest(func(p *eim.OSUpdatePolicy) { p.TargetOsID = "os-0000abcd" }), "targetOsId: must not be set"},
		{"no name", latest(func(p *eim.OSUpdatePolicy) { p.Name = "" }), "name: is required"},
		{"bad name", latest(func(p *eim.OSUpdatePolicy) { p.Name = "a;b" }), "name:"},
		{"long name", latest(func(p *eim.OSUpdatePolicy) { p.Name = strings.Repeat("a", 51) }), "name: is 51 characters long"},
		{"bad description", latest(func(p *eim.OSUpdatePolicy) { p.Description = "a\"b" }), "description:"},
		{"long description", latest(func(p *eim.OSUpdatePolicy) { p.Description = strings.Repeat("a", 201) }), "description: is 201"},
		{"no policy", latest(func(p *eim.OSUpdatePolicy) { p.UpdatePolicy = "" }), "updatePolicy: is required"},
		{"unspecified policy", latest(func(p *eim.OSUpdatePolicy) { p.UpdatePolicy = eim.UpdatePolicyUnspecified }), "updatePolicy: is required"},
		{"bad policy", latest(func(p *eim.OSUpdatePolicy) { p.UpdatePolicy = "UPDATE_POLICY_NEVER" }), "updatePolicy: \"UPDATE_POLICY_NEVER\" is not one of"},
		{"mutable ok", mutable(func(*eim.OSUpdatePolicy) {}), ""},
		{"mutable packages only", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateSources, p.UpdateKernelCommand = nil, "" }), ""},
		{"mutable kernel only", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateSources, p.UpdatePackages = nil, "" }), ""},
		{"mutable empty source", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateSources = []string{"deb x", ""} }), "updateSources[1]: is required"},
		{"mutable bad source", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateSources = []string{"deb `x`"} }), "updateSources[0]:"},
		{"mutable too many sources", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateSources = make([]string, 101) }), "updateSources: has 101 items"},
		{"mutable bad packages", mutable(func(p *eim.OSUpdatePolicy) { p.UpdatePackages = "vim; rm -rf /\"" }), "updatePackages:"},
		{"mutable bad kernel", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateKernelCommand = "a\nb" }), "updateKernelCommand:"},
		{"mutable long kernel", mutable(func(p *eim.OSUpdatePolicy) { p.UpdateKernelCommand = strings.Repeat("a", 501) }), "updateKernelCommand: is 501"},
		{"immutable ok", immutable(func(*eim.OSUpdatePolicy) {}), ""},
		{"immutable bad target", immutable(func(p *eim.OSUpdatePolicy) { p.TargetOsID = "inst-0000abcd" }), "targetOsId:"},
		{"target both", immutable(func(p *eim.OSUpdatePolicy) { p.UpdatePackages = "vim" }), "targetOsId: cannot be combined with updateSources"},
		{"target both kernel", immutable(func(p *eim.OSUpdatePolicy) { p.UpdateKernelCommand = "quiet" }), "targetOsId: cannot be combined"},
		{"target neither", immutable(func(p *eim.OSUpdatePolicy) { p.TargetOsID = "" }), "updatePolicy: UPDATE_POLICY_TARGET needs"},
		{"policy bad id", latest(func(p *eim.OSUpdatePolicy) { p.ResourceID = "osupdatepolicy-1" }), "resourceId:"},
		{"run ok", run(func(*eim.OSUpdateRun) {}), ""},
		{"run without policy", run(func(r *eim.OSUpdateRun) { r.AppliedPolicyID = "" }), ""},
		{"run ended", run(func(r *eim.OSUpdateRun) { r.EndTime, r.StatusIndicator = 200, eim.StatusIdle }), ""},
		{"run no instance", run(func(r *eim.OSUpdateRun) { r.InstanceID = "" }), "instance: is required"},
		{"run bad instance", run(func(r *eim.OSUpdateRun) { r.InstanceID = "host-0000abcd" }), "instance:"},
		{"run bad policy", run(func(r *eim.OSUpdateRun) { r.AppliedPolicyID = "os-0000abcd" }), "appliedPolicy:"},
		{"run bad host", run(func(r *eim.OSUpdateRun) { r.HostID = "inst-0000abcd" }), "host:"},
		{"run long name", run(func(r *eim.OSUpdateRun) { r.Name = strings.Repeat("n", 41) }), "name: is 41"},
		{"run long status", run(func(r *eim.OSUpdateRun) { r.Status = strings.Repeat("s", 1025) }), "status: is 1025"},
		{"run long details", run(func(r *eim.OSUpdateRun) { r.StatusDetails = strings.Repeat("d", eim.MaxRunStatusDetails+1) }), "statusDetails:"},
		{"run bad indicator", run(func(r *eim.OSUpdateRun) { r.StatusIndicator = "DONE" }), "statusIndicator:"},
		{"run ends before start", run(func(r *eim.OSUpdateRun) { r.EndTime = 99 }), "endTime: 99 is before startTime 100"},
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

func TestOSUpdateSchemas(t *testing.T) {
	p := eim.SchemaOf(eim.KindOSUpdatePolicy)
	if e, ok := p.Edge("targetOs"); !ok || e.Kind != eim.KindOS || e.Column != "target_os_id" {
		t.Errorf("policy edge targetOs: got %+v, want os via target_os_id", e)
	}
	r := eim.SchemaOf(eim.KindOSUpdateRun)
	for _, want := range []struct {
		name, column string
		k            eim.Kind
	}{{"instance", "instance_id", eim.KindInstance}, {"appliedPolicy", "applied_policy_id", eim.KindOSUpdatePolicy}, {"host", "host_id", eim.KindHost}} {
		if e, ok := r.Edge(want.name); !ok || e.Kind != want.k || e.Column != want.column {
			t.Errorf("run edge %s: got %+v, want %s via %s", want.name, e, want.k, want.column)
		}
	}
	// The run's references are stored but not on the wire, nor writable.
	for _, f := range r.Fields {
		if f.Writable {
			t.Errorf("run field %q is writable; a run is the maintenance module's", f.Name)
		}
		if f.Edge != nil && f.Name != "" {
			t.Errorf("run edge field %q has a wire name", f.Name)
		}
	}
	in := eim.SchemaOf(eim.KindInstance)
	if e, ok := in.Edge("updatePolicy"); !ok || e.Kind != eim.KindOSUpdatePolicy || e.Column != "os_update_policy_id" {
		t.Errorf("instance edge updatePolicy: got %+v", e)
	}
	if k, ok := eim.KindOfID("osupdaterun-0000abcd"); !ok || k != eim.KindOSUpdateRun {
		t.Errorf("KindOfID(osupdaterun-…): got %q, %v", k, ok)
	}
	if id := eim.NewID(eim.KindOSUpdatePolicy); !eim.ValidID(eim.KindOSUpdatePolicy, id) || len(id) != 23 {
		t.Errorf("NewID: got %q, want osupdatepolicy- and 8 hex digits (23 characters)", id)
	}
}
