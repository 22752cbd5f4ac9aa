package hostview

import (
	"encoding/hex"
	"math"
	"sync/atomic"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/intern"
)

// Host is what the view holds of one host: the fields of its row that
// its readers use — the modules answering nodes, and the projections
// over the fleet (the UI's summaries, the exporter's series) — and its
// instance's, read through its methods. It is never changed once
// returned: a change of the host or of its instance makes a new one.
//
// It is compact, for a process holds one per host of the fleet: the
// values many hosts share (project, site, states, indicators, status
// texts) are two-byte references into the process's table of interned
// strings (internal/intern), the status timestamps four bytes each, the
// host's own strings (ID, name, serial, UUID, hostname, boot ID,
// hardware digest) one allocation with two-byte offsets, and the node's
// secret hash its 32 raw bytes. A row that does not fit that shape (a
// timestamp past 2106, own strings over 64 KiB, a secret hash that is
// not lower-case hex SHA-256, the interning table full) is kept as plain
// values instead (wide), and reads the same.
type Host struct {
	own  string       // the own strings, one after the other
	ends [nOwn]uint16 // where each own string ends in own
	refs [nRef]intern.Ref
	ts   [nTS]uint32
	// createdAt is in unix milliseconds (0: not known).
	createdAt int64
	credGen   int64
	inst      *Instance
	wide      *wideHost // set: the row did not fit; every field is here

	memo atomic.Pointer[memos]
}

// The host's own strings, in own's order.
const (
	oID = iota
	oName
	oSerial
	oUUID
	oHostname
	oBootID
	oDigest
	oSecret // raw bytes in own; lower-case hex in wideHost
	nOwn
)

// The host's shared values, by ref.
const (
	rProject = iota
	rSite
	rDesired
	rCurrent
	rHostStatus
	rHostInd
	rBmcKind
	rDesiredPower
	rCurrentPower
	rPowerStatus
	rOnbStatus
	rOnbInd
	rRegStatus
	rRegInd
	nRef
)

// The host's status timestamps (unix seconds).
const (
	tPower = iota
	tHost
	tOnb
	tReg
	nTS
)

// wideHost holds a row that did not fit Host's compact shape.
type wideHost struct {
	own  [nOwn]string
	refs [nRef]string
	ts   [nTS]uint64
}

// The host's fields, as its row has them.

func (h *Host) ID() string           { return h.str(oID) }
func (h *Host) Name() string         { return h.str(oName) }
func (h *Host) SerialNumber() string { return h.str(oSerial) }
func (h *Host) UUID() string         { return h.str(oUUID) }
func (h *Host) Hostname() string     { return h.str(oHostname) }

// BootID is the boot of the node the host module last recorded.
func (h *Host) BootID() string { return h.str(oBootID) }

// HardwareDigest is the digest of the hardware inventory last recorded.
func (h *Host) HardwareDigest() string { return h.str(oDigest) }

// NodeSecretHash is the lower-case hex SHA-256 of the node's client
// secret ("" when it has none). It is made on each call.
func (h *Host) NodeSecretHash() string {
	if h.wide != nil {
		return h.wide.own[oSecret]
	}
	return hex.EncodeToString([]byte(h.str(oSecret)))
}

// HasSecret reports whether the node has a client secret, without
// making its text.
func (h *Host) HasSecret() bool { return h.str(oSecret) != "" }

func (h *Host) NodeCredGen() int64          { return h.credGen }
func (h *Host) Project() string             { return h.ref(rProject) }
func (h *Host) SiteID() string              { return h.ref(rSite) }
func (h *Host) DesiredState() eim.HostState { return eim.HostState(h.ref(rDesired)) }
func (h *Host) CurrentState() eim.HostState { return eim.HostState(h.ref(rCurrent)) }
func (h *Host) HostStatus() string          { return h.ref(rHostStatus) }
func (h *Host) HostStatusIndicator() eim.StatusIndication {
	return eim.StatusIndication(h.ref(rHostInd))
}
func (h *Host) HostStatusTimestamp() uint64 { return h.stamp(tHost) }
func (h *Host) BmcKind() eim.BaremetalControllerKind {
	return eim.BaremetalControllerKind(h.ref(rBmcKind))
}
func (h *Host) DesiredPowerState() eim.PowerState { return eim.PowerState(h.ref(rDesiredPower)) }
func (h *Host) CurrentPowerState() eim.PowerState { return eim.PowerState(h.ref(rCurrentPower)) }
func (h *Host) PowerStatus() string               { return h.ref(rPowerStatus) }
func (h *Host) PowerStatusTimestamp() uint64      { return h.stamp(tPower) }
func (h *Host) OnboardingStatus() string          { return h.ref(rOnbStatus) }
func (h *Host) OnboardingStatusIndicator() eim.StatusIndication {
	return eim.StatusIndication(h.ref(rOnbInd))
}
func (h *Host) OnboardingStatusTimestamp() uint64 { return h.stamp(tOnb) }
func (h *Host) RegistrationStatus() string        { return h.ref(rRegStatus) }
func (h *Host) RegistrationStatusIndicator() eim.StatusIndication {
	return eim.StatusIndication(h.ref(rRegInd))
}
func (h *Host) RegistrationStatusTimestamp() uint64 { return h.stamp(tReg) }

