package compat_test

import (
	"strings"
	"testing"

	rc "github.com/eimhq/eim/compat/refclient"
)

// TestHosts: create, read, list, update, register, onboard, invalidate,
// summary and delete of hosts, and their errors.
func TestHosts(t *testing.T) {
	p := newProject(t)
	c := p.c
	site := ok(c.SiteServiceCreateSite3WithResponse(ctx, p.name, nil, rc.SiteResource{Name: ptr("plant")})).get(t)

	u := newUUID()
	h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "edge-1", Uuid: &u,
		Metadata: &[]rc.MetadataItem{{Key: "rack", Value: "7"}}})).get(t)
	id := str(h.ResourceId)
	if *h.DesiredState != rc.HOSTSTATEONBOARDED || str(h.HostStatus) != "Not Connected" {
		t.Errorf("created host: desired %s status %q, want ONBOARDED, Not Connected", *h.DesiredState, str(h.HostStatus))
	}
	// A host without site, provider or instance: null, as the original.
	if h.Site != nil || h.Instance != nil || h.Provider != nil {
		t.Errorf("created host: site %v instance %v provider %v, want null", h.Site, h.Instance, h.Provider)
	}

	// Into the site: the nested site carries its (empty) region.
	siteID := str(site.ResourceId)
	patched := ok(c.HostServicePatchHostWithResponse(ctx, p.name, id, nil, rc.HostResource{Name: "edge-1", SiteId: &siteID})).get(t)
	if str(patched.Site.ResourceId) != siteID || str(patched.Site.Region.ResourceId) != "" {
		t.Errorf("patched host: site %q region %q", str(patched.Site.ResourceId), str(patched.Site.Region.ResourceId))
	}
	put := ok(c.HostServiceUpdateHostWithResponse(ctx, p.name, id, rc.HostResource{Name: "edge-1b", SiteId: &siteID})).get(t)
	if put.Name != "edge-1b" {
		t.Errorf("PUT host: name %q", put.Name)
	}
	got := ok(c.HostServiceGetHostWithResponse(ctx, p.name, id)).get(t)
	if got.Name != "edge-1b" || str(got.Uuid) != u || str(got.SiteId) != siteID {
		t.Errorf("get host: %q %q %q", got.Name, str(got.Uuid), str(got.SiteId))
	}

	// Register: by serial, by uuid, with autoOnboard.
	reg := ok(c.HostServiceRegisterHostWithResponse(ctx, p.name, nil, rc.HostRegister{SerialNumber: ptr("SN12345"), Name: ptr("reg-1")})).get(t)
	if *reg.DesiredState != rc.HOSTSTATEREGISTERED {
		t.Errorf("registered host: desired %s, want REGISTERED", *reg.DesiredState)
	}
	regID := str(reg.ResourceId)
	u2 := newUUID()
	reg = ok(c.HostServicePatchRegisterHostWithResponse(ctx, p.name, regID, rc.HostRegister{Uuid: &u2, AutoOnboard: ptr(true)})).get(t)
	if str(reg.Uuid) != u2 || *reg.DesiredState != rc.HOSTSTATEONBOARDED {
		t.Errorf("registration update: uuid %q desired %s, want %s ONBOARDED", str(reg.Uuid), *reg.DesiredState, u2)
	}
	reg2 := ok(c.HostServiceRegisterHostWithResponse(ctx, p.name, nil, rc.HostRegister{Uuid: ptr(newUUID())})).get(t)
	call(c.HostServiceOnboardHostWithResponse(ctx, p.name, str(reg2.ResourceId))).ok(t)
	if on := ok(c.HostServiceGetHostWithResponse(ctx, p.name, str(reg2.ResourceId))).get(t); *on.DesiredState != rc.HOSTSTATEONBOARDED {
		t.Errorf("onboarded host: desired %s", *on.DesiredState)
	}

	// List, filter, orderBy with the original's spellings.
	list := ok(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{
		Filter: ptr(`name="edge*" OR has(site)`), OrderBy: ptr("site.resourceId desc, resource_id"), PageSize: ptr(100)})).get(t)
	if list.TotalElements != 1 || str(list.Hosts[0].ResourceId) != id {
		t.Errorf("filtered list: got %d hosts, want %s", list.TotalElements, id)
	}
	all := ok(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{OrderBy: ptr("site_id desc")})).get(t)
	if all.TotalElements != 3 || str(all.Hosts[0].ResourceId) != id {
		t.Errorf("list by site desc: got %d, first %s, want 3 and %s", all.TotalElements, str(all.Hosts[0].ResourceId), id)
	}
	sum := ok(c.HostServiceGetHostsSummaryWithResponse(ctx, p.name, nil)).get(t)
	if *sum.Total != 3 || *sum.Unallocated != 2 {
		t.Errorf("summary: total %d unallocated %d, want 3 and 2", *sum.Total, *sum.Unallocated)
	}

	// Invalidate.
	call(c.HostServiceInvalidateHostWithResponse(ctx, p.name, str(reg2.ResourceId), &rc.HostServiceInvalidateHostParams{Note: ptr("stolen")})).ok(t)
	inv := ok(c.HostServiceGetHostWithResponse(ctx, p.name, str(reg2.ResourceId))).get(t)
	if *inv.DesiredState != rc.HOSTSTATEUNTRUSTED || str(inv.Note) != "stolen" {
		t.Errorf("invalidated host: desired %s note %q", *inv.DesiredState, str(inv.Note))
	}

	// Errors.
	call(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "dup", Uuid: &u})).fails(t, 409, "AlreadyExists")
	call(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "bad", Uuid: ptr("not-a-uuid")})).fails(t, 400, "InvalidArgument", "uuid")
	call(c.HostServiceGetHostWithResponse(ctx, p.name, "host-0000dead")).fails(t, 404, "NotFound")
	call(c.HostServiceGetHostWithResponse(ctx, p.name, "inst-12345678")).fails(t, 400, "InvalidArgument")
	call(c.HostServiceListHostsWithResponse(ctx, p.name, &rc.HostServiceListHostsParams{Filter: ptr("nosuch=1")})).fails(t, 400, "InvalidArgument", "nosuch")
	call(c.HostServicePatchHostWithResponse(ctx, p.name, id, nil, rc.HostResource{Name: "x", SiteId: ptr("site-0000dead")})).fails(t, 404, "NotFound", "siteId")

	// Delete: two-phase; the host is gone once the managers are done.
	call(c.HostServiceDeleteHostWithResponse(ctx, p.name, id)).ok(t)
	eventually(t, "deleted host gone", func() bool {
		r, err := c.HostServiceGetHostWithResponse(ctx, p.name, id)
		return err == nil && r.StatusCode() == 404
	})
}

