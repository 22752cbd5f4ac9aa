package inventory

import (
	"context"

	"github.com/eimhq/eim"
)

// HostReports are the typed operations of a node's reports on its host
// whose rules are the inventory's (the networking rule of a hardware
// report), each owning its transaction, run by the runner they were made
// with (a batch shared with other nodes' calls). A module takes them
// through an interface of its own, not an eim.Tx.
type HostReports struct{ run eim.TxRunner }

// NewHostReports returns the operations, their transactions run by run.
func NewHostReports(run eim.TxRunner) HostReports { return HostReports{run: run} }

// ReportHardware records the hardware inventory the node of host id of
// project reported, digest naming it: unless the host holds that report
// already, apply writes the report into the host's hardware fields, as
// read (its children keep their timestamps where they did not change),
// and RecordHardware stores them over the report the host had. apply may
// run more than once (a transaction that lost a race runs again). It
// reports whether it wrote.
func (r HostReports) ReportHardware(ctx context.Context, project, id, digest string, now eim.Time, apply func(h *eim.Host)) (wrote bool, err error) {
	if err := eim.CheckID(eim.KindHost, "hostId", id); err != nil {
		return false, err
	}
	err = r.run.DoIn(ctx, project, func(tx eim.Tx) error {
		wrote = false
		res, err := tx.Get(ctx, eim.KindHost, id)
		if err != nil {
			return err
		}
		h, ok := res.(*eim.Host)
		if !ok {
			return eim.Errorf(eim.EINTERNAL, "host %s: the store returned a %T", id, res)
		}
		if h.HardwareDigest == digest {
			return nil
		}
		prev := h.HardwareDigest
		apply(h)
		h.HardwareDigest = digest
		if err := RecordHardware(ctx, tx, h, prev, now); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, err
}
