package connect

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// The proxied requests go to the audit log (when Options.Audit does not
// take them instead), one record each: principal user:<subject>, action
// REQUEST, kind cluster, the cluster's name as the resource, and the
// request as the change of "request" (method, path, status, upgrade, the
// replica holding the tunnel, duration). The replica that serves a request
// through its tunnel records it, not one that forwards it there. Requests
// the gateway refuses before a cluster (no token, no role on the project)
// are not recorded: nothing shows them acting in the project. The proxy
// never waits for the database: records queue, and a loop writes them a
// batch at a time; while the database is away they wait (up to
// auditQueue; records beyond are dropped, and that is said).

// AuditAction is the action of a proxied request's audit record.
const AuditAction = "REQUEST"

const (
	// auditQueue bounds the records waiting to be written.
	auditQueue = 16384
	// auditEvery is how often the queue is written; auditBatch the most
	// records one write takes.
	auditEvery = 500 * time.Millisecond
	auditBatch = 1000
)

// auditLog is the queue of records not yet written.
type auditLog struct {
	mu      sync.Mutex
	recs    []eim.AuditRecord
	dropped int
	wake    chan struct{}
}

// record hands a proxied request to Options.Audit, or queues it for the
// audit log.
func (g *Gateway) record(r Record) {
	if g.opts.Audit != nil {
		g.opts.Audit(r)
		return
	}
	req, _ := json.Marshal(struct {
		Method     string `json:"method"`
		Path       string `json:"path"`
		Status     int    `json:"status"`
		Upgrade    string `json:"upgrade,omitempty"`
		Replica    string `json:"replica"`
		DurationMs int64  `json:"durationMs"`
	}{r.Method, r.Path, r.Status, r.Upgrade, r.Replica, r.Duration.Milliseconds()})
	rec := eim.AuditRecord{Project: r.Project, Principal: "user:" + r.Subject, Action: AuditAction, Kind: eim.KindCluster,
		ResourceID: r.Cluster, Changes: map[string]eim.Change{"request": {Old: json.RawMessage("null"), New: req}}}
	a := &g.audit
	a.mu.Lock()
	if len(a.recs) >= auditQueue {
		a.dropped++
	} else {
		a.recs = append(a.recs, rec)
	}
	full := len(a.recs) >= auditBatch
	a.mu.Unlock()
	if full {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// writeAudit writes the queued records until ctx ends, then once more.
func (g *Gateway) writeAudit(ctx context.Context) {
	if g.opts.Audit != nil {
		return
	}
	t := time.NewTicker(auditEvery)
	defer t.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			// The last records, on a context of their own: the server is
			// stopping, the database is still there.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			g.flushAudit(fctx, &warned)
			cancel()
			return
		case <-t.C:
		case <-g.audit.wake:
		}
		g.flushAudit(ctx, &warned)
	}
}

// flushAudit writes the queue a batch at a time; on a failure the records
// stay queued for the next round, and a warning says so (at most one every
// 10 s).
func (g *Gateway) flushAudit(ctx context.Context, warned *time.Time) {
	a := &g.audit
	for {
		a.mu.Lock()
		n := min(len(a.recs), auditBatch)
		batch := a.recs[:n:n]
		dropped := a.dropped
		a.dropped = 0
		a.mu.Unlock()
		if dropped > 0 {
			g.log.Warn("connect: audit records of proxied requests dropped: the audit log could not be written fast enough", "dropped", dropped)
		}
		if n == 0 {
			return
		}
		if err := g.opts.Store.AppendAudit(ctx, batch); err != nil {
			if ctx.Err() == nil && time.Since(*warned) > 10*time.Second {
				*warned = time.Now()
				g.log.Warn("connect: audit records of proxied requests not written yet", "queued", n, "err", err)
			}
			return
		}
		a.mu.Lock()
		a.recs = a.recs[n:] // only appended to meanwhile
		a.mu.Unlock()
	}
}
