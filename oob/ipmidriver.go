package oob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/eimhq/eim/oob/ipmi"
)

// IPMI is the Driver of IPMI BMCs: oob/ipmi (ipmitool, lanplus) adapted to
// the protocol-neutral interface.
type IPMI struct {
	d *ipmi.Driver
	// cfg carries the per-command timeout (zero: ipmi.DefaultTimeout).
	cfg ipmi.Config
}

// NewIPMI returns the IPMI driver over d.
func NewIPMI(d *ipmi.Driver, o ipmi.Config) *IPMI { return &IPMI{d: d, cfg: o} }

// Open implements Driver. IPMI has no session to keep between commands
// (each ipmitool run opens and closes one), so Open only checks t.
func (p *IPMI) Open(_ context.Context, t Target) (Conn, error) {
	host, port := t.Address, 0
	if h, ps, err := net.SplitHostPort(t.Address); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil {
			return nil, &Error{Kind: Failed, Op: "open", Detail: fmt.Sprintf("address %q: bad port", t.Address)}
		}
		host, port = h, n
	}
	host = strings.Trim(host, "[]")
	cfg := p.cfg
	cfg.Host, cfg.Port, cfg.Username, cfg.Password = host, port, t.Username, t.Password
	b, err := p.d.BMC(cfg)
	if err != nil {
		return nil, &Error{Kind: Failed, Op: "open", Detail: err.Error(), Err: err}
	}
	return &ipmiConn{b: b}, nil
}

type ipmiConn struct{ b *ipmi.BMC }

// ipmiErr maps an oob/ipmi failure to this package's kinds.
func ipmiErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var e *ipmi.Error
	if !errors.As(err, &e) {
		return &Error{Kind: Failed, Op: op, Detail: err.Error(), Err: err}
	}
	k := Failed
	switch e.Kind {
	case ipmi.Unreachable:
		k = Unreachable
	case ipmi.BadCredentials:
		k = BadCredentials
	case ipmi.Unsupported:
		k = Unsupported
	}
	return &Error{Kind: k, Op: op, Detail: e.Error(), Err: err}
}

func (c *ipmiConn) PowerState(ctx context.Context) (PowerState, error) {
	s, err := c.b.PowerState(ctx)
	if err != nil {
		return "", ipmiErr("read power state", err)
	}
	if s == ipmi.On {
		return PowerOn, nil
	}
	return PowerOff, nil
}

func (c *ipmiConn) Power(ctx context.Context, a Action) error {
	var act ipmi.Action
	switch a {
	case ActionOn:
		act = ipmi.PowerOn
	case ActionGracefulOff:
		act = ipmi.PowerSoft
	case ActionForceOff:
		act = ipmi.PowerOff
	case ActionReset:
		act = ipmi.PowerReset
	case ActionPowerCycle:
		act = ipmi.PowerCycle
	default:
		return &Error{Kind: Unsupported, Op: "power " + strings.ToLower(string(a)), Detail: "IPMI has no such chassis control"}
	}
	return ipmiErr("power "+strings.ToLower(string(a)), c.b.Power(ctx, act))
}

func (c *ipmiConn) SetBoot(ctx context.Context, b Boot) error {
	var dev ipmi.BootDevice
	switch b.Target {
	case BootNone:
		// "chassis bootdev none": no override (a network-boot job's
		// CLEAR_BOOT), without options.
		return ipmiErr("set boot", c.b.SetBootDevice(ctx, ipmi.BootNone, true, false))
	case BootPXE:
		dev = ipmi.BootPXE
	case BootDisk:
		dev = ipmi.BootDisk
	case BootCD:
		dev = ipmi.BootCDROM
	case BootBIOS:
		dev = ipmi.BootBIOS
	default:
		return &Error{Kind: Unsupported, Op: "set boot", Detail: fmt.Sprintf("IPMI cannot boot from %s", b.Target)}
	}
	return ipmiErr("set boot", c.b.SetBootDevice(ctx, dev, b.Once, b.UEFI))
}

func (c *ipmiConn) Boot(ctx context.Context) (Boot, error) {
	b, err := c.b.BootDevice(ctx)
	if err != nil {
		return Boot{}, ipmiErr("read boot", err)
	}
	t := BootNone
	switch b.Device {
	case ipmi.BootPXE:
		t = BootPXE
	case ipmi.BootDisk:
		t = BootDisk
	case ipmi.BootCDROM:
		t = BootCD
	case ipmi.BootBIOS:
		t = BootBIOS
	}
	return Boot{Target: t, Once: b.Once, UEFI: b.UEFI}, nil
}

// Capabilities implements Conn: IPMI does not list what a BMC allows;
// these are the chassis controls and boot devices of the specification.
// The power state is read so that a BMC that does not answer is not
// reported as capable.
func (c *ipmiConn) Capabilities(ctx context.Context) (Capabilities, error) {
	if _, err := c.PowerState(ctx); err != nil {
		return Capabilities{}, err
	}
	return Capabilities{
		Actions:     []Action{ActionOn, ActionGracefulOff, ActionForceOff, ActionReset, ActionPowerCycle},
		BootTargets: []BootTarget{BootPXE, BootDisk, BootCD, BootBIOS},
	}, nil
}

func (c *ipmiConn) InsertMedia(context.Context, string) error {
	return &Error{Kind: Unsupported, Op: "insert media", Detail: "IPMI has no virtual media"}
}

func (c *ipmiConn) EjectMedia(context.Context) error {
	return &Error{Kind: Unsupported, Op: "eject media", Detail: "IPMI has no virtual media"}
}

func (c *ipmiConn) Close() error { return nil }
