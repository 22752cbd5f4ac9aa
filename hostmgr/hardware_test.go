package hostmgr_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

func sampleHardware() *hostv1.Hardware {
	return &hostv1.Hardware{
		ProductName: "NUC13ANHi7", Hostname: "edge-7", OsRelease: "Debian GNU/Linux 12 (bookworm)",
		Cpu: &hostv1.Cpu{Model: "13th Gen Intel(R) Core(TM) i7-1360P", Architecture: "x86_64", Sockets: 1, Cores: 12, Threads: 16,
			Capabilities: []string{"vmx", "avx2", "aes", "vmx"}, TopologyJson: `{"sockets":[]}`},
		MemoryBytes: 32 << 30,
		Bios:        &hostv1.Bios{Vendor: "Intel Corp.", Version: "ANRPL357.0031", ReleaseDate: "2024-03-01"},
		Storages: []*hostv1.Storage{
			{DeviceName: "sda", Serial: "S2", Model: "SSD 870", CapacityBytes: 1 << 40},
			{DeviceName: "nvme0n1", Serial: "S1", Wwid: "eui.0025", CapacityBytes: 512 << 30},
		},
		Nics: []*hostv1.Nic{{DeviceName: "enp86s0", MacAddress: "48:21:0b:12:34:56", Mtu: 1500, LinkUp: true, PciIdentifier: "0000:56:00.0",
			IpAddresses: []*hostv1.IpAddress{{Address: "192.0.2.7/24", ConfigMethod: hostv1.IpAddress_CONFIG_METHOD_DYNAMIC}, {Address: "2001:db8::7/64"}}}},
		Usbs: []*hostv1.Usb{{IdVendor: "8087", IdProduct: "0026", Bus: 3, Addr: 4, Class: "e0"}},
		Gpus: []*hostv1.Gpu{{PciId: "0000:00:02.0", Product: "Iris Xe", Vendor: "Intel", Capabilities: []string{"vga"}}},
	}
}

func (e *env) report(h *eim.Host, hw *hostv1.Hardware) (string, error) {
	resp, err := e.svc.ReportHardware(e.node(h), connect.NewRequest(&hostv1.ReportHardwareRequest{Hardware: hw}))
	if err != nil {
		return "", err
	}
	return resp.Msg.Digest, nil
}

