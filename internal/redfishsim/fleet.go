package redfishsim

import (
	"context"
	"crypto/tls"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// A fleet is many BMCs, one per simulated host, each a BMC of its own (one
// system in memory) on its own HTTPS port of one address, as a site's
// BMCs each have their own address. They share one self-signed
// certificate, so that one CA bundle trusts them all. A share of them can
// be told to drop the first power-on they receive; every BMC records the
// reset requests it received (BMC.Actions), which is what tests and the
// benchmark check the module's site limit and resends against.

// FleetConfig describes a fleet.
type FleetConfig struct {
	N                  int    // the number of BMCs (at least 1)
	Addr               string // the address every BMC listens on (default 127.0.0.1), each on a port of its own
	Username, Password string // every BMC's account (default admin, redfish)
	// DropShare is the share (0 to 1) of the BMCs that drop the first
	// power-on they receive (answered 204, nothing done): spread evenly
	// over the fleet, round(N × DropShare) of them.
	DropShare float64
	Delay     time.Duration // how long PoweringOn and PoweringOff last
	On        bool          // the machines start powered on
}

// FleetBMC is one BMC of a fleet.
type FleetBMC struct {
	Index   int
	URL     string // https://addr:port
	BMC     *BMC
	Machine *Memory
	Drops   bool // set to drop its first power-on
}

// Fleet is a running fleet of BMCs.
type Fleet struct {
	BMCs     []*FleetBMC
	CertPEM  []byte // the certificate every BMC serves, to trust it as a CA bundle
	Username string
	Password string

	servers []*http.Server
	wg      sync.WaitGroup
}

// StartFleet starts cfg.N BMCs and serves them until Close.
func StartFleet(cfg FleetConfig) (*Fleet, error) {
	if cfg.N < 1 {
		return nil, errors.New("redfishsim: a fleet needs at least 1 BMC")
	}
	if cfg.DropShare < 0 || cfg.DropShare > 1 {
		return nil, fmt.Errorf("redfishsim: drop share %v is not between 0 and 1", cfg.DropShare)
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1"
	}
	if cfg.Username == "" {
		cfg.Username, cfg.Password = "admin", "redfish"
	}
	ip := net.ParseIP(cfg.Addr)
	cert, certPEM, err := selfSigned(ip)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	f := &Fleet{CertPEM: certPEM, Username: cfg.Username, Password: cfg.Password}
	quiet := log.New(io.Discard, "", 0)
	drops := dropSet(cfg.N, cfg.DropShare)
	for i := range cfg.N {
		m := NewMemory(MemoryConfig{On: cfg.On, Delay: cfg.Delay})
		fb := &FleetBMC{Index: i, Machine: m, Drops: drops[i]}
		bc := Config{Username: cfg.Username, Password: cfg.Password,
			Systems: []SystemConfig{{Machine: m, SerialNumber: fmt.Sprintf("FLEET%06d", i)}}}
		if fb.Drops {
			bc.Faults.DropPowerOns = 1
		}
		if fb.BMC, err = New(bc); err != nil {
			f.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Addr, "0"))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("redfishsim: BMC %d of %d: %w (raise the open files limit for large fleets)", i+1, cfg.N, err)
		}
		fb.URL = "https://" + ln.Addr().String()
		srv := &http.Server{Handler: fb.BMC, ErrorLog: quiet, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tc}
		f.servers = append(f.servers, srv)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			_ = srv.Serve(tls.NewListener(ln, tc))
		}()
		f.BMCs = append(f.BMCs, fb)
	}
	return f, nil
}

// dropSet marks round(n × share) of n indexes, spread evenly.
func dropSet(n int, share float64) []bool {
	out := make([]bool, n)
	want := int(float64(n)*share + 0.5)
	for k := range want {
		out[int(float64(k)*float64(n)/float64(want))] = true
	}
	return out
}

// Close stops every BMC and waits.
func (f *Fleet) Close() {
	for _, s := range f.servers {
		_ = s.Close()
	}
	f.wg.Wait()
}

