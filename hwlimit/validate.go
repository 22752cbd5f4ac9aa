// Package hwlimit holds the limits of a node's hardware inventory
// (hostv1.Hardware), shared by both ends: the agent trims what it collected
// to them (Limit), the host module refuses a report that breaks them
// (Validate). It imports no hardware library, so the server links none.
package hwlimit

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// The limits of a Hardware message, as host.proto states them.
const (
	MaxStringBytes = 1024 // any string field
	MaxEntries     = 256  // any repeated field but a NIC's addresses
	MaxAddresses   = 64   // IP addresses of one NIC
)

// Validate returns an EINVALID error naming the first field of h that breaks
// a limit: a string longer than MaxStringBytes or not UTF-8, a list longer
// than its maximum or holding a nil entry, a NIC without a name, an IP
// address not in CIDR form or with an unknown configuration method, a USB
// id that is set but not 4 hex digits.
func Validate(h *hostv1.Hardware) error {
	if h == nil {
		return eim.Errorf(eim.EINVALID, "hardware: missing")
	}
	var c checker
	c.str("product_name", h.ProductName)
	c.str("hostname", h.Hostname)
	c.str("os_release", h.OsRelease)
	if cpu := h.Cpu; cpu != nil {
		c.str("cpu.model", cpu.Model)
		c.str("cpu.architecture", cpu.Architecture)
		c.strs("cpu.capabilities", cpu.Capabilities)
		c.str("cpu.topology_json", cpu.TopologyJson)
	}
	if b := h.Bios; b != nil {
		c.str("bios.vendor", b.Vendor)
		c.str("bios.version", b.Version)
		c.str("bios.release_date", b.ReleaseDate)
	}
	if c.list("storages", len(h.Storages), MaxEntries) {
		for i, s := range h.Storages {
			f := fmt.Sprintf("storages[%d]", i)
			if c.present(f, s != nil) {
				c.str(f+".device_name", s.DeviceName)
				c.str(f+".wwid", s.Wwid)
				c.str(f+".serial", s.Serial)
				c.str(f+".vendor", s.Vendor)
				c.str(f+".model", s.Model)
			}
		}
	}
	if c.list("nics", len(h.Nics), MaxEntries) {
		for i, n := range h.Nics {
			f := fmt.Sprintf("nics[%d]", i)
			if !c.present(f, n != nil) {
				continue
			}
			if n.DeviceName == "" {
				c.fail(f+".device_name", "required")
			}
			c.str(f+".device_name", n.DeviceName)
			c.str(f+".pci_identifier", n.PciIdentifier)
			c.str(f+".mac_address", n.MacAddress)
			if c.list(f+".ip_addresses", len(n.IpAddresses), MaxAddresses) {
				for j, a := range n.IpAddresses {
					fa := fmt.Sprintf("%s.ip_addresses[%d]", f, j)
					if c.present(fa, a != nil) {
						c.cidr(fa+".address", a.Address)
						if _, ok := hostv1.IpAddress_ConfigMethod_name[int32(a.ConfigMethod)]; !ok {
							c.fail(fa+".config_method", "unknown value %d", a.ConfigMethod)
						}
					}
				}
			}
		}
	}
	if c.list("usbs", len(h.Usbs), MaxEntries) {
		for i, u := range h.Usbs {
			f := fmt.Sprintf("usbs[%d]", i)
			if c.present(f, u != nil) {
				c.usbID(f+".id_vendor", u.IdVendor)
				c.usbID(f+".id_product", u.IdProduct)
				c.str(f+".class", u.Class)
				c.str(f+".serial", u.Serial)
				c.str(f+".device_name", u.DeviceName)
			}
		}
	}
	if c.list("gpus", len(h.Gpus), MaxEntries) {
		for i, g := range h.Gpus {
			f := fmt.Sprintf("gpus[%d]", i)
			if c.present(f, g != nil) {
				c.str(f+".pci_id", g.PciId)
				c.str(f+".product", g.Product)
				c.str(f+".vendor", g.Vendor)
				c.str(f+".description", g.Description)
				c.str(f+".device_name", g.DeviceName)
				c.strs(f+".capabilities", g.Capabilities)
			}
		}
	}
	return c.err
}

// checker keeps the first failure of a Validate walk.
type checker struct{ err error }

func (c *checker) fail(field, format string, args ...any) {
	if c.err == nil {
		c.err = eim.Errorf(eim.EINVALID, "%s: %s", field, fmt.Sprintf(format, args...))
	}
}

func (c *checker) str(field, s string) {
	switch {
	case len(s) > MaxStringBytes:
		c.fail(field, "longer than %d bytes", MaxStringBytes)
	case !utf8.ValidString(s):
		c.fail(field, "not valid UTF-8")
	}
}

