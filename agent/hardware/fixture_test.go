package hardware_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fixture root is written at test time rather than kept under testdata/:
// sysfs is made of symbolic links and of names with colons (PCI addresses,
// udev's "b8:0"), which a module's files may not hold.

// pciIDsText is a cut of pci.ids for the fixture's GPU. (pcidb drops the
// subclasses of the file's last class, which in pci.ids is ff.)
const pciIDsText = `# fixture
8086  Intel Corporation
	3e92  CoffeeLake-S GT2 [UHD Graphics 630]
C 03  Display controller
	00  VGA compatible controller
C ff  Unassigned class
`

// writeRoot writes a fake machine under a new directory and returns it:
// two sockets of two cores of two threads (and an offline CPU), 256 MiB
// of online memory, a SATA disk known to udev, an NVMe disk known only to
// sysfs, loop/zram/device-mapper devices to skip, a PCI NIC with SR-IOV, a
// virtio NIC, a bridge, a veth and the loopback, three USB devices and an
// Intel GPU. With pciIDs false, the PCI name database is missing.
func writeRoot(t *testing.T, pciIDs bool) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/os-release": "NAME=\"Fixture Linux\"\nPRETTY_NAME=\"Fixture Linux 1.0 \\\"Edge\\\"\"\nID=fixture\n",
		"proc/meminfo":   "MemTotal:        1000000 kB\nMemFree:          500000 kB\n",

		"sys/devices/system/memory/block_size_bytes": "8000000\n",
		"sys/devices/system/memory/memory0/state":    "online\n",
		"sys/devices/system/memory/memory1/state":    "online\n",
		"sys/devices/system/memory/memory2/state":    "offline\n",

		"sys/class/dmi/id/product_name": "Fixture Box 9000\n",
		"sys/class/dmi/id/bios_vendor":  "Fixture BIOS Inc.\n",
		"sys/class/dmi/id/bios_version": "1.2.3\n",
		"sys/class/dmi/id/bios_date":    "01/02/2024\n",

		"sys/devices/pci0000:00/0000:00:17.0/ata1/block/sda/size":              "2000\n",
		"sys/devices/pci0000:00/0000:00:17.0/ata1/block/sda/dev":               "8:0\n",
		"sys/devices/pci0000:00/0000:00:17.0/ata1/block/sda/queue/rotational":  "0\n",
		"sys/devices/pci0000:00/0000:00:17.0/ata1/block/sda/device/vendor":     "ATA     \n",
		"sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/size":          "4096\n",
		"sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/wwid":          "eui.0025388b71b2c3d4\n",
		"sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/device/serial": "NVME-SER  \n",
		"sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/device/model":  "Fixture NVMe\n",
		"sys/devices/virtual/block/loop0/size":                                 "100\n",
		"sys/devices/virtual/block/zram0/size":                                 "100\n",
		"sys/devices/virtual/block/dm-0/size":                                  "100\n",
		"run/udev/data/b8:0":                                                   "E:ID_MODEL=FixtureDisk_1TB\nE:ID_SERIAL_SHORT=SER123\nE:ID_WWN_WITH_EXTENSION=0x5000c500a1b2c3d4\n",

		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/address":          "52:54:00:12:34:56\n",
		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/addr_assign_type": "0\n",
		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/mtu":              "9000\n",
		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/operstate":        "up\n",
		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/type":             "1\n",
		"sys/devices/pci0000:00/0000:00:19.0/sriov_totalvfs":            "8\n",
		"sys/devices/pci0000:00/0000:00:19.0/sriov_numvfs":              "4\n",
		// A random MAC: ghw leaves it out, sysfs has it.
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/address":          "aa:bb:cc:dd:ee:ff\n",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/addr_assign_type": "3\n",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/mtu":              "1500\n",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/operstate":        "down\n",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/type":             "1\n",
		"sys/devices/virtual/net/br0/address":                                   "02:00:00:00:00:01\n",
		"sys/devices/virtual/net/br0/mtu":                                       "1500\n",
		"sys/devices/virtual/net/br0/operstate":                                 "unknown\n",
		"sys/devices/virtual/net/br0/carrier":                                   "1\n",
		"sys/devices/virtual/net/br0/type":                                      "1\n",
		"sys/devices/virtual/net/veth0/mtu":                                     "1500\n",
		"sys/devices/virtual/net/veth0/type":                                    "1\n",
		"sys/devices/virtual/net/lo/mtu":                                        "65536\n",
		"sys/devices/virtual/net/lo/type":                                       "772\n",

		"sys/bus/usb/devices/usb1/idVendor":           "1d6b\n",
		"sys/bus/usb/devices/usb1/idProduct":          "0002\n",
		"sys/bus/usb/devices/usb1/busnum":             "1\n",
		"sys/bus/usb/devices/usb1/devnum":             "1\n",
		"sys/bus/usb/devices/usb1/bDeviceClass":       "09\n",
		"sys/bus/usb/devices/usb1/serial":             "0000:00:14.0\n",
		"sys/bus/usb/devices/usb1/product":            "xHCI Host Controller\n",
		"sys/bus/usb/devices/2-1/idVendor":            "0781\n",
		"sys/bus/usb/devices/2-1/idProduct":           "5581\n",
		"sys/bus/usb/devices/2-1/busnum":              "2\n",
		"sys/bus/usb/devices/2-1/devnum":              "2\n",
		"sys/bus/usb/devices/2-1/bDeviceClass":        "00\n",
		"sys/bus/usb/devices/2-1/serial":              "4C530001\n",
		"sys/bus/usb/devices/2-1/product":             " Ultra \n",
		"sys/bus/usb/devices/1-2/idVendor":            "046D\n",
		"sys/bus/usb/devices/1-2/idProduct":           "C52B\n",
		"sys/bus/usb/devices/1-2/busnum":              "1\n",
		"sys/bus/usb/devices/1-2/devnum":              "3\n",
		"sys/bus/usb/devices/1-2/bDeviceClass":        "00\n",
		"sys/bus/usb/devices/1-2/product":             "USB Receiver\n",
		"sys/bus/usb/devices/1-2:1.0/bInterfaceClass": "03\n",

		"sys/devices/pci0000:00/0000:00:02.0/modalias":                  "pci:v00008086d00003E92sv00001028sd0000085Abc03sc00i00\n",
		"sys/devices/pci0000:00/0000:00:02.0/drm/card0/dev":             "226:0\n",
		"sys/devices/pci0000:00/0000:00:02.0/drm/card0-HDMI-A-1/status": "connected\n",
	}
	// CPUs 0-7: socket (i/2)%2, core i%2; cpu8 is offline.
	var cpuinfo strings.Builder
	for i := range 8 {
		fmt.Fprintf(&cpuinfo, "processor\t: %d\nvendor_id\t: GenuineFixture\nmodel name\t: Fixture CPU @ 2.00GHz\nflags\t\t: fpu sse2  avx2 sse2 vmx\n\n", i)
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", i)
		files[dir+"physical_package_id"] = fmt.Sprintf("%d\n", (i/2)%2)
		files[dir+"core_id"] = fmt.Sprintf("%d\n", i%2)
	}
	files["proc/cpuinfo"] = cpuinfo.String()
	files["sys/devices/system/cpu/cpu8/online"] = "0\n"
	files["sys/devices/system/cpu/cpu8/topology/physical_package_id"] = "1\n"
	files["sys/devices/system/cpu/cpu8/topology/core_id"] = "2\n"
	if pciIDs {
		files["usr/share/misc/pci.ids"] = pciIDsText
	}
	links := map[string]string{
		"sys/block/sda":     "../devices/pci0000:00/0000:00:17.0/ata1/block/sda",
		"sys/block/nvme0n1": "../devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1",
		"sys/block/loop0":   "../devices/virtual/block/loop0",
		"sys/block/zram0":   "../devices/virtual/block/zram0",
		"sys/block/dm-0":    "../devices/virtual/block/dm-0",

		"sys/class/net/eth0":  "../../devices/pci0000:00/0000:00:19.0/net/eth0",
		"sys/class/net/ens4":  "../../devices/pci0000:00/0000:00:04.0/virtio1/net/ens4",
		"sys/class/net/br0":   "../../devices/virtual/net/br0",
		"sys/class/net/veth0": "../../devices/virtual/net/veth0",
		"sys/class/net/lo":    "../../devices/virtual/net/lo",
		"sys/devices/pci0000:00/0000:00:19.0/net/eth0/device":         "../../../0000:00:19.0",
		"sys/devices/pci0000:00/0000:00:19.0/subsystem":               "../../../bus/pci",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/net/ens4/device": "../../../virtio1",
		"sys/devices/pci0000:00/0000:00:04.0/virtio1/subsystem":       "../../../../bus/virtio",
		"sys/devices/pci0000:00/0000:00:04.0/subsystem":               "../../../bus/pci",

		"sys/class/drm/card0":              "../../devices/pci0000:00/0000:00:02.0/drm/card0",
		"sys/class/drm/card0-HDMI-A-1":     "../../devices/pci0000:00/0000:00:02.0/drm/card0-HDMI-A-1",
		"sys/bus/pci/devices/0000:00:02.0": "../../../devices/pci0000:00/0000:00:02.0",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range links {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
