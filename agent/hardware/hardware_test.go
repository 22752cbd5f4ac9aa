package hardware_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/agent/hardware"
	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// The running machine: whatever it is, the inventory is sane, within the
// limits, and the same twice.
func TestCollectLive(t *testing.T) {
	h, err := hardware.Collect(t.Context(), hardware.Options{})
	if err != nil {
		// A container may hide parts of /sys: not a failure of the collector.
		t.Logf("partial inventory: %v", err)
	}
	if h == nil {
		t.Fatal("Collect returned no inventory")
	}
	t.Logf("cpu %q: %d sockets, %d cores, %d threads; memory %d bytes; %d storages, %d nics, %d usbs, %d gpus",
		h.GetCpu().GetModel(), h.GetCpu().GetSockets(), h.GetCpu().GetCores(), h.GetCpu().GetThreads(),
		h.MemoryBytes, len(h.Storages), len(h.Nics), len(h.Usbs), len(h.Gpus))
	if runtime.GOOS != "linux" {
		t.Skip("the collector reads Linux's /proc and /sys")
	}
	cpu := h.GetCpu()
	if cpu.GetCores() == 0 || cpu.GetThreads() < cpu.GetCores() || cpu.GetSockets() == 0 {
		t.Errorf("cpu: %d sockets, %d cores, %d threads; want sockets, cores > 0 and threads >= cores",
			cpu.GetSockets(), cpu.GetCores(), cpu.GetThreads())
	}
	if cpu.GetArchitecture() == "" || cpu.GetTopologyJson() == "" {
		t.Errorf("cpu: architecture %q, topology %q; want both", cpu.GetArchitecture(), cpu.GetTopologyJson())
	}
	if h.MemoryBytes == 0 {
		t.Error("memory_bytes: got 0")
	}
	if h.Hostname == "" {
		t.Error("hostname: got none")
	}
	if len(h.Nics) == 0 {
		// Only a machine whose interfaces are all virtual and unaddressed
		// (a network namespace with just the loopback) has none.
		ifs, _ := net.Interfaces()
		for _, ifi := range ifs {
			if addrs, _ := ifi.Addrs(); ifi.Flags&net.FlagLoopback == 0 && len(addrs) > 0 {
				t.Errorf("nics: none, but %s has addresses %v", ifi.Name, addrs)
			}
		}
	}
	if err := hwlimit.Validate(h); err != nil {
		t.Errorf("Validate: %v", err)
	}
	again, _ := hardware.Collect(t.Context(), hardware.Options{})
	if hardware.Changed(h, again) {
		t.Errorf("two collections differ:\n%s\n---\n%s", prototext.Format(h), prototext.Format(again))
	}
}

var errNoIface = errors.New("no such network interface")

// fixtureAddresses stands for the kernel's address table: ens4 cannot be
// read, the others are given unsorted.
func fixtureAddresses(iface string) ([]*hostv1.IpAddress, error) {
	switch iface {
	case "eth0":
		return []*hostv1.IpAddress{
			{Address: "2001:db8::5/64"},
			{Address: "192.0.2.10/24", ConfigMethod: hostv1.IpAddress_CONFIG_METHOD_DYNAMIC},
		}, nil
	case "br0":
		return []*hostv1.IpAddress{{Address: "10.0.0.1/24"}}, nil
	case "ens4":
		return nil, errNoIface
	}
	return nil, nil
}

func fixtureWant() *hostv1.Hardware {
	return &hostv1.Hardware{
		ProductName: "Fixture Box 9000",
		Hostname:    "fixture-host",
		OsRelease:   `Fixture Linux 1.0 "Edge"`,
		Cpu: &hostv1.Cpu{
			Model:        "Fixture CPU @ 2.00GHz",
			Sockets:      2,
			Cores:        4,
			Threads:      8,
			Capabilities: []string{"avx2", "fpu", "sse2", "vmx"},
			TopologyJson: `{"sockets":[` +
				`{"id":0,"cores":2,"cpus":"0-1,4-5","core_list":[{"id":0,"cpus":"0,4"},{"id":1,"cpus":"1,5"}]},` +
				`{"id":1,"cores":2,"cpus":"2-3,6-7","core_list":[{"id":0,"cpus":"2,6"},{"id":1,"cpus":"3,7"}]}]}`,
		},
		MemoryBytes: 2 * 128 << 20,
		Bios:        &hostv1.Bios{Vendor: "Fixture BIOS Inc.", Version: "1.2.3", ReleaseDate: "01/02/2024"},
		Storages: []*hostv1.Storage{
			{DeviceName: "nvme0n1", Wwid: "eui.0025388b71b2c3d4", Serial: "NVME-SER", Model: "Fixture NVMe", CapacityBytes: 4096 * 512},
			{DeviceName: "sda", Wwid: "0x5000c500a1b2c3d4", Serial: "SER123", Vendor: "ATA", Model: "FixtureDisk_1TB", CapacityBytes: 2000 * 512},
		},
		Nics: []*hostv1.Nic{
			{DeviceName: "br0", MacAddress: "02:00:00:00:00:01", Mtu: 1500, LinkUp: true,
				IpAddresses: []*hostv1.IpAddress{{Address: "10.0.0.1/24"}}},
			{DeviceName: "ens4", PciIdentifier: "0000:00:04.0", MacAddress: "aa:bb:cc:dd:ee:ff", Mtu: 1500},
			{DeviceName: "eth0", PciIdentifier: "0000:00:19.0", MacAddress: "52:54:00:12:34:56", Mtu: 9000, LinkUp: true,
				SriovEnabled: true, SriovVfsNum: 4, SriovVfsTotal: 8,
				IpAddresses: []*hostv1.IpAddress{
					{Address: "192.0.2.10/24", ConfigMethod: hostv1.IpAddress_CONFIG_METHOD_DYNAMIC},
					{Address: "2001:db8::5/64"},
				}},
		},
		Usbs: []*hostv1.Usb{
			{IdVendor: "1d6b", IdProduct: "0002", Bus: 1, Addr: 1, Class: "09", Serial: "0000:00:14.0", DeviceName: "xHCI Host Controller"},
			{IdVendor: "046d", IdProduct: "c52b", Bus: 1, Addr: 3, Class: "00", DeviceName: "USB Receiver"},
			{IdVendor: "0781", IdProduct: "5581", Bus: 2, Addr: 2, Class: "00", Serial: "4C530001", DeviceName: "Ultra"},
		},
		Gpus: []*hostv1.Gpu{{
			PciId: "0000:00:02.0", DeviceName: "card0", Vendor: "Intel Corporation",
			Product: "CoffeeLake-S GT2 [UHD Graphics 630]", Description: "VGA compatible controller",
		}},
	}
}

