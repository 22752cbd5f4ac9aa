package hostmgr

import (
	"context"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// Store is what the host module asks of the store: its hosts' liveness
// and hardware through typed operations that own their transactions
// (eim.HostBeats: a node's call or silence reads and writes only the
// fields it decides on; a hardware report), the nodes' last-seen times,
// the projects' heartbeat settings, and whether the store answers at all.
type Store interface {
	eim.HostBeats
	// ReportHardware is inventory.HostReports': a node's hardware
	// report, read and written whole (its children are diffed against
	// the stored ones), under the networking rule.
	ReportHardware(ctx context.Context, project, id, digest string, now eim.Time, apply func(h *eim.Host)) (bool, error)
	// SaveLastSeen, LastSeen and LastSeenOf are eim.Store's.
	SaveLastSeen(ctx context.Context, seen []eim.LastSeen) error
	LastSeen(ctx context.Context) ([]eim.LastSeen, error)
	LastSeenOf(ctx context.Context, hostIDs []string) ([]eim.LastSeen, error)
	// FindProject and ListProjects read the projects' heartbeat
	// settings, and which projects there are.
	FindProject(ctx context.Context, name string) (*eim.Project, error)
	ListProjects(ctx context.Context) ([]*eim.Project, error)
	// Revision is the checker's probe of a store that failed a write.
	Revision(ctx context.Context) (int64, error)
}

// StoreOf returns the host module's Store over st, its typed operations'
// transactions run by run (a batcher shared with other nodes' calls;
// nil: one st.Update each).
func StoreOf(st eim.Store, run eim.TxRunner) Store {
	if run == nil {
		run = storeRunner{st}
	}
	return port{HostBeats: st.HostBeats(run), HostReports: inventory.NewHostReports(run), st: st}
}

var _ Store = port{}

// port is a Store over an eim.Store.
type port struct {
	eim.HostBeats
	inventory.HostReports
	st eim.Store
}

// storeRunner runs each transaction alone.
type storeRunner struct{ st eim.Store }

func (r storeRunner) DoIn(ctx context.Context, project string, fn func(eim.Tx) error) error {
	return r.st.Update(ctx, project, fn)
}

func (p port) SaveLastSeen(ctx context.Context, seen []eim.LastSeen) error {
	return p.st.SaveLastSeen(ctx, seen)
}

func (p port) LastSeen(ctx context.Context) ([]eim.LastSeen, error) { return p.st.LastSeen(ctx) }

func (p port) LastSeenOf(ctx context.Context, hostIDs []string) ([]eim.LastSeen, error) {
	return p.st.LastSeenOf(ctx, hostIDs)
}

func (p port) FindProject(ctx context.Context, name string) (*eim.Project, error) {
	return p.st.FindProject(ctx, name)
}

func (p port) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	return p.st.ListProjects(ctx)
}

func (p port) Revision(ctx context.Context) (int64, error) { return p.st.Revision(ctx) }
