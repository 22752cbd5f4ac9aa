package hwlimit_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", hwlimit.MaxStringBytes+1)
	addrs := func(n int) []*hostv1.IpAddress {
		var out []*hostv1.IpAddress
		for i := range n {
			out = append(out, &hostv1.IpAddress{Address: "10.0.0." + string(rune('0'+i%10)) + "/8"})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		change func(*hostv1.Hardware)
		want   string // "" for valid
	}{
		{"valid", func(*hostv1.Hardware) {}, ""},
		{"at the limits", func(h *hostv1.Hardware) {
			h.ProductName = strings.Repeat("é", hwlimit.MaxStringBytes/2)
			h.Nics[0].IpAddresses = addrs(hwlimit.MaxAddresses)
			h.Cpu.Capabilities = make([]string, hwlimit.MaxEntries)
		}, ""},
		{"empty", func(h *hostv1.Hardware) { proto.Reset(h) }, ""},
		{"long hostname", func(h *hostv1.Hardware) { h.Hostname = long }, "hostname: longer than 1024 bytes"},
		{"long serial", func(h *hostv1.Hardware) { h.Storages[0].Serial = long }, "storages[0].serial: longer than 1024 bytes"},
		{"long topology", func(h *hostv1.Hardware) { h.Cpu.TopologyJson = long }, "cpu.topology_json: longer than 1024 bytes"},
		{"long capability", func(h *hostv1.Hardware) { h.Cpu.Capabilities[1] = long }, "cpu.capabilities[1]: longer than 1024 bytes"},
		{"long bios", func(h *hostv1.Hardware) { h.Bios.ReleaseDate = long }, "bios.release_date: longer than 1024 bytes"},
		{"long gpu", func(h *hostv1.Hardware) { h.Gpus[0].Description = long }, "gpus[0].description: longer than 1024 bytes"},
		{"long usb", func(h *hostv1.Hardware) { h.Usbs[2].DeviceName = long }, "usbs[2].device_name: longer than 1024 bytes"},
		{"not UTF-8", func(h *hostv1.Hardware) { h.Nics[1].MacAddress = "\xff" }, "nics[1].mac_address: not valid UTF-8"},
		{"too many capabilities", func(h *hostv1.Hardware) { h.Cpu.Capabilities = make([]string, 257) }, "cpu.capabilities: more than 256 entries"},
		{"too many gpu capabilities", func(h *hostv1.Hardware) { h.Gpus[0].Capabilities = make([]string, 257) }, "gpus[0].capabilities: more than 256 entries"},
		{"too many storages", func(h *hostv1.Hardware) {
			for range 257 {
				h.Storages = append(h.Storages, &hostv1.Storage{})
			}
		}, "storages: more than 256 entries"},
		{"too many nics", func(h *hostv1.Hardware) { h.Nics = make([]*hostv1.Nic, 257) }, "nics: more than 256 entries"},
		{"too many usbs", func(h *hostv1.Hardware) { h.Usbs = make([]*hostv1.Usb, 257) }, "usbs: more than 256 entries"},
		{"too many gpus", func(h *hostv1.Hardware) { h.Gpus = make([]*hostv1.Gpu, 257) }, "gpus: more than 256 entries"},
		{"too many addresses", func(h *hostv1.Hardware) { h.Nics[2].IpAddresses = addrs(65) }, "nics[2].ip_addresses: more than 64 entries"},
		{"address without prefix", func(h *hostv1.Hardware) { h.Nics[2].IpAddresses[1].Address = "192.0.2.10" },
			`nics[2].ip_addresses[1].address: "192.0.2.10" is not an address in CIDR form`},
		{"address with zone", func(h *hostv1.Hardware) { h.Nics[0].IpAddresses[0].Address = "fe80::1%eth0/64" },
			`nics[0].ip_addresses[0].address: "fe80::1%eth0/64" is not an address in CIDR form`},
		{"empty address", func(h *hostv1.Hardware) { h.Nics[0].IpAddresses[0].Address = "" },
			`nics[0].ip_addresses[0].address: "" is not an address in CIDR form`},
		{"nil address", func(h *hostv1.Hardware) { h.Nics[0].IpAddresses[0] = nil }, "nics[0].ip_addresses[0]: missing"},
		{"nil storage", func(h *hostv1.Hardware) { h.Storages[1] = nil }, "storages[1]: missing"},
		{"usb vendor too short", func(h *hostv1.Hardware) { h.Usbs[0].IdVendor = "1d6" }, `usbs[0].id_vendor: "1d6" is not 4 hex digits`},
		{"usb product not hex", func(h *hostv1.Hardware) { h.Usbs[1].IdProduct = "c5zb" }, `usbs[1].id_product: "c5zb" is not 4 hex digits`},
		{"usb ids upper case", func(h *hostv1.Hardware) { h.Usbs[1].IdProduct = "C52B" }, ""},
		{"usb ids unset", func(h *hostv1.Hardware) { h.Usbs[1].IdVendor, h.Usbs[1].IdProduct = "", "" }, ""},
		{"first failure wins", func(h *hostv1.Hardware) {
			h.Gpus[0].PciId = long
			h.Storages[1].Model = long
		}, "storages[1].model: longer than 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sample()
			tc.change(h)
			err := hwlimit.Validate(h)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tc.want != "" && eim.ErrorMessage(err) != tc.want:
				t.Errorf("got %v, want %s", err, tc.want)
			case tc.want != "" && eim.ErrorCode(err) != eim.EINVALID:
				t.Errorf("got code %q, want %q", eim.ErrorCode(err), eim.EINVALID)
			}
		})
	}
	if err := hwlimit.Validate(nil); eim.ErrorCode(err) != eim.EINVALID {
		t.Errorf("Validate(nil) = %v, want an EINVALID error", err)
	}
}