// CreatedAt is when the host was created, in unix milliseconds (0: not
// known).
func (h *Host) CreatedAt() int64 { return h.createdAt }

// Instance is the host's instance; nil: it has none.
func (h *Host) Instance() *Instance { return h.inst }

func (h *Host) str(i int) string {
	if h.wide != nil {
		return h.wide.own[i]
	}
	start := 0
	if i > 0 {
		start = int(h.ends[i-1])
	}
	return h.own[start:h.ends[i]]
}

func (h *Host) ref(i int) string {
	if h.wide != nil {
		return h.wide.refs[i]
	}
	return h.refs[i].String()
}

func (h *Host) stamp(i int) uint64 {
	if h.wide != nil {
		return h.wide.ts[i]
	}
	return uint64(h.ts[i])
}

// Instance is what the view holds of a host's instance, read through its
// methods, as compact as Host. It is never changed once returned.
type Instance struct {
	id        string
	refs      [nInstRef]intern.Ref
	ts        [nInstTS]uint32
	updAvail  bool
	createdAt int64
	wide      *wideInstance
}

const (
	irOS = iota
	irState
	irProv
	irProvInd
	irUpd
	irUpdInd
	nInstRef
)

const (
	itStatus = iota
	itProv
	nInstTS
)

type wideInstance struct {
	refs [nInstRef]string
	ts   [nInstTS]uint64
}

func (in *Instance) ID() string                      { return in.id }
func (in *Instance) OSID() string                    { return in.ref(irOS) }
func (in *Instance) CurrentState() eim.InstanceState { return eim.InstanceState(in.ref(irState)) }
func (in *Instance) InstanceStatusTimestamp() uint64 { return in.stamp(itStatus) }
func (in *Instance) ProvisioningStatus() string      { return in.ref(irProv) }
func (in *Instance) ProvisioningStatusIndicator() eim.StatusIndication {
	return eim.StatusIndication(in.ref(irProvInd))
}
func (in *Instance) ProvisioningStatusTimestamp() uint64 { return in.stamp(itProv) }
func (in *Instance) UpdateStatus() string                { return in.ref(irUpd) }
func (in *Instance) UpdateStatusIndicator() eim.StatusIndication {
	return eim.StatusIndication(in.ref(irUpdInd))
}

// OSUpdateAvailable reports whether the instance's OS has an update (its
// osUpdateAvailable text is not empty).
func (in *Instance) OSUpdateAvailable() bool { return in.updAvail }

// CreatedAt is when the instance was created, in unix milliseconds.
func (in *Instance) CreatedAt() int64 { return in.createdAt }

func (in *Instance) ref(i int) string {
	if in.wide != nil {
		return in.wide.refs[i]
	}
	return in.refs[i].String()
}

func (in *Instance) stamp(i int) uint64 {
	if in.wide != nil {
		return in.wide.ts[i]
	}
	return uint64(in.ts[i])
}

// equal reports whether in and o hold the same facts.
func (in *Instance) equal(o *Instance) bool {
	if in.id != o.id || in.updAvail != o.updAvail || in.createdAt != o.createdAt {
		return false
	}
	for i := range nInstRef {
		if in.ref(i) != o.ref(i) {
			return false
		}
	}
	for i := range nInstTS {
		if in.stamp(i) != o.stamp(i) {
			return false
		}
	}
	return true
}