// A report fills the host and its children; the same report again writes
// nothing; a changed report keeps what did not change (timestamps, the IDs
// of addresses) and the heartbeat asks for a report when the digest it
// carries is not the stored one.
func TestHardware(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		if !e.beat(e.svc, h, nil).SendHardware {
			t.Fatal("a host without hardware: send_hardware false")
		}
		digest, err := e.report(h, sampleHardware())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(digest, "sha256:") {
			t.Fatalf("digest %q", digest)
		}
		got := e.getHost(h.ResourceID)
		if got.CPUModel != "13th Gen Intel(R) Core(TM) i7-1360P" || got.CPUCores != 12 || got.CPUThreads != 16 || got.CPUSockets != 1 ||
			got.CPUCapabilities != "aes,avx2,vmx" || got.MemoryBytes != 32<<30 || got.BiosVersion != "ANRPL357.0031" ||
			got.ProductName != "NUC13ANHi7" || got.Hostname != "edge-7" || got.CPUArchitecture != "x86_64" {
			t.Fatalf("host fields: %+v", got)
		}
		if len(got.HostStorages) != 2 || got.HostStorages[0].DeviceName != "nvme0n1" || got.HostStorages[1].CapacityBytes != 1<<40 {
			t.Fatalf("storages %+v, want nvme0n1 then sda", got.HostStorages)
		}
		nic := got.HostNics[0]
		if len(got.HostNics) != 1 || nic.MacAddr != "48:21:0b:12:34:56" || nic.LinkState.Type != eim.LinkStateUp || len(nic.IPAddresses) != 2 {
			t.Fatalf("nics %+v", got.HostNics)
		}
		ip4 := nic.IPAddresses[0] // addresses sort as text
		if ip4.Address != "192.0.2.7/24" || !eim.ValidID(eim.KindIPAddress, ip4.ResourceID) || ip4.Status != eim.IPAddressStatusConfigured || ip4.ConfigMethod != eim.IPConfigDynamic {
			t.Fatalf("address %+v", ip4)
		}
		if len(got.HostUsbs) != 1 || got.HostUsbs[0].IDVendor != "8087" || len(got.HostGpus) != 1 || got.HostGpus[0].Product != "Iris Xe" {
			t.Fatalf("usbs %+v gpus %+v", got.HostUsbs, got.HostGpus)
		}
		if e.beat(e.svc, h, &hostv1.HeartbeatRequest{HardwareDigest: digest}).SendHardware {
			t.Fatal("heartbeat with the stored digest: send_hardware true")
		}

		// The same machine, its lists in another order: one digest, no write.
		rev := e.revision()
		shuffled := sampleHardware()
		shuffled.Storages[0], shuffled.Storages[1] = shuffled.Storages[1], shuffled.Storages[0]
		again, err := e.report(h, shuffled)
		if err != nil || again != digest {
			t.Fatalf("same hardware: digest %q, %v; want %q", again, err, digest)
		}
		if e.revision() != rev {
			t.Fatal("an unchanged report wrote the host")
		}

		// One address changes and a disk goes.
		e.clock.Add(time.Hour)
		changed := sampleHardware()
		changed.Storages = changed.Storages[1:] // sda stays, nvme0n1 goes
		changed.Nics[0].IpAddresses[0].Address = "192.0.2.8/24"
		d2, err := e.report(h, changed)
		if err != nil || d2 == digest {
			t.Fatalf("changed hardware: digest %q, %v", d2, err)
		}
		after := e.getHost(h.ResourceID)
		if len(after.HostStorages) != 1 || after.HostStorages[0].Timestamps != got.HostStorages[1].Timestamps {
			t.Fatalf("the unchanged disk: %+v, want its timestamps %+v kept", after.HostStorages, got.HostStorages[1].Timestamps)
		}
		ips := after.HostNics[0].IPAddresses
		if ips[1].ResourceID != nic.IPAddresses[1].ResourceID || ips[1].Timestamps != nic.IPAddresses[1].Timestamps {
			t.Fatalf("the unchanged IPv6 address %+v, want %+v", ips[1], nic.IPAddresses[1])
		}
		if ips[0].Address != "192.0.2.8/24" || ips[0].ResourceID == ip4.ResourceID || !ips[0].Timestamps.CreatedAt.Time.Equal(e.clock.Now()) {
			t.Fatalf("the new address %+v", ips[0])
		}
		if n := after.HostNics[0]; n.Timestamps.CreatedAt != nic.Timestamps.CreatedAt || !n.Timestamps.UpdatedAt.Time.Equal(e.clock.Now()) {
			t.Fatalf("the NIC whose address changed: %+v", n.Timestamps)
		}
		if e.beat(e.svc, h, &hostv1.HeartbeatRequest{HardwareDigest: digest}).SendHardware != true {
			t.Fatal("heartbeat with the old digest: send_hardware false")
		}
	})
}

// Bad reports are refused whole, naming the field; nothing is written.
func TestHardwareValidation(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		h := e.host(nil)
		for _, tc := range []struct {
			edit func(*hostv1.Hardware)
			want string
		}{
			{func(hw *hostv1.Hardware) { hw.ProductName = strings.Repeat("x", 1025) }, "product_name: longer than 1024 bytes"},
			{func(hw *hostv1.Hardware) { hw.Storages[1].Serial = "\xff" }, "storages[1].serial: not valid UTF-8"},
			{func(hw *hostv1.Hardware) { hw.Nics[0].IpAddresses[1].Address = "2001:db8::7" }, `nics[0].ip_addresses[1].address: "2001:db8::7" is not an address in CIDR form`},
			{func(hw *hostv1.Hardware) { hw.Nics[0].DeviceName = "" }, "nics[0].device_name: required"},
			{func(hw *hostv1.Hardware) {
				for range 300 {
					hw.Usbs = append(hw.Usbs, &hostv1.Usb{})
				}
			}, "usbs: more than 256 entries"},
		} {
			hw := sampleHardware()
			tc.edit(hw)
			_, err := e.report(h, hw)
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want InvalidArgument with %q", err, tc.want)
			}
		}
		if _, err := e.svc.ReportHardware(e.node(h), connect.NewRequest(&hostv1.ReportHardwareRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("no hardware: got %v, want InvalidArgument", err)
		}
		if got := e.getHost(h.ResourceID); got.HardwareDigest != "" || got.CPUModel != "" {
			t.Fatalf("refused reports wrote the host: %+v", got)
		}
	})
}
