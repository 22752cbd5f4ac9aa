package hardware

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// usbs reads /sys/bus/usb/devices itself: ghw's USB package has neither bus
// and device numbers nor serials. Every entry with an idVendor is a device
// (root hubs included, as lsusb lists them); "1-1:1.0" entries are the
// devices' interfaces.
func (c *collector) usbs(h *hostv1.Hardware) error {
	dir := c.path("/sys/bus/usb/devices")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no USB controller (or no driver for it)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ":") {
			continue
		}
		dev := filepath.Join(dir, e.Name())
		vendor, err := readString(filepath.Join(dev, "idVendor"))
		if err != nil {
			continue
		}
		read := func(name string) string {
			s, _ := readString(filepath.Join(dev, name))
			return s
		}
		u := &hostv1.Usb{
			IdVendor:   strings.ToLower(vendor),
			IdProduct:  strings.ToLower(read("idProduct")),
			Class:      read("bDeviceClass"),
			Serial:     read("serial"),
			DeviceName: read("product"),
		}
		u.Bus = decimal(read("busnum"))
		u.Addr = decimal(read("devnum"))
		h.Usbs = append(h.Usbs, u)
	}
	return nil
}

// decimal parses a decimal sysfs number, 0 when it is not one.
func decimal(s string) uint32 {
	v, _ := strconv.ParseUint(s, 10, 32)
	return uint32(v)
}
