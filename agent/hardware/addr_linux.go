package hardware

import (
	"encoding/binary"
	"math"
	"net/netip"
	"syscall"
)

// dynamicAddrs returns the kernel's addresses that have a finite valid
// lifetime: those a DHCP client or IPv6 autoconfiguration leased. An address
// set by hand lives forever, but so does one leased by a client that does not
// hand the lease to the kernel, so the others are not known to be STATIC.
func dynamicAddrs() (map[addrKey]bool, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, err
	}
	return parseAddrDump(rib)
}

// parseAddrDump reads an RTM_GETADDR dump: ifaddrmsg headers followed by
// attributes, of which IFA_CACHEINFO holds the lifetimes.
func parseAddrDump(rib []byte) (map[addrKey]bool, error) {
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, err
	}
	dynamic := map[addrKey]bool{}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type == syscall.NLMSG_DONE {
			break
		}
		if m.Header.Type != syscall.RTM_NEWADDR || len(m.Data) < syscall.SizeofIfAddrmsg {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			continue
		}
		var addr, local netip.Addr
		valid := uint32(math.MaxUint32) // forever
		for _, a := range attrs {
			switch a.Attr.Type {
			case syscall.IFA_ADDRESS:
				addr, _ = netip.AddrFromSlice(a.Value)
			case syscall.IFA_LOCAL:
				local, _ = netip.AddrFromSlice(a.Value)
			case syscall.IFA_CACHEINFO:
				// struct ifa_cacheinfo { ifa_prefered, ifa_valid, cstamp, tstamp }
				if len(a.Value) >= 8 {
					valid = binary.NativeEndian.Uint32(a.Value[4:8])
				}
			}
		}
		if local.IsValid() {
			addr = local // on point-to-point links IFA_ADDRESS is the peer's
		}
		if addr.IsValid() && valid != math.MaxUint32 {
			index := int(binary.NativeEndian.Uint32(m.Data[4:8])) // ifaddrmsg.ifa_index
			dynamic[addrKey{index, addr.Unmap()}] = true
		}
	}
	return dynamic, nil
}
