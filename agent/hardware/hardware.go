// Package hardware collects a node's hardware inventory (the host.v1
// Hardware message the agent sends with ReportHardware) and holds the
// message's limits (hwlimit), which the server checks.
//
// Collection reads Linux's /proc, /sys and /etc, through
// github.com/jaypipes/ghw for the parts it knows (CPU, memory, disks, NICs,
// GPUs, DMI) and directly for the rest (USB, MTU, link state, SR-IOV,
// os-release). It never runs programs and never uses the network: ghw's PCI
// name database is only read from the files under the root.
package hardware

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/jaypipes/ghw"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/hwlimit"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// Options tune Collect. The zero value reads the running machine.
type Options struct {
	// Root is where the machine's /proc, /sys, /etc and /run are found:
	// "" or "/" on a real machine, a fixture tree in tests, the host's root
	// mounted into a container.
	Root string
	// Hostname overrides os.Hostname (which always names the running
	// kernel's host, whatever Root is).
	Hostname string
	// Addresses returns the IP addresses of a network interface. nil asks the
	// running kernel, whatever Root is: addresses are not in /sys.
	Addresses func(iface string) ([]*hostv1.IpAddress, error)
	// Logger receives ghw's own diagnostics (mostly files it could not
	// read); nil drops them. Failures that matter come back from Collect.
	Logger *slog.Logger
}

// Collect reads the machine's hardware inventory. A part that cannot be read
// does not stop the others: Collect returns what it read, sorted and within
// the message limits, with an error joining each part's failure, so the
// caller can log the error and still send the inventory.
func Collect(ctx context.Context, opts Options) (*hostv1.Hardware, error) {
	c := newCollector(ctx, opts)
	h := &hostv1.Hardware{}
	var errs []error
	for _, p := range []struct {
		name string
		read func(*hostv1.Hardware) error
	}{
		{"product", c.product},
		{"hostname", c.hostname},
		{"os release", c.osRelease},
		{"cpu", c.cpu},
		{"memory", c.memory},
		{"bios", c.bios},
		{"storages", c.storages},
		{"nics", c.nics},
		{"usbs", c.usbs},
		{"gpus", c.gpus},
	} {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := guard(func() error { return p.read(h) }); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		}
	}
	sortLists(h)
	hwlimit.Limit(h)
	return h, errors.Join(errs...)
}

// Changed reports whether two inventories differ. Collect sorts its lists,
// so two collections of an unchanged machine are equal.
func Changed(a, b *hostv1.Hardware) bool { return !proto.Equal(a, b) }

// guard turns a panic into an error: ghw parses whatever the kernel (or a
// broken fixture) puts in /sys, and one odd file must not end the agent.
func guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// collector holds what every part needs.
type collector struct {
	opts Options
	root string
	// ghw is the context ghw's constructors get. Passing a context (rather
	// than options) also keeps ghw from reading GHW_* environment variables.
	ghw context.Context
}

func newCollector(ctx context.Context, opts Options) *collector {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := ctx
	for _, m := range []ghw.Modifier{
		ghw.WithChroot(root),
		ghw.WithLogger(logger),
		// ghw would run ethtool for NIC offload features we do not send.
		ghw.WithDisableTools(),
		// NUMA affinity is not part of the message.
		ghw.WithDisableTopology(),
	} {
		g = m(g)
	}
	return &collector{opts: opts, root: root, ghw: g}
}

// path is name (an absolute path like "/sys/class/net") under the root.
func (c *collector) path(name ...string) string {
	return filepath.Join(append([]string{c.root}, name...)...)
}

// readString reads a small sysfs or proc file, without its trailing newline.
func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// known maps ghw's placeholder for an unreadable value to "".
func known(s string) string {
	if s == "unknown" {
		return ""
	}
	return strings.TrimSpace(s)
}

func (c *collector) product(h *hostv1.Hardware) error {
	p, err := ghw.Product(c.ghw)
	if err != nil {
		return err
	}
	h.ProductName = known(p.Name)
	return nil
}

func (c *collector) hostname(h *hostv1.Hardware) error {
	if c.opts.Hostname != "" {
		h.Hostname = c.opts.Hostname
		return nil
	}
	name, err := os.Hostname()
	h.Hostname = name
	return err
}

func (c *collector) memory(h *hostv1.Hardware) error {
	m, err := ghw.Memory(c.ghw)
	if err != nil {
		return err
	}
	if m.TotalPhysicalBytes > 0 {
		h.MemoryBytes = uint64(m.TotalPhysicalBytes)
	}
	return nil
}

func (c *collector) bios(h *hostv1.Hardware) error {
	b, err := ghw.BIOS(c.ghw)
	if err != nil {
		return err
	}
	bios := &hostv1.Bios{Vendor: known(b.Vendor), Version: known(b.Version), ReleaseDate: known(b.Date)}
	// Machines without DMI (many VMs, most ARM boards) have no BIOS to tell.
	if bios.Vendor != "" || bios.Version != "" || bios.ReleaseDate != "" {
		h.Bios = bios
	}
	return nil
}

// uname maps GOARCH to the kernel's machine names: the agent is built for
// the machine it runs on.
var uname = map[string]string{
	"amd64":   "x86_64",
	"386":     "i686",
	"arm64":   "aarch64",
	"arm":     "armv7l",
	"loong64": "loongarch64",
	"mips64":  "mips64",
	"ppc64":   "ppc64",
	"ppc64le": "ppc64le",
	"riscv64": "riscv64",
	"s390x":   "s390x",
}

func architecture() string {
	if m, ok := uname[runtime.GOARCH]; ok {
		return m
	}
	return runtime.GOARCH
}

// sortLists orders every list so that equal machines give equal messages.
func sortLists(h *hostv1.Hardware) {
	slices.SortFunc(h.Storages, func(a, b *hostv1.Storage) int { return strings.Compare(a.DeviceName, b.DeviceName) })
	slices.SortFunc(h.Nics, func(a, b *hostv1.Nic) int { return strings.Compare(a.DeviceName, b.DeviceName) })
	for _, n := range h.Nics {
		slices.SortFunc(n.IpAddresses, compareAddresses)
	}
	slices.SortFunc(h.Usbs, func(a, b *hostv1.Usb) int {
		return cmp.Or(cmp.Compare(a.Bus, b.Bus), cmp.Compare(a.Addr, b.Addr))
	})
	slices.SortFunc(h.Gpus, func(a, b *hostv1.Gpu) int { return strings.Compare(a.PciId, b.PciId) })
}

// compareAddresses orders by address (IPv4 first), then prefix length. Text
// that is not CIDR (which Limit drops) comes first, by itself.
func compareAddresses(a, b *hostv1.IpAddress) int {
	pa, _ := netip.ParsePrefix(a.Address) // the zero Prefix when not CIDR
	pb, _ := netip.ParsePrefix(b.Address)
	return cmp.Or(pa.Addr().Compare(pb.Addr()), cmp.Compare(pa.Bits(), pb.Bits()), strings.Compare(a.Address, b.Address))
}