// TestInstancesAndOS: OS resources over both paths, instances with their
// nested host and OS, and their errors.
func TestInstancesAndOS(t *testing.T) {
	p := newProject(t)
	c := p.c
	os1 := ok(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{
		Name: ptr("ubuntu-a"), Sha256: sha, ProfileName: ptr("ubuntu"), OsType: ptr(rc.OSTYPEMUTABLE), Architecture: ptr("x86_64")})).get(t)
	os2 := ok(c.OperatingSystemServiceCreateOperatingSystem3WithResponse(ctx, p.name, rc.OperatingSystemResource{
		Name: ptr("ubuntu-b"), Sha256: sha, ProfileName: ptr("ubuntu")})).get(t)
	osID := str(os1.ResourceId)
	if str(os1.OsResourceID) != osID {
		t.Errorf("OS alias: %q, want %s", str(os1.OsResourceID), osID)
	}
	got := ok(c.OperatingSystemServiceGetOperatingSystem3WithResponse(ctx, p.name, str(os2.ResourceId))).get(t)
	if str(got.Name) != "ubuntu-b" {
		t.Errorf("get OS over operating_systems: %q", str(got.Name))
	}
	oses := ok(c.OperatingSystemServiceListOperatingSystemsWithResponse(ctx, p.name, &rc.OperatingSystemServiceListOperatingSystemsParams{
		Filter: ptr(`profileName="ubuntu"`), OrderBy: ptr("name desc")})).get(t)
	if oses.TotalElements < 2 || len(oses.OperatingSystemResources) < 2 {
		t.Errorf("OS list: got %d", oses.TotalElements)
	}
	call(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("ubuntu-a"), Sha256: sha})).fails(t, 409, "AlreadyExists")
	call(c.OperatingSystemServiceCreateOperatingSystemWithResponse(ctx, p.name, rc.OperatingSystemResource{Name: ptr("no-sha")})).fails(t, 400, "InvalidArgument", "sha256")

	h := ok(c.HostServiceCreateHostWithResponse(ctx, p.name, rc.HostResource{Name: "h", Uuid: ptr(newUUID())})).get(t)
	hostID := str(h.ResourceId)
	in := ok(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("inst"), Kind: ptr(rc.INSTANCEKINDMETAL),
		HostID: &hostID, OsID: &osID})).get(t)
	instID := str(in.ResourceId)
	if *in.DesiredState != rc.INSTANCESTATERUNNING || str(in.Host.ResourceId) != hostID || str(in.Os.ResourceId) != osID || str(in.InstanceID) != instID {
		t.Errorf("created instance: desired %s host %q os %q", *in.DesiredState, str(in.Host.ResourceId), str(in.Os.ResourceId))
	}
	if in.CustomConfig == nil || len(*in.CustomConfig) != 0 {
		t.Errorf("created instance: customConfig %v, want []", in.CustomConfig)
	}
	hi := ok(c.HostServiceGetHostWithResponse(ctx, p.name, hostID)).get(t)
	if str(hi.Instance.ResourceId) != instID || str(hi.Instance.Os.Name) != "ubuntu-a" {
		t.Errorf("host's instance: %q os %q", str(hi.Instance.ResourceId), str(hi.Instance.Os.Name))
	}
	renamed := ok(c.InstanceServicePatchInstanceWithResponse(ctx, p.name, instID, nil, rc.InstanceResource{Name: ptr("inst-2")})).get(t)
	if str(renamed.Name) != "inst-2" {
		t.Errorf("patched instance: %q", str(renamed.Name))
	}
	insts := ok(c.InstanceServiceListInstancesWithResponse(ctx, p.name, &rc.InstanceServiceListInstancesParams{Filter: ptr(`host.resourceId="` + hostID + `"`), OrderBy: ptr("host_id")})).get(t)
	if insts.TotalElements != 1 {
		t.Errorf("instances of host: %d", insts.TotalElements)
	}
	call(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("second"), Kind: ptr(rc.INSTANCEKINDMETAL), HostID: &hostID, OsID: &osID})).fails(t, 409, "AlreadyExists")
	call(c.InstanceServiceCreateInstanceWithResponse(ctx, p.name, rc.InstanceResource{Name: ptr("x"), HostID: ptr("host-0000dead"), OsID: &osID})).fails(t, 404, "NotFound", "hostID")
	call(c.OperatingSystemServiceDeleteOperatingSystemWithResponse(ctx, p.name, osID)).fails(t, 400, "FailedPrecondition")

	call(c.InstanceServiceInvalidateInstanceWithResponse(ctx, p.name, instID)).ok(t)
	call(c.InstanceServiceDeleteInstanceWithResponse(ctx, p.name, instID)).ok(t)
	eventually(t, "deleted instance gone", func() bool {
		r, err := c.InstanceServiceGetInstanceWithResponse(ctx, p.name, instID)
		return err == nil && r.StatusCode() == 404
	})
	call(c.OperatingSystemServiceDeleteOperatingSystemWithResponse(ctx, p.name, osID)).ok(t)
	call(c.OperatingSystemServiceDeleteOperatingSystem3WithResponse(ctx, p.name, str(os2.ResourceId))).ok(t)
}

