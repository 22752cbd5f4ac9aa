package hardware

import (
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"
)

func nlmsg(typ uint16, body []byte) []byte {
	b := make([]byte, syscall.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)+len(body)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	return append(b, body...)
}

func rtattr(typ uint16, v []byte) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func ifaddr(family, bits byte, index uint32, attrs ...[]byte) []byte {
	b := []byte{family, bits, 0, 0, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(b[4:], index)
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// cacheinfo has the given valid lifetime (0xffffffff: forever).
func cacheinfo(valid uint32) []byte {
	b := make([]byte, 16)
	binary.NativeEndian.PutUint32(b[0:], valid) // preferred
	binary.NativeEndian.PutUint32(b[4:], valid)
	return rtattr(syscall.IFA_CACHEINFO, b)
}

func TestParseAddrDump(t *testing.T) {
	var rib []byte
	for _, m := range [][]byte{
		// A DHCP lease.
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET, 24, 2,
			rtattr(syscall.IFA_ADDRESS, ip("10.0.0.5")), rtattr(syscall.IFA_LOCAL, ip("10.0.0.5")), cacheinfo(3600))),
		// Set by hand.
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET6, 64, 2,
			rtattr(syscall.IFA_ADDRESS, ip("2001:db8::5")), cacheinfo(0xffffffff))),
		// SLAAC.
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET6, 64, 2,
			rtattr(syscall.IFA_ADDRESS, ip("2001:db8::abcd")), cacheinfo(86400))),
		// Point to point: IFA_ADDRESS is the peer.
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET, 32, 3,
			rtattr(syscall.IFA_LOCAL, ip("10.9.0.1")), rtattr(syscall.IFA_ADDRESS, ip("10.9.0.2")), cacheinfo(600))),
		// No lifetimes at all.
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET, 8, 4, rtattr(syscall.IFA_ADDRESS, ip("10.1.1.1")))),
		nlmsg(syscall.RTM_NEWLINK, ifaddr(syscall.AF_INET, 8, 5, rtattr(syscall.IFA_ADDRESS, ip("10.2.2.2")), cacheinfo(1))),
		nlmsg(syscall.NLMSG_DONE, []byte{0, 0, 0, 0}),
		nlmsg(syscall.RTM_NEWADDR, ifaddr(syscall.AF_INET, 8, 6, rtattr(syscall.IFA_ADDRESS, ip("10.3.3.3")), cacheinfo(1))),
	} {
		rib = append(rib, m...)
	}
	got, err := parseAddrDump(rib)
	if err != nil {
		t.Fatal(err)
	}
	want := map[addrKey]bool{
		{2, netip.MustParseAddr("10.0.0.5")}:       true,
		{2, netip.MustParseAddr("2001:db8::abcd")}: true,
		{3, netip.MustParseAddr("10.9.0.1")}:       true,
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("got %v, want %v among them", got, k)
		}
	}
}

func TestDynamicAddrsLive(t *testing.T) {
	if _, err := dynamicAddrs(); err != nil {
		t.Errorf("dynamicAddrs: %v", err)
	}
}
