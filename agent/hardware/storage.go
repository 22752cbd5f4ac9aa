package hardware

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/jaypipes/ghw"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// virtualDisks name block devices that are memory or files, not disks.
var virtualDisks = []string{"loop", "ram", "zram"}

// storages reports the block devices that are disks: not loop, ram or zram
// devices, nor any other device the kernel keeps under /sys/devices/virtual
// (device mapper, md RAID, nbd), whose capacity is another disk's.
func (c *collector) storages(h *hostv1.Hardware) error {
	info, err := ghw.Block(c.ghw)
	if err != nil {
		return err
	}
	if info.Disks == nil {
		// ghw returns nil, not an empty list, when /sys/block cannot be read.
		_, err := os.ReadDir(c.path("/sys/block"))
		return err
	}
	for _, d := range info.Disks {
		if c.virtualDisk(d.Name) {
			continue
		}
		dir := c.path("/sys/block", d.Name)
		// udev's database (ghw's source) is missing in containers and early
		// boot; sysfs has most of the same.
		h.Storages = append(h.Storages, &hostv1.Storage{
			DeviceName:    d.Name,
			Wwid:          firstKnown(d.WWN, dir, "device/wwid", "wwid"),
			Serial:        firstKnown(d.SerialNumber, dir, "device/serial", "serial"),
			Vendor:        known(d.Vendor),
			Model:         firstKnown(d.Model, dir, "device/model"),
			CapacityBytes: d.SizeBytes,
		})
	}
	return nil
}

func (c *collector) virtualDisk(name string) bool {
	for _, p := range virtualDisks {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	link, err := os.Readlink(c.path("/sys/block", name))
	return err == nil && strings.Contains(link, "devices/virtual/")
}

// firstKnown returns v if ghw knew it, or else the first readable, non-empty
// file of dir among names.
func firstKnown(v, dir string, names ...string) string {
	if v = known(v); v != "" {
		return v
	}
	for _, n := range names {
		if s, err := readString(filepath.Join(dir, n)); err == nil && s != "" {
			return s
		}
	}
	return ""
}