// NewHost returns what a view keeps of host row h with its instance in
// (nil: none): for tests and tools outside the package, which cannot
// make a Host otherwise.
func NewHost(h *eim.Host, in *eim.Instance) *Host {
	r := eim.HostRowOf(h)
	n := factsOf(&r)
	if in != nil {
		ir := eim.InstanceRowOf(in)
		n.inst = instanceOf(&ir)
	}
	return n
}

// factsOf returns what the view keeps of a host row (without its
// instance).
func factsOf(r *eim.HostRow) *Host {
	own := [nOwn]string{r.ID, r.Name, r.SerialNumber, r.UUID, r.Hostname, r.BootID, r.HardwareDigest, r.NodeSecretHash}
	refs := [nRef]string{
		rProject: r.Project, rSite: r.SiteID,
		rDesired: string(r.DesiredState), rCurrent: string(r.CurrentState),
		rHostStatus: r.Status.Text, rHostInd: string(r.Status.Indicator),
		rBmcKind:      string(r.BmcKind),
		rDesiredPower: string(r.DesiredPowerState), rCurrentPower: string(r.CurrentPowerState),
		rPowerStatus: r.PowerStatus,
		rOnbStatus:   r.Onboarding.Text, rOnbInd: string(r.Onboarding.Indicator),
		rRegStatus: r.Registration.Text, rRegInd: string(r.Registration.Indicator),
	}
	ts := [nTS]uint64{tPower: r.PowerStatusTimestamp, tHost: r.Status.Timestamp, tOnb: r.Onboarding.Timestamp, tReg: r.Registration.Timestamp}
	h := &Host{createdAt: r.CreatedAt, credGen: r.NodeCredGen}
	if !h.pack(&own, &refs, &ts) {
		*h = Host{createdAt: h.createdAt, credGen: h.credGen, wide: &wideHost{own: own, refs: refs, ts: ts}}
	}
	return h
}

// pack sets h's compact fields, and reports whether the values fit them.
func (h *Host) pack(own *[nOwn]string, refs *[nRef]string, ts *[nTS]uint64) bool {
	var secret [32]byte
	s := own[oSecret]
	if s != "" {
		if !lowerHex(s) || len(s) != 2*len(secret) {
			return false
		}
		hex.Decode(secret[:], []byte(s))
	}
	size := 0
	for i, v := range own {
		if i == oSecret && v != "" {
			size += len(secret)
		} else {
			size += len(v)
		}
		if size > math.MaxUint16 {
			return false
		}
		h.ends[i] = uint16(size)
	}
	for i, v := range ts {
		if v > math.MaxUint32 {
			return false
		}
		h.ts[i] = uint32(v)
	}
	for i, v := range refs {
		r, ok := intern.Of(v)
		if !ok {
			return false
		}
		h.refs[i] = r
	}
	b := make([]byte, 0, size)
	for i, v := range own {
		if i == oSecret && v != "" {
			b = append(b, secret[:]...)
		} else {
			b = append(b, v...)
		}
	}
	h.own = string(b)
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// instanceOf returns what the view keeps of an instance row.
func instanceOf(r *eim.InstanceRow) *Instance {
	refs := [nInstRef]string{
		irOS: r.OSID, irState: string(r.CurrentState),
		irProv: r.Provisioning.Text, irProvInd: string(r.Provisioning.Indicator),
		irUpd: r.Update.Text, irUpdInd: string(r.Update.Indicator),
	}
	ts := [nInstTS]uint64{itStatus: r.StatusTimestamp, itProv: r.Provisioning.Timestamp}
	in := &Instance{id: r.ID, updAvail: r.UpdateAvailable, createdAt: r.CreatedAt}
	fits := true
	for i, v := range ts {
		if v > math.MaxUint32 {
			fits = false
			break
		}
		in.ts[i] = uint32(v)
	}
	for i, v := range refs {
		if !fits {
			break
		}
		in.refs[i], fits = intern.Of(v)
	}
	if !fits {
		in.refs, in.ts = [nInstRef]intern.Ref{}, [nInstTS]uint32{}
		in.wide = &wideInstance{refs: refs, ts: ts}
	}
	return in
}

// withInstance returns a copy of h's facts with instance in (nil: none),
// and no memo: a memo was computed from what h was.
func (h *Host) withInstance(in *Instance) *Host {
	return &Host{own: h.own, ends: h.ends, refs: h.refs, ts: h.ts, createdAt: h.createdAt, credGen: h.credGen, inst: in, wide: h.wide}
}