// TestProvidersAccountsConfigs: the create/read/list/delete kinds.
func TestProvidersAccountsConfigs(t *testing.T) {
	p := newProject(t)
	c := p.c
	pv := ok(c.ProviderServiceCreateProviderWithResponse(ctx, p.name, rc.ProviderResource{Name: "lxca", ProviderKind: rc.PROVIDERKINDBAREMETAL,
		ApiEndpoint: "https://lxca.example/api", ApiCredentials: &[]string{"v1/lxca/creds"}})).get(t)
	if str(pv.ProviderID) != str(pv.ResourceId) {
		t.Errorf("provider alias %q", str(pv.ProviderID))
	}
	pvs := ok(c.ProviderServiceListProvidersWithResponse(ctx, p.name, &rc.ProviderServiceListProvidersParams{Filter: ptr(`name="lxca"`)})).get(t)
	if pvs.TotalElements != 1 || pvs.Providers[0].Name != "lxca" {
		t.Errorf("providers: %d", pvs.TotalElements)
	}
	call(c.ProviderServiceCreateProviderWithResponse(ctx, p.name, rc.ProviderResource{Name: "lxca", ProviderKind: rc.PROVIDERKINDBAREMETAL, ApiEndpoint: "https://x"})).fails(t, 409, "AlreadyExists")
	call(c.ProviderServiceDeleteProviderWithResponse(ctx, p.name, str(pv.ResourceId))).ok(t)
	call(c.ProviderServiceGetProviderWithResponse(ctx, p.name, str(pv.ResourceId))).fails(t, 404, "NotFound")

	la := ok(c.LocalAccountServiceCreateLocalAccountWithResponse(ctx, p.name, rc.LocalAccountResource{Username: "ops",
		SshKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG ops@example"})).get(t)
	if got := ok(c.LocalAccountServiceGetLocalAccountWithResponse(ctx, p.name, str(la.ResourceId))).get(t); got.Username != "ops" || str(got.LocalAccountID) != str(la.ResourceId) {
		t.Errorf("local account: %q %q", got.Username, str(got.LocalAccountID))
	}
	if las := ok(c.LocalAccountServiceListLocalAccountsWithResponse(ctx, p.name, nil)).get(t); las.TotalElements != 1 {
		t.Errorf("local accounts: %d", las.TotalElements)
	}
	call(c.LocalAccountServiceCreateLocalAccountWithResponse(ctx, p.name, rc.LocalAccountResource{Username: "ops", SshKey: "not a key"})).fails(t, 400, "InvalidArgument", "sshKey")
	call(c.LocalAccountServiceDeleteLocalAccountWithResponse(ctx, p.name, str(la.ResourceId))).ok(t)

	cc := ok(c.CustomConfigServiceCreateCustomConfigWithResponse(ctx, p.name, rc.CustomConfigResource{Name: "motd",
		Config: "#cloud-config\nruncmd:\n  - echo hi\n", Description: ptr("greeting")})).get(t)
	if got := ok(c.CustomConfigServiceGetCustomConfigWithResponse(ctx, p.name, str(cc.ResourceId))).get(t); !strings.Contains(got.Config, "echo hi") {
		t.Errorf("custom config: %q", got.Config)
	}
	if ccs := ok(c.CustomConfigServiceListCustomConfigsWithResponse(ctx, p.name, nil)).get(t); ccs.TotalElements != 1 {
		t.Errorf("custom configs: %d", ccs.TotalElements)
	}
	call(c.CustomConfigServiceCreateCustomConfigWithResponse(ctx, p.name, rc.CustomConfigResource{Name: "motd", Config: "x"})).fails(t, 409, "AlreadyExists")
	call(c.CustomConfigServiceDeleteCustomConfigWithResponse(ctx, p.name, str(cc.ResourceId))).ok(t)
}
