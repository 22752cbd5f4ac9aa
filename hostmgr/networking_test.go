package hostmgr_test

import (
	"strings"
	"testing"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// Two hosts of a site reporting the same address are both flagged, naming
// each other, and keep the address; a host of another site with it is not;
// link-local addresses never clash; when one host's address changes, the
// other's flag goes.
func TestDuplicateAddresses(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		r, err := e.inv.Create(e.ctx, e.proj, &eim.Region{Name: "eu"})
		if err != nil {
			t.Fatal(err)
		}
		site := func(name string) string {
			s, err := e.inv.Create(e.ctx, e.proj, &eim.Site{Name: name, RegionID: r.Base().ResourceID})
			if err != nil {
				t.Fatal(err)
			}
			return s.Base().ResourceID
		}
		plant, shop := site("plant"), site("shop")
		inPlant := func(h *eim.Host) { h.SiteID = plant }
		a, b := e.host(inPlant), e.host(inPlant)
		c := e.host(func(h *eim.Host) { h.SiteID = shop })
		hw := func(addrs ...string) *hostv1.Hardware {
			nic := &hostv1.Nic{DeviceName: "eth0"}
			for _, ad := range addrs {
				nic.IpAddresses = append(nic.IpAddresses, &hostv1.IpAddress{Address: ad})
			}
			return &hostv1.Hardware{Nics: []*hostv1.Nic{nic}}
		}
		for _, x := range []struct {
			h     *eim.Host
			addrs []string
		}{
			{a, []string{"10.1.0.5/24", "fe80::1/64"}},
			{c, []string{"10.1.0.5/24"}},
			{b, []string{"10.1.0.5/16", "fe80::1/64", "10.1.0.6/24"}},
		} {
			if _, err := e.report(x.h, hw(x.addrs...)); err != nil {
				t.Fatal(err)
			}
		}
		status := func(h *eim.Host, addr string) eim.IPAddress {
			t.Helper()
			for _, ip := range e.getHost(h.ResourceID).HostNics[0].IPAddresses {
				if ip.Address == addr {
					return ip
				}
			}
			t.Fatalf("%s has no %s", h.ResourceID, addr)
			return eim.IPAddress{}
		}
		ipA, ipB := status(a, "10.1.0.5/24"), status(b, "10.1.0.5/16")
		if ipA.Status != eim.IPAddressStatusConfigurationError || !strings.Contains(ipA.StatusDetail, b.ResourceID+" (eth0)") {
			t.Errorf("a's address: %+v, want a duplicate naming %s", ipA, b.ResourceID)
		}
		if ipB.Status != eim.IPAddressStatusConfigurationError || !strings.Contains(ipB.StatusDetail, a.ResourceID+" (eth0)") {
			t.Errorf("b's address: %+v, want a duplicate naming %s", ipB, a.ResourceID)
		}
		for _, x := range []struct {
			h    *eim.Host
			addr string
		}{{c, "10.1.0.5/24"}, {a, "fe80::1/64"}, {b, "fe80::1/64"}, {b, "10.1.0.6/24"}} {
			if ip := status(x.h, x.addr); ip.Status != eim.IPAddressStatusConfigured || ip.StatusDetail != "" {
				t.Errorf("%s %s: %+v, want configured", x.h.ResourceID, x.addr, ip)
			}
		}
		// b moves to another address: a's flag goes.
		if _, err := e.report(b, hw("10.1.0.7/16")); err != nil {
			t.Fatal(err)
		}
		if ip := status(a, "10.1.0.5/24"); ip.Status != eim.IPAddressStatusConfigured || ip.StatusDetail != "" {
			t.Errorf("a's address after b moved: %+v, want configured", ip)
		}

		// A user moves a to the shop, where c has its address: both are
		// flagged; then back to the plant, where nobody has it: both flags
		// go.
		move := func(h *eim.Host, site string) {
			t.Helper()
			if _, err := e.inv.Update(e.ctx, e.proj, &eim.Host{Meta: h.Meta, SiteID: site}, []string{"siteId"}); err != nil {
				t.Fatalf("move %s to %s: %v", h.ResourceID, site, err)
			}
		}
		move(a, shop)
		ipA, ipC := status(a, "10.1.0.5/24"), status(c, "10.1.0.5/24")
		if ipA.Status != eim.IPAddressStatusConfigurationError || !strings.Contains(ipA.StatusDetail, c.ResourceID+" (eth0)") {
			t.Errorf("a's address in the shop: %+v, want a duplicate naming %s", ipA, c.ResourceID)
		}
		if ipC.Status != eim.IPAddressStatusConfigurationError || !strings.Contains(ipC.StatusDetail, a.ResourceID+" (eth0)") {
			t.Errorf("c's address with a in the shop: %+v, want a duplicate naming %s", ipC, a.ResourceID)
		}
		move(a, plant)
		for _, h := range []*eim.Host{a, c} {
			if ip := status(h, "10.1.0.5/24"); ip.Status != eim.IPAddressStatusConfigured || ip.StatusDetail != "" {
				t.Errorf("%s's address after a moved back: %+v, want configured", h.ResourceID, ip)
			}
		}

		// b takes a's address again (a clash in the plant); then b is
		// removed: a's flag goes with it.
		if _, err := e.report(b, hw("10.1.0.5/16")); err != nil {
			t.Fatal(err)
		}
		if ip := status(a, "10.1.0.5/24"); ip.Status != eim.IPAddressStatusConfigurationError {
			t.Fatalf("a's address with b back on it: %+v, want a duplicate", ip)
		}
		// b's node was onboarded (it has credentials): its delete is two-phase.
		e.edit(b.ResourceID, func(h *eim.Host) { h.NodeSecretHash, h.NodeCredGen, h.CurrentState = "x", 1, eim.HostStateOnboarded })
		if err := e.inv.Delete(e.ctx, e.proj, eim.KindHost, b.ResourceID); err != nil {
			t.Fatal(err)
		}
		if ip := status(a, "10.1.0.5/24"); ip.Status != eim.IPAddressStatusConfigurationError {
			t.Errorf("a's address while b is being deleted: %+v, want still a duplicate (b's row is there)", ip)
		}
		if err := e.inv.ConfirmDeleted(e.ctx, e.proj, eim.KindHost, b.ResourceID); err != nil {
			t.Fatal(err)
		}
		if ip := status(a, "10.1.0.5/24"); ip.Status != eim.IPAddressStatusConfigured || ip.StatusDetail != "" {
			t.Errorf("a's address after b was removed: %+v, want configured", ip)
		}
	})
}
