package hostmgr

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/southbound"
)

// ReportHardware implements hostv1connect.HostServiceHandler: it stores the
// node's hardware inventory in its host. A report identical to the stored
// one (by digest) writes nothing; children that did not change keep their
// timestamps, and an IP address keeps its ID for as long as its interface
// reports it.
func (s *Service) ReportHardware(ctx context.Context, req *connect.Request[hostv1.ReportHardwareRequest]) (*connect.Response[hostv1.ReportHardwareResponse], error) {
	n, err := southbound.Caller(ctx)
	if err != nil {
		return nil, err
	}
	hw := req.Msg.Hardware
	if hw == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("hardware: required"))
	}
	if err := hwlimit.Validate(hw); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(eim.ErrorMessage(err)))
	}
	hw = canonical(hw)
	digest := hardwareDigest(hw)
	now := s.now()
	gen, _ := s.live.syncing(n.Project, n.HostID, now)
	_, err = s.store.ReportHardware(ctx, n.Project, n.HostID, digest, eim.NewTime(now), func(h *eim.Host) {
		applyHardware(h, hw, digest, eim.NewTime(now))
	})
	if err != nil {
		return nil, southbound.Error(ctx, s.log, "hostmgr: report hardware", err)
	}
	s.live.hardware(n.HostID, gen, digest)
	return connect.NewResponse(&hostv1.ReportHardwareResponse{Digest: digest}), nil
}

// hardware records the digest a host holds now.
func (t *tracker) hardware(id string, gen uint64, digest string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.find(id); e != nil && e.gen == gen {
		e.digest = digest
	}
}

// canonical returns hw with its lists in a fixed order, so that the same
// machine reported by agents that list in another order has one digest.
func canonical(hw *hostv1.Hardware) *hostv1.Hardware {
	hw = proto.Clone(hw).(*hostv1.Hardware)
	slices.SortStableFunc(hw.Storages, func(a, b *hostv1.Storage) int {
		return cmp.Or(cmp.Compare(a.DeviceName, b.DeviceName), cmp.Compare(a.Serial, b.Serial))
	})
	slices.SortStableFunc(hw.Nics, func(a, b *hostv1.Nic) int { return cmp.Compare(a.DeviceName, b.DeviceName) })
	for _, nic := range hw.Nics {
		slices.SortStableFunc(nic.IpAddresses, func(a, b *hostv1.IpAddress) int { return cmp.Compare(a.Address, b.Address) })
	}
	slices.SortStableFunc(hw.Usbs, func(a, b *hostv1.Usb) int {
		return cmp.Or(cmp.Compare(a.Bus, b.Bus), cmp.Compare(a.Addr, b.Addr))
	})
	slices.SortStableFunc(hw.Gpus, func(a, b *hostv1.Gpu) int { return cmp.Compare(a.PciId, b.PciId) })
	if hw.Cpu != nil {
		slices.Sort(hw.Cpu.Capabilities)
		hw.Cpu.Capabilities = slices.Compact(hw.Cpu.Capabilities)
	}
	return hw
}

