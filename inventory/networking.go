package inventory

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// The networking rule: an IP address is unique within a site. When two
// hosts of a site report the same address, the address is flagged on both
// (status CONFIGURATION_ERROR, naming the other host) and kept as reported,
// never overwritten; when the clash goes, so does the flag. Loopback and
// link-local addresses are per link and never clash; hosts without a site
// are not compared.
//
// The check runs over the hosts of one site, in the transaction of the
// write that can change a clash: a host's hardware report with new
// addresses (the host module calls CheckSiteAddresses), a host moved to
// another site (both sites), and a host removed (its site). Its cost
// follows the site, not the fleet, and nothing is paid while addresses and
// sites stay the same.

const duplicatePrefix = "duplicate: also on "

// CheckSiteAddresses recomputes the duplicate flags of every address in
// the site of h, with h as given (its addresses and site may be newer than
// its stored row), and writes the other hosts whose flags changed. h's own
// flags are set on h, which the caller writes.
func CheckSiteAddresses(ctx context.Context, tx eim.Tx, h *eim.Host, now eim.Time) error {
	if h.SiteID == "" {
		clearDuplicates(h, now)
		return nil
	}
	return flagSite(ctx, tx, h.SiteID, h, now)
}

// recheckSite recomputes the duplicate flags of the hosts stored in site
// (after one left it) and writes those whose flags changed.
func recheckSite(ctx context.Context, tx eim.Tx, site string, now eim.Time) error {
	if site == "" {
		return nil
	}
	return flagSite(ctx, tx, site, nil, now)
}

// flagSite flags the addresses of the hosts of site, with h (when not nil)
// in place of its stored row, and writes the hosts other than h whose
// flags changed.
func flagSite(ctx context.Context, tx eim.Tx, site string, h *eim.Host, now eim.Time) error {
	items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "siteId", Value: site}}, NoTotal: true})
	if err != nil {
		return fmt.Errorf("hosts of site %s: %w", site, err)
	}
	hosts := make([]*eim.Host, 0, len(items)+1)
	for _, r := range items {
		if o := r.(*eim.Host); h == nil || o.ResourceID != h.ResourceID {
			hosts = append(hosts, o)
		}
	}
	if h != nil {
		hosts = append(hosts, h)
	}
	// address → the hosts (and interfaces) reporting it
	owners := map[netip.Addr][]string{}
	for _, o := range hosts {
		for _, nic := range o.HostNics {
			for _, ip := range nic.IPAddresses {
				if a, ok := clashable(ip.Address); ok {
					owners[a] = append(owners[a], o.ResourceID+" ("+nic.DeviceName+")")
				}
			}
		}
	}
	for _, o := range hosts {
		if !flagDuplicates(o, owners, now) || o == h {
			continue
		}
		// Only the flags change, over the report they were computed on.
		w := &eim.Host{Meta: eim.Meta{ResourceID: o.ResourceID}, HostNics: o.HostNics}
		if err := tx.UpdateFieldsIf(ctx, w, []eim.Cond{{Field: "hardware_digest", Value: o.HardwareDigest}}, "hostNics"); err != nil {
			return fmt.Errorf("flag addresses of %s: %w", o.ResourceID, err)
		}
	}
	return nil
}

// hasAddresses reports whether h has an address that can clash.
func hasAddresses(h *eim.Host) bool {
	for _, nic := range h.HostNics {
		for _, ip := range nic.IPAddresses {
			if _, ok := clashable(ip.Address); ok {
				return true
			}
		}
	}
	return false
}

// clashable returns the address of a CIDR string, and whether it can
// clash with another host's.
func clashable(cidr string) (netip.Addr, bool) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, false
	}
	a := p.Addr().Unmap()
	return a, !(a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified())
}

// flagDuplicates sets the status of h's addresses from owners and reports
// whether any changed.
func flagDuplicates(h *eim.Host, owners map[netip.Addr][]string, now eim.Time) bool {
	changed := false
	for i := range h.HostNics {
		nic := &h.HostNics[i]
		for j := range nic.IPAddresses {
			ip := &nic.IPAddresses[j]
			status, detail := eim.IPAddressStatusConfigured, ""
			if a, ok := clashable(ip.Address); ok {
				// The same address on two interfaces of one host (a
				// bond, a bridge) is that host's business.
				mine := h.ResourceID + " ("
				var others []string
				for _, o := range owners[a] {
					if !strings.HasPrefix(o, mine) && !slices.Contains(others, o) {
						others = append(others, o)
					}
				}
				if len(others) > 0 {
					slices.Sort(others)
					status, detail = eim.IPAddressStatusConfigurationError, duplicatePrefix+strings.Join(others, ", ")
				}
			}
			if ip.Status != status || ip.StatusDetail != detail {
				ip.Status, ip.StatusDetail = status, detail
				ip.Timestamps.UpdatedAt = now
				changed = true
			}
		}
	}
	return changed
}

// clearDuplicates drops the duplicate flags of a host without a site.
func clearDuplicates(h *eim.Host, now eim.Time) {
	flagDuplicates(h, nil, now)
}
