package eim

import (
	"context"
	"slices"
	"unicode/utf8"
)

// TxRunner runs fn in a read-write transaction scoped to project: a
// Store's Update, or a batch of the inventory's Batcher that shares one
// transaction among many callers. fn must be re-runnable (see
// Store.Update).
type TxRunner interface {
	DoIn(ctx context.Context, project string, fn func(Tx) error) error
}

// HostBeats are the host module's typed operations on its hosts: what a
// node's call or silence changes of its host, each operation reading and
// writing only those fields in a transaction of its own (run by the
// TxRunner the store was asked for them with, so that many nodes' calls
// share a commit). Their writes are recorded as any write of a host is:
// an event in the change feed and an audit record.
type HostBeats interface {
	// RecordBeat records a call of host id's node: it reads the host's
	// liveness, lets decide say what the call changes, and writes that
	// (only over what it read), all in one transaction. decide may run
	// more than once (a transaction that lost a race runs again) and must
	// be pure. It returns the liveness as written. ENOTFOUND when the host
	// does not exist in project; EINVALID naming the field when decide's
	// change is not a valid one.
	RecordBeat(ctx context.Context, project, id string, decide func(HostLiveness) LivenessChange) (HostLiveness, error)
	// RecordSilence is RecordBeat for a node that stopped calling: decide
	// also sees whether the host's instance is updating its OS (Updating,
	// UpdateTimestamp).
	RecordSilence(ctx context.Context, project, id string, decide func(HostLiveness) LivenessChange) (HostLiveness, error)
	// HostsInStatus returns one page (offset, limit) of the hosts of
	// project whose host status is status and was set at or before
	// before (unix seconds), oldest first, with their liveness.
	HostsInStatus(ctx context.Context, project, status string, before uint64, offset, limit int) ([]HostLiveness, error)
}

// StatusValue is a status as a host shows it: a text, its indicator and
// when it was set, in unix seconds (hostStatus, hostStatusIndicator,
// hostStatusTimestamp; likewise the power status).
type StatusValue struct {
	Text      string
	Indicator StatusIndication
	Timestamp uint64
}

// HostPower is what becomes of a host's power in band: its current power
// state and its power status.
type HostPower struct {
	Current PowerState
	Status  StatusValue
}

// HostLiveness are the fields of a host that its node's calls and silence
// decide on (the host module's), and what those decisions read.
type HostLiveness struct {
	ID, Project string
	Status      StatusValue // hostStatus
	Power       HostPower   // currentPowerState, powerStatus
	// What the decisions read and do not write.
	BmcKind           BaremetalControllerKind
	DesiredPowerState PowerState
	HardwareDigest    string
	// Updating: the host's instance is updating its OS, reported last at
	// UpdateTimestamp (unix seconds). Read by RecordSilence only.
	Updating        bool
	UpdateTimestamp uint64
}

// LivenessChange is what a decision writes of a host's liveness: each
// part that is not nil, whole. None: nothing is written.
type LivenessChange struct {
	Status *StatusValue
	Power  *HostPower
}

// Empty reports whether c writes nothing.
func (c LivenessChange) Empty() bool { return c.Status == nil && c.Power == nil }

// Apply returns l with c written.
func (c LivenessChange) Apply(l HostLiveness) HostLiveness {
	if c.Status != nil {
		l.Status = *c.Status
	}
	if c.Power != nil {
		l.Power = *c.Power
	}
	return l
}

// Check validates c, naming the field at fault.
func (c LivenessChange) Check() error {
	if c.Status != nil {
		if err := c.Status.check("hostStatus"); err != nil {
			return err
		}
	}
	if c.Power != nil {
		if !slices.Contains(c.Power.Current.Values(), string(c.Power.Current)) {
			return Errorf(EINVALID, "currentPowerState: %q is not one of %v", c.Power.Current, c.Power.Current.Values())
		}
		if err := c.Power.Status.check("powerStatus"); err != nil {
			return err
		}
	}
	return nil
}

// MaxStatusText is the longest status text a module may record, in
// characters.
const MaxStatusText = 1024

// check validates s as the status field named field: UTF-8 text of at most
// MaxStatusText characters and one of the indicator's values, or none
// (written as STATUS_INDICATION_UNSPECIFIED).
func (s StatusValue) check(field string) error {
	if !utf8.ValidString(s.Text) {
		return Errorf(EINVALID, "%s: not valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(s.Text); n > MaxStatusText {
		return Errorf(EINVALID, "%s: is %d characters long, at most %d allowed", field, n, MaxStatusText)
	}
	if s.Indicator != "" && !slices.Contains(s.Indicator.Values(), string(s.Indicator)) {
		return Errorf(EINVALID, "%sIndicator: %q is not one of %v", field, s.Indicator, s.Indicator.Values())
	}
	return nil
}