func TestCollectFixture(t *testing.T) {
	root := writeRoot(t, true)
	h, err := hardware.Collect(t.Context(), hardware.Options{Root: root, Hostname: "fixture-host", Addresses: fixtureAddresses})
	// ens4's addresses fail; the rest is collected.
	if !errors.Is(err, errNoIface) || !strings.Contains(err.Error(), "nics: ens4: addresses:") {
		t.Errorf("err = %v; want nics: ens4: addresses: %v", err, errNoIface)
	}
	if h.GetCpu().GetArchitecture() == "" || runtime.GOARCH == "amd64" && h.Cpu.Architecture != "x86_64" {
		t.Errorf("architecture %q for GOARCH %s", h.GetCpu().GetArchitecture(), runtime.GOARCH)
	}
	want := fixtureWant()
	if h.GetCpu() != nil {
		want.Cpu.Architecture = h.Cpu.Architecture
	}
	if !proto.Equal(h, want) {
		t.Errorf("got\n%s\nwant\n%s", prototext.Format(h), prototext.Format(want))
	}
	if err := hwlimit.Validate(h); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// Without pci.ids, GPUs are named by their IDs, and nothing is fetched from
// the Internet, even when the environment asks pcidb to.
func TestCollectNoPCIIDs(t *testing.T) {
	var dials atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	t.Setenv("PCIDB_ENABLE_NETWORK_FETCH", "1")
	t.Setenv("HTTPS_PROXY", "http://"+ln.Addr().String())
	t.Setenv("https_proxy", "http://"+ln.Addr().String())
	home := t.TempDir()
	t.Setenv("HOME", home)

	root := writeRoot(t, false)
	h, _ := hardware.Collect(t.Context(), hardware.Options{Root: root, Hostname: "fixture-host", Addresses: fixtureAddresses})
	want := []*hostv1.Gpu{{PciId: "0000:00:02.0", DeviceName: "card0", Vendor: "8086", Product: "3e92"}}
	if len(h.Gpus) != 1 || !proto.Equal(h.Gpus[0], want[0]) {
		t.Errorf("gpus: got %v, want %v", h.Gpus, want)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("%d connections to the proxy; want none", n)
	}
	if _, err := os.Stat(home + "/.cache/pci.ids"); err == nil {
		t.Error("pci.ids was fetched into $HOME/.cache")
	}
}

// An empty root: every part fails, none panics, each failure is named.
func TestCollectEmptyRoot(t *testing.T) {
	h, err := hardware.Collect(t.Context(), hardware.Options{Root: t.TempDir(), Hostname: "h", Addresses: fixtureAddresses})
	if h == nil || h.Hostname != "h" {
		t.Fatalf("got %v; want an inventory with the hostname", h)
	}
	for _, part := range []string{"os release:", "cpu:", "memory:", "storages:", "nics:"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("err = %v; want it to name %q", err, part)
		}
	}
	if err := hwlimit.Validate(h); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// A cancelled collection stops and says why.
func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h, err := hardware.Collect(ctx, hardware.Options{Root: writeRoot(t, true), Addresses: fixtureAddresses})
	if !errors.Is(err, context.Canceled) || h == nil {
		t.Errorf("got %v, %v; want an inventory and context.Canceled", h, err)
	}
}

func TestChanged(t *testing.T) {
	a, b := fixtureWant(), fixtureWant()
	if hardware.Changed(a, b) {
		t.Error("Changed(equal) = true")
	}
	b.Nics[2].IpAddresses[0].ConfigMethod = hostv1.IpAddress_CONFIG_METHOD_STATIC
	if !hardware.Changed(a, b) {
		t.Error("Changed(different config method) = false")
	}
}