func TestLimit(t *testing.T) {
	h := sample()
	h.Hostname = strings.Repeat("é", 600) // 1,200 bytes: cut between characters
	h.ProductName = "Box\xff9000"
	h.Nics[2].IpAddresses = append(h.Nics[2].IpAddresses, nil, &hostv1.IpAddress{Address: "junk"})
	for i := range 70 {
		h.Nics[0].IpAddresses = append(h.Nics[0].IpAddresses, &hostv1.IpAddress{Address: fmt.Sprintf("10.1.0.%d/16", i)})
	}
	h.Usbs[0].IdVendor = "xyz"
	h.Storages = append(h.Storages, nil)
	for range 300 {
		h.Gpus = append(h.Gpus, &hostv1.Gpu{PciId: "0000:00:03.0"})
	}
	h.Cpu.Capabilities = append(h.Cpu.Capabilities, make([]string, 300)...)
	hwlimit.Limit(h)
	if err := hwlimit.Validate(h); err != nil {
		t.Fatalf("Validate after Limit: %v", err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"hostname", h.Hostname, strings.Repeat("é", 512)},
		{"product_name", h.ProductName, "Box\uFFFD9000"},
		{"eth0 addresses", len(h.Nics[2].IpAddresses), 2},
		{"br0 addresses", len(h.Nics[0].IpAddresses), hwlimit.MaxAddresses},
		{"usb vendor", h.Usbs[0].IdVendor, ""},
		{"usb product", h.Usbs[0].IdProduct, "0002"},
		{"storages", len(h.Storages), 2},
		{"gpus", len(h.Gpus), hwlimit.MaxEntries},
		{"first gpu", h.Gpus[0].Product, "CoffeeLake-S GT2 [UHD Graphics 630]"},
		{"capabilities", len(h.Cpu.Capabilities), hwlimit.MaxEntries},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
	hwlimit.Limit(nil) // no panic
}

// FuzzValidate: Validate runs on the server against what nodes send. It
// must not panic, and Limit must make anything valid.
func FuzzValidate(f *testing.F) {
	for _, h := range []*hostv1.Hardware{sample(), {}} {
		b, err := proto.Marshal(h)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h hostv1.Hardware
		if proto.Unmarshal(b, &h) != nil {
			return
		}
		_ = hwlimit.Validate(&h)
		hwlimit.Limit(&h)
		if err := hwlimit.Validate(&h); err != nil {
			t.Fatalf("Validate after Limit: %v", err)
		}
		if _, err := proto.Marshal(&h); err != nil {
			t.Fatalf("Marshal after Limit: %v", err)
		}
	})
}

// sample is a valid inventory near the limits of nothing (the agent's
// fixture machine).
func sample() *hostv1.Hardware {
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