// hardwareDigest names a canonical report: the SHA-256 of its
// deterministic encoding.
func hardwareDigest(hw *hostv1.Hardware) string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(hw)
	if err != nil {
		panic(fmt.Sprintf("hostmgr: marshal hardware: %v", err)) // a valid message always marshals
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// applyHardware writes a canonical report into h. Children are matched to
// the stored ones by device name (storage, NICs), bus and address (USB),
// PCI ID (GPUs) and address (IPs): one that is equal keeps its timestamps,
// one that changed keeps its creation time.
func applyHardware(h *eim.Host, hw *hostv1.Hardware, digest string, now eim.Time) {
	h.HardwareDigest = digest
	h.ProductName = hw.ProductName
	if hw.Hostname != "" {
		h.Hostname = hw.Hostname
	}
	c := hw.Cpu
	if c == nil {
		c = &hostv1.Cpu{}
	}
	h.CPUModel, h.CPUArchitecture = c.Model, c.Architecture
	h.CPUSockets, h.CPUCores, h.CPUThreads = c.Sockets, c.Cores, c.Threads
	h.CPUCapabilities, h.CPUTopology = strings.Join(c.Capabilities, ","), c.TopologyJson
	h.MemoryBytes = hw.MemoryBytes
	b := hw.Bios
	if b == nil {
		b = &hostv1.Bios{}
	}
	h.BiosVendor, h.BiosVersion, h.BiosReleaseDate = b.Vendor, b.Version, b.ReleaseDate

	h.HostStorages = diff(h.HostStorages, hw.Storages, now,
		func(d eim.HostStorage) string { return d.DeviceName + "\x00" + d.Serial },
		func(d *hostv1.Storage) string { return d.DeviceName + "\x00" + d.Serial },
		func(d *hostv1.Storage, old *eim.HostStorage) eim.HostStorage {
			return eim.HostStorage{Wwid: d.Wwid, Serial: d.Serial, Vendor: d.Vendor, Model: d.Model, CapacityBytes: d.CapacityBytes, DeviceName: d.DeviceName}
		},
		func(d *eim.HostStorage) *eim.Timestamps { return &d.Timestamps })
	h.HostNics = diff(h.HostNics, hw.Nics, now,
		func(d eim.HostNic) string { return d.DeviceName },
		func(d *hostv1.Nic) string { return d.DeviceName },
		func(d *hostv1.Nic, old *eim.HostNic) eim.HostNic { return nicOf(d, old, now) },
		func(d *eim.HostNic) *eim.Timestamps { return &d.Timestamps })
	h.HostUsbs = diff(h.HostUsbs, hw.Usbs, now,
		func(d eim.HostUsb) string { return fmt.Sprint(d.Bus, ".", d.Addr) },
		func(d *hostv1.Usb) string { return fmt.Sprint(d.Bus, ".", d.Addr) },
		func(d *hostv1.Usb, old *eim.HostUsb) eim.HostUsb {
			return eim.HostUsb{IDVendor: d.IdVendor, IDProduct: d.IdProduct, Bus: d.Bus, Addr: d.Addr, Class: d.Class, Serial: d.Serial, DeviceName: d.DeviceName}
		},
		func(d *eim.HostUsb) *eim.Timestamps { return &d.Timestamps })
	h.HostGpus = diff(h.HostGpus, hw.Gpus, now,
		func(d eim.HostGpu) string { return d.PciID },
		func(d *hostv1.Gpu) string { return d.PciId },
		func(d *hostv1.Gpu, old *eim.HostGpu) eim.HostGpu {
			return eim.HostGpu{PciID: d.PciId, Product: d.Product, Vendor: d.Vendor, Description: d.Description, DeviceName: d.DeviceName, Capabilities: eim.List[string](slices.Clone(d.Capabilities))}
		},
		func(d *eim.HostGpu) *eim.Timestamps { return &d.Timestamps })
}

// nicOf converts a reported NIC, carrying over from old (the stored NIC of
// that name, or nil) the link state's and the addresses' identity and
// timestamps.
func nicOf(d *hostv1.Nic, old *eim.HostNic, now eim.Time) eim.HostNic {
	n := eim.HostNic{DeviceName: d.DeviceName, PciIdentifier: d.PciIdentifier, MacAddr: d.MacAddress,
		SriovEnabled: d.SriovEnabled, SriovVfsNum: d.SriovVfsNum, SriovVfsTotal: d.SriovVfsTotal, Mtu: d.Mtu, BmcInterface: d.BmcInterface}
	n.LinkState.Type = eim.LinkStateDown
	if d.LinkUp {
		n.LinkState.Type = eim.LinkStateUp
	}
	var oldIPs eim.List[eim.IPAddress]
	if old != nil {
		oldIPs = old.IPAddresses
		n.LinkState.Timestamps = old.LinkState.Timestamps
	}
	if old == nil || old.LinkState.Type != n.LinkState.Type {
		if n.LinkState.Timestamps.CreatedAt.IsZero() {
			n.LinkState.Timestamps.CreatedAt = now
		}
		n.LinkState.Timestamps.UpdatedAt = now
	}
	n.IPAddresses = diff(oldIPs, d.IpAddresses, now,
		func(a eim.IPAddress) string { return a.Address },
		func(a *hostv1.IpAddress) string { return a.Address },
		func(a *hostv1.IpAddress, prev *eim.IPAddress) eim.IPAddress {
			ip := eim.IPAddress{Address: a.Address, Status: eim.IPAddressStatusConfigured, ConfigMethod: configMethod(a.ConfigMethod)}
			if prev != nil {
				// Identity and the networking module's verdict stay.
				ip.ResourceID, ip.Status, ip.StatusDetail = prev.ResourceID, prev.Status, prev.StatusDetail
			} else {
				ip.ResourceID = eim.NewID(eim.KindIPAddress)
			}
			return ip
		},
		func(a *eim.IPAddress) *eim.Timestamps { return &a.Timestamps })
	return n
}

func configMethod(m hostv1.IpAddress_ConfigMethod) eim.IPAddressConfigMethod {
	switch m {
	case hostv1.IpAddress_CONFIG_METHOD_STATIC:
		return eim.IPConfigStatic
	case hostv1.IpAddress_CONFIG_METHOD_DYNAMIC:
		return eim.IPConfigDynamic
	}
	return eim.IPConfigUnspecified
}

// diff builds the new list of children from the reported ones: conv makes
// a child (given the stored one of the same key, or nil); a child equal to
// the stored one apart from timestamps keeps them, a changed one keeps its
// creation time, a new one is created now. Duplicate keys in a report keep
// their first entry.
func diff[S any, R any](old eim.List[S], reported []R, now eim.Time,
	oldKey func(S) string, newKey func(R) string, conv func(R, *S) S, ts func(*S) *eim.Timestamps) eim.List[S] {
	byKey := make(map[string]*S, len(old))
	for i := range old {
		byKey[oldKey(old[i])] = &old[i]
	}
	out := make(eim.List[S], 0, len(reported))
	seen := make(map[string]bool, len(reported))
	for _, r := range reported {
		k := newKey(r)
		if seen[k] {
			continue
		}
		seen[k] = true
		prev := byKey[k]
		c := conv(r, prev)
		t := ts(&c)
		switch {
		case prev == nil:
			t.CreatedAt, t.UpdatedAt = now, now
		default:
			*t = *ts(prev)
			if !equalChild(c, *prev, ts) {
				t.UpdatedAt = now
			}
		}
		out = append(out, c)
	}
	return out
}

// equalChild compares two children with their timestamps taken out.
func equalChild[S any](a, b S, ts func(*S) *eim.Timestamps) bool {
	*ts(&a), *ts(&b) = eim.Timestamps{}, eim.Timestamps{}
	return reflect.DeepEqual(a, b)
}
