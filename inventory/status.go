package inventory

import (
	"slices"
	"time"
	"unicode/utf8"

	"github.com/eimhq/eim"
)

// The modules' writes.
//
// The modules (onboarding, provisioning, host, maintenance, os) change
// resources through the functions of this package named for what they
// record — SetHostStatus, RecordHardware, SaveWorkflow,
// SetProvisioningStatus … — each writing only its fields
// (eim.Tx.UpdateFieldsIf), or, on the nodes' hot paths, through the
// store's typed operations that own their transactions (eim.HostBeats,
// eim.NodeReports, eim.DeviceClaims; docs/architecture.md, "How a module
// talks to the store"). The API writes desired fields, the modules
// current state and status, and neither writes the other's: a module
// recording a host's status and the API renaming the host do not undo
// each other's change, nor, on PostgreSQL, make each other's transaction
// run again. Each function runs in a transaction of the caller (usually a
// batch of inventory.Batcher, shared with other nodes' calls), validates
// what it writes and names what is wrong, and writes only over what the
// caller read and decided on where another writer may change it (its
// conditions): when that changed meanwhile, the transaction runs again
// and the caller decides anew. A test (writers_test.go at the module's
// root) keeps modules from calling the store's generic writes.

// Status is a status of a resource as the API shows it: a text, its
// indicator and when it was set (hostStatus, hostStatusIndicator,
// hostStatusTimestamp; likewise onboarding, registration, power, instance,
// provisioning and update statuses).
type Status struct {
	Text      string
	Indicator eim.StatusIndication
	// Timestamp is when the status was set, in unix seconds.
	Timestamp uint64
}

// StatusAt is the status text with indicator ind, set at.
func StatusAt(text string, ind eim.StatusIndication, at time.Time) Status {
	return Status{Text: text, Indicator: ind, Timestamp: uint64(at.Unix())}
}

// check validates s as the status field named field ("hostStatus"): a
// text of at most maxStatusText characters of UTF-8 and one of the
// indicator's values ("" is STATUS_INDICATION_UNSPECIFIED, which check
// sets).
func (s *Status) check(field string) error {
	if !utf8.ValidString(s.Text) {
		return eim.Errorf(eim.EINVALID, "%s: not valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(s.Text); n > maxStatusText {
		return eim.Errorf(eim.EINVALID, "%s: is %d characters long, at most %d allowed", field, n, maxStatusText)
	}
	if s.Indicator == "" {
		s.Indicator = eim.StatusUnspecified
	}
	if !slices.Contains(s.Indicator.Values(), string(s.Indicator)) {
		return eim.Errorf(eim.EINVALID, "%sIndicator: %q is not one of %v", field, s.Indicator, s.Indicator.Values())
	}
	return nil
}

// checkEnum validates an enumerated value a module writes ("" is refused:
// modules write what they mean).
func checkEnum[T interface {
	~string
	eim.Enum
}](field string, v T) error {
	if !slices.Contains(v.Values(), string(v)) {
		return eim.Errorf(eim.EINVALID, "%s: %q is not one of %v", field, string(v), v.Values())
	}
	return nil
}

// checkText validates free text a module records: UTF-8 of at most max
// characters.
func checkText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return eim.Errorf(eim.EINVALID, "%s: not valid UTF-8", field)
	}
	if n := utf8.RuneCountInString(s); n > max {
		return eim.Errorf(eim.EINVALID, "%s: is %d characters long, at most %d allowed", field, n, max)
	}
	return nil
}

// stamp copies into dst what the store set on w, a resource it wrote for
// dst: its project and timestamps.
func stamp(dst, w eim.Resource) {
	d, m := dst.Base(), w.Base()
	d.Project, d.Timestamps = m.Project, m.Timestamps
}
