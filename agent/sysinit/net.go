//go:build linux

package sysinit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/jsimonetti/rtnetlink/rtnl"
)

// Lease is the DHCP configuration an interface got.
type Lease struct {
	Interface string
	Addr      *net.IPNet
	Router    net.IP // nil: none
	DNS       []net.IP
	Server    net.IP
	Duration  time.Duration
}

func (l *Lease) String() string {
	s := fmt.Sprintf("%s %s", l.Interface, l.Addr)
	if l.Router != nil {
		s += " via " + l.Router.String()
	}
	return s
}

// Network brings up loopback and the machine's Ethernet interfaces, asks
// for a DHCP lease on each until one answers, configures that one
// (address, default route, /etc/resolv.conf) and returns its lease. It
// keeps trying, since interfaces appear as drivers probe, links come up
// late and servers answer late, until ctx ends.
func Network(ctx context.Context, log *slog.Logger) (*Lease, error) {
	rt, err := rtnl.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	defer rt.Close()
	if lo, err := net.InterfaceByName("lo"); err == nil {
		if err := rt.LinkUp(lo); err != nil {
			log.Warn("loopback not up", "err", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	won := make(chan *Lease, 1)
	tried := map[string]bool{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, ifc := range ethernet() {
			if tried[ifc.Name] {
				continue
			}
			tried[ifc.Name] = true
			if err := rt.LinkUp(&ifc); err != nil {
				log.Warn("interface not up", "interface", ifc.Name, "err", err)
				continue
			}
			log.Info("asking for a DHCP lease", "interface", ifc.Name, "mac", ifc.HardwareAddr.String())
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					l, err := request(ctx, ifc.Name)
					if err == nil {
						select {
						case won <- l:
						default:
						}
						return
					}
					if ctx.Err() == nil {
						log.Info("no DHCP lease yet", "interface", ifc.Name, "err", err)
					}
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}()
		}
		select {
		case l := <-won:
			stop()
			if err := configure(rt, l); err != nil {
				return nil, err
			}
			return l, nil
		case <-ctx.Done():
			stop()
			if len(tried) == 0 {
				return nil, errors.New("network: no Ethernet interface appeared (is its driver in the initramfs?)")
			}
			return nil, fmt.Errorf("network: no DHCP answer on %s", strings.Join(keys(tried), ", "))
		case <-tick.C:
		}
	}
}

// ethernet lists the interfaces with a MAC address, loopback excluded.
func ethernet() []net.Interface {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []net.Interface
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 && len(i.HardwareAddr) == 6 {
			out = append(out, i)
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// request runs one DHCP exchange (discover, offer, request, ack) on the
// interface. The client listens on a packet socket, so it hears the
// answers before the interface has an address.
func request(ctx context.Context, ifname string) (*Lease, error) {
	c, err := nclient4.New(ifname, nclient4.WithTimeout(2*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	l, err := c.Request(ctx)
	if err != nil {
		return nil, err
	}
	ack := l.ACK
	mask := ack.SubnetMask()
	if mask == nil {
		mask = ack.YourIPAddr.DefaultMask()
	}
	lease := &Lease{
		Interface: ifname,
		Addr:      &net.IPNet{IP: ack.YourIPAddr.To4(), Mask: mask},
		DNS:       ack.DNS(),
		Server:    ack.ServerIdentifier(),
		Duration:  ack.IPAddressLeaseTime(0),
	}
	if rs := ack.Router(); len(rs) > 0 {
		lease.Router = rs[0]
	}
	if lease.Addr.IP == nil || lease.Addr.IP.IsUnspecified() {
		return nil, fmt.Errorf("DHCP answer from %s without an address", lease.Server)
	}
	return lease, nil
}

// configure applies l to its interface.
func configure(rt *rtnl.Conn, l *Lease) error {
	ifc, err := net.InterfaceByName(l.Interface)
	if err != nil {
		return fmt.Errorf("network: %w", err)
	}
	if err := rt.AddrAdd(ifc, l.Addr); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("network: address %s on %s: %w", l.Addr, l.Interface, err)
	}
	if l.Router != nil {
		dst := net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
		if err := rt.RouteAdd(ifc, dst, l.Router); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("network: default route via %s: %w", l.Router, err)
		}
	}
	var b strings.Builder
	for _, ns := range l.DNS {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if err := os.MkdirAll("/etc", 0o755); err != nil {
		return err
	}
	if err := os.WriteFile("/etc/resolv.conf", []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("network: %w", err)
	}
	return nil
}