// FleetCSVHeader is the header of WriteCSV's file.
var FleetCSVHeader = []string{"index", "address", "username", "password", "drops"}

// WriteCSV writes one line per BMC: its index, address (the https URL),
// account and whether it drops its first power-on — what registering a
// host with its BMC needs.
func (f *Fleet) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(FleetCSVHeader); err != nil {
		return err
	}
	for _, b := range f.BMCs {
		if err := cw.Write([]string{strconv.Itoa(b.Index), b.URL, f.Username, f.Password, strconv.FormatBool(b.Drops)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// FleetAction is a reset request one BMC of the fleet received.
type FleetAction struct {
	BMC    int       `json:"bmc"`
	At     time.Time `json:"at"`
	Type   ResetType `json:"type"`
	Result string    `json:"result"`
}

// Actions returns every BMC's reset requests, by time.
func (f *Fleet) Actions() []FleetAction {
	var out []FleetAction
	for _, b := range f.BMCs {
		for _, a := range b.BMC.Actions() {
			out = append(out, FleetAction{BMC: b.Index, At: a.At, Type: a.Type, Result: a.Result})
		}
	}
	slices.SortFunc(out, func(a, b FleetAction) int { return a.At.Compare(b.At) })
	return out
}

// IsPowerOn reports whether a reset type asks an off machine to power on
// (what a site's power-on limit counts; a power cycle too).
func IsPowerOn(t ResetType) bool {
	switch t {
	case ResetOn, ForceOn, PushPowerButton, PowerCycle:
		return true
	}
	return false
}

// FleetReport is what a fleet's records say of a power-on of the fleet.
type FleetReport struct {
	BMCs, On     int // BMCs, and machines reading On
	PowerOns     int // power-on requests received (done or dropped)
	Dropped      int // power-ons dropped
	Resent       int // BMCs that dropped one and received another, which was done
	NotResent    int // BMCs that dropped one and have no power-on done after it
	Extra        int // power-ons done beyond the first of a BMC (sent more than needed)
	MaxPerWindow int // the most power-ons received within any window
	WindowStart  time.Time
	First, Last  time.Time // the first and last power-on received
	Sessions     int       // sessions opened, over all the BMCs
}

// Report reads the fleet's records: how many power-ons each BMC received,
// and the most received within any window of length window (a sliding
// window: from each power-on, those less than window after it).
func (f *Fleet) Report(window time.Duration) FleetReport {
	r := FleetReport{BMCs: len(f.BMCs)}
	var times []time.Time
	for _, b := range f.BMCs {
		if st, _ := b.Machine.PowerState(context.Background()); st == PowerOn {
			r.On++
		}
		r.Sessions += b.BMC.SessionsOpened()
		dropped, done := false, 0
		for _, a := range b.BMC.Actions() {
			if !IsPowerOn(a.Type) {
				continue
			}
			switch a.Result {
			case "dropped":
				r.Dropped++
				dropped = true
			case "done":
				done++
			default:
				continue
			}
			r.PowerOns++
			times = append(times, a.At)
		}
		if dropped {
			if done > 0 {
				r.Resent++
			} else {
				r.NotResent++
			}
		}
		if done > 1 {
			r.Extra += done - 1
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	r.MaxPerWindow, r.WindowStart = MaxInWindow(times, window)
	if len(times) > 0 {
		r.First, r.Last = times[0], times[len(times)-1]
	}
	return r
}

// MaxInWindow returns the most of the sorted times that fall within one
// window [t, t+window) and the window's start.
func MaxInWindow(sorted []time.Time, window time.Duration) (int, time.Time) {
	best, start := 0, time.Time{}
	j := 0
	for i := range sorted {
		for j < len(sorted) && sorted[j].Sub(sorted[i]) < window {
			j++
		}
		if j-i > best {
			best, start = j-i, sorted[i]
		}
	}
	return best, start
}
