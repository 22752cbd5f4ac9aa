package hardware

import (
	"os"
	"strconv"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/pcidb"

	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// pciIDsPaths are where distributions install the PCI name database.
var pciIDsPaths = []string{
	"/usr/share/hwdata/pci.ids",
	"/usr/share/misc/pci.ids",
	"/usr/share/hwdata/pci.ids.gz",
	"/usr/share/misc/pci.ids.gz",
}

// gpus reports the DRM cards ("card0", …) with their PCI device. Vendor and
// product are pci.ids names or, without the database, their 4-digit IDs.
func (c *collector) gpus(h *hostv1.Hardware) error {
	info, err := ghw.GPU(ghw.WithPCIDB(c.pciDB())(c.ghw))
	if err != nil {
		return err
	}
	for _, card := range info.GraphicsCards {
		g := &hostv1.Gpu{PciId: card.Address}
		if card.Index >= 0 {
			g.DeviceName = "card" + strconv.Itoa(card.Index)
		}
		if d := card.DeviceInfo; d != nil {
			if d.Vendor != nil {
				g.Vendor = nameOrID(d.Vendor.Name, d.Vendor.ID)
			}
			if d.Product != nil {
				g.Product = nameOrID(d.Product.Name, d.Product.ID)
			}
			switch {
			case d.Subclass != nil && known(d.Subclass.Name) != "":
				g.Description = known(d.Subclass.Name)
			case d.Class != nil:
				g.Description = known(d.Class.Name)
			}
		}
		h.Gpus = append(h.Gpus, g)
	}
	return nil
}

// pciDB loads the PCI name database from a file under the root, or returns
// an empty one. It never lets pcidb fetch the database from the Internet:
// ghw, given no database, has pcidb look for one with options taken from
// the environment, and PCIDB_ENABLE_NETWORK_FETCH=1 there makes it download
// pci.ids. Here the path is explicit and fetching is off, which pcidb's
// option merging lets no environment variable override.
func (c *collector) pciDB() *pcidb.PCIDB {
	noFetch := false
	for _, p := range pciIDsPaths {
		path := c.path(p)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if db, err := pcidb.New(&pcidb.WithOption{Path: &path, EnableNetworkFetch: &noFetch}); err == nil {
			return db
		}
	}
	return &pcidb.PCIDB{}
}

func nameOrID(name, id string) string {
	if n := known(name); n != "" {
		return n
	}
	return id
}