func (c *checker) strs(field string, ss []string) {
	if c.list(field, len(ss), MaxEntries) {
		for i, s := range ss {
			c.str(fmt.Sprintf("%s[%d]", field, i), s)
		}
	}
}

// list reports whether a list of n entries is within limit.
func (c *checker) list(field string, n, limit int) bool {
	if n > limit {
		c.fail(field, "more than %d entries", limit)
		return false
	}
	return true
}

func (c *checker) present(field string, ok bool) bool {
	if !ok {
		c.fail(field, "missing")
	}
	return ok
}

func (c *checker) cidr(field, s string) {
	if _, err := netip.ParsePrefix(s); err != nil {
		// %.64q: an address of a kilobyte of junk needs no echo in full.
		c.fail(field, "%.64q is not an address in CIDR form", s)
	}
}

func (c *checker) usbID(field, s string) {
	if s != "" && !isUSBID(s) {
		c.fail(field, "%.64q is not 4 hex digits", s)
		return
	}
	c.str(field, s)
}

func isUSBID(s string) bool {
	if len(s) != 4 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

// Limit makes h pass Validate, changing as little as it can: it replaces
// bytes that are not UTF-8 with U+FFFD, cuts long strings at a character
// boundary, drops nil entries, addresses that are not CIDR and the entries of
// a list past its maximum and NICs without a name, resets unknown address
// configuration methods, and clears USB ids that are not 4 hex digits.
// Lists should be sorted first, so the same entries are kept each time.
func Limit(h *hostv1.Hardware) {
	if h == nil {
		return
	}
	limitStr(&h.ProductName)
	limitStr(&h.Hostname)
	limitStr(&h.OsRelease)
	if cpu := h.Cpu; cpu != nil {
		limitStr(&cpu.Model)
		limitStr(&cpu.Architecture)
		cpu.Capabilities = limitStrs(cpu.Capabilities)
		limitStr(&cpu.TopologyJson)
	}
	if b := h.Bios; b != nil {
		limitStr(&b.Vendor)
		limitStr(&b.Version)
		limitStr(&b.ReleaseDate)
	}
	h.Storages = limitList(h.Storages, MaxEntries, func(s *hostv1.Storage) bool {
		for _, p := range []*string{&s.DeviceName, &s.Wwid, &s.Serial, &s.Vendor, &s.Model} {
			limitStr(p)
		}
		return true
	})
	h.Nics = limitList(h.Nics, MaxEntries, func(n *hostv1.Nic) bool {
		if n.DeviceName == "" {
			return false
		}
		limitStr(&n.DeviceName)
		limitStr(&n.PciIdentifier)
		limitStr(&n.MacAddress)
		n.IpAddresses = limitList(n.IpAddresses, MaxAddresses, func(a *hostv1.IpAddress) bool {
			if _, ok := hostv1.IpAddress_ConfigMethod_name[int32(a.ConfigMethod)]; !ok {
				a.ConfigMethod = hostv1.IpAddress_CONFIG_METHOD_UNSPECIFIED
			}
			_, err := netip.ParsePrefix(a.Address)
			return err == nil
		})
		return true
	})
	h.Usbs = limitList(h.Usbs, MaxEntries, func(u *hostv1.Usb) bool {
		for _, p := range []*string{&u.IdVendor, &u.IdProduct} {
			if !isUSBID(*p) {
				*p = ""
			}
		}
		for _, p := range []*string{&u.Class, &u.Serial, &u.DeviceName} {
			limitStr(p)
		}
		return true
	})
	h.Gpus = limitList(h.Gpus, MaxEntries, func(g *hostv1.Gpu) bool {
		for _, p := range []*string{&g.PciId, &g.Product, &g.Vendor, &g.Description, &g.DeviceName} {
			limitStr(p)
		}
		g.Capabilities = limitStrs(g.Capabilities)
		return true
	})
}

// limitList keeps the first limit entries that are not nil and that fix (which
// may change an entry) keeps.
func limitList[T any](list []*T, limit int, fix func(*T) bool) []*T {
	out := list[:0]
	for _, e := range list {
		if len(out) == limit {
			break
		}
		if e != nil && fix(e) {
			out = append(out, e)
		}
	}
	clear(list[len(out):]) // let dropped entries be collected
	return out
}

func limitStrs(ss []string) []string {
	if len(ss) > MaxEntries {
		ss = ss[:MaxEntries]
	}
	for i := range ss {
		limitStr(&ss[i])
	}
	return ss
}

func limitStr(s *string) {
	v := strings.ToValidUTF8(*s, "\uFFFD")
	if len(v) > MaxStringBytes {
		n := MaxStringBytes
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v = v[:n]
	}
	*s = v
}
