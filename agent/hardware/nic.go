package hardware

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jaypipes/ghw"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// arphrdLoopback is /sys/class/net/*/type of a loopback interface.
const arphrdLoopback = "772"

// nics reports the interfaces backed by a device (/sys/class/net/X/device
// exists: PCI, virtio, USB NICs) and any other interface that has an IP
// address (a bridge or bond carrying the host's address), but never the
// loopback. Unaddressed virtual interfaces (veth, tap, ifb, a bridge's
// ports) come and go with workloads and say nothing about the machine.
func (c *collector) nics(h *hostv1.Hardware) error {
	// ghw returns no NICs, and no error, when /sys/class/net cannot be read.
	if _, err := os.ReadDir(c.path("/sys/class/net")); err != nil {
		return err
	}
	info, err := ghw.Network(c.ghw)
	if err != nil {
		return err
	}
	addrs := c.opts.Addresses
	if addrs == nil {
		addrs = liveAddresses()
	}
	var errs []error
	for _, n := range info.NICs {
		nic, err := c.nic(n, addrs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		}
		if nic != nil {
			h.Nics = append(h.Nics, nic)
		}
	}
	return errors.Join(errs...)
}

// nic returns nil for an interface not to report.
func (c *collector) nic(n *ghw.NIC, addrsOf func(string) ([]*hostv1.IpAddress, error)) (*hostv1.Nic, error) {
	dir := c.path("/sys/class/net", n.Name)
	if typ, _ := readString(filepath.Join(dir, "type")); typ == arphrdLoopback || n.Name == "lo" {
		return nil, nil
	}
	_, err := os.Stat(filepath.Join(dir, "device"))
	hasDevice := err == nil
	addrs, addrErr := addrsOf(n.Name)
	if !hasDevice && len(addrs) == 0 {
		// Also when addrErr is set: a virtual interface that is gone.
		return nil, nil
	}
	var errs []error
	if addrErr != nil {
		errs = append(errs, fmt.Errorf("addresses: %w", addrErr))
	}
	nic := &hostv1.Nic{
		DeviceName:    n.Name,
		PciIdentifier: c.pciAddress(n, dir),
		MacAddress:    n.MACAddress,
		IpAddresses:   addrs,
	}
	if nic.MacAddress == "" {
		// ghw leaves out random and assigned MACs; they are still the
		// interface's address.
		nic.MacAddress, _ = readString(filepath.Join(dir, "address"))
	}
	mtu, err := readUint32(filepath.Join(dir, "mtu"))
	if err != nil {
		errs = append(errs, err)
	}
	nic.Mtu = mtu
	oper, err := readString(filepath.Join(dir, "operstate"))
	if err != nil {
		errs = append(errs, err)
	}
	// Drivers without operational state report "unknown": then the carrier
	// tells.
	carrier, _ := readString(filepath.Join(dir, "carrier"))
	nic.LinkUp = oper == "up" || (oper == "unknown" && carrier == "1")
	// The SR-IOV files exist only for physical functions that can have VFs.
	if total, err := readUint32(filepath.Join(dir, "device", "sriov_totalvfs")); err == nil {
		nic.SriovVfsTotal = total
		num, err := readUint32(filepath.Join(dir, "device", "sriov_numvfs"))
		if err != nil {
			errs = append(errs, err)
		}
		nic.SriovVfsNum = num
		nic.SriovEnabled = num > 0
	}
	return nic, errors.Join(errs...)
}

// pciAddress returns ghw's PCI address of a NIC or, for a virtio NIC (whose
// device is a virtio device on a PCI one), the PCI device's.
func (c *collector) pciAddress(n *ghw.NIC, dir string) string {
	if n.PCIAddress != nil {
		return *n.PCIAddress
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
	if err != nil {
		return ""
	}
	sub, err := os.Readlink(filepath.Join(dev, "subsystem"))
	if err != nil || filepath.Base(sub) != "virtio" {
		return ""
	}
	parent := filepath.Base(filepath.Dir(dev))
	if ghw.PCIAddressFromString(parent) == nil {
		return ""
	}
	return parent
}

func readUint32(path string) (uint32, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return uint32(v), nil
}

// liveAddresses returns Options.Addresses' default: the running kernel's
// addresses of an interface, with the configuration method that one dump of
// the kernel's address table (made on first use) tells.
func liveAddresses() func(string) ([]*hostv1.IpAddress, error) {
	var dynamic map[addrKey]bool
	loaded := false
	return func(name string) ([]*hostv1.IpAddress, error) {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, err
		}
		list, err := ifi.Addrs()
		if err != nil {
			return nil, err
		}
		if !loaded {
			// Without the dump, every method is UNSPECIFIED: no error.
			dynamic, _ = dynamicAddrs()
			loaded = true
		}
		var out []*hostv1.IpAddress
		for _, a := range list {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			bits, _ := ipn.Mask.Size()
			method := hostv1.IpAddress_CONFIG_METHOD_UNSPECIFIED
			if dynamic[addrKey{ifi.Index, ip}] {
				method = hostv1.IpAddress_CONFIG_METHOD_DYNAMIC
			}
			out = append(out, &hostv1.IpAddress{Address: netip.PrefixFrom(ip, bits).String(), ConfigMethod: method})
		}
		return out, nil
	}
}

// addrKey names an address of an interface (by index).
type addrKey struct {
	index int
	addr  netip.Addr
}
