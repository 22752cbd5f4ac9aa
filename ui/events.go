package ui

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/eimhq/eim"
)

// Live refresh: a page that shows changing state opens
// /ui/p/{project}/events (server-sent events) and reloads its content when
// told that something of its project changed. The server follows the
// change feed, one watch per open page, and tells at most once per
// liveEvery, so a busy fleet costs a page one refresh a second at most,
// and a quiet one nothing.

const (
	liveEvery = time.Second
	// liveFor ends a stream before the server's write timeout cuts it;
	// the browser reconnects by itself (EventSource), from the revision
	// it last saw (Last-Event-ID).
	liveFor = 45 * time.Second
)

// liveKinds are the kinds whose changes the pages show.
var liveKinds = []eim.Kind{eim.KindHost, eim.KindInstance, eim.KindWorkflow, eim.KindSite, eim.KindRegion,
	eim.KindSingleSchedule, eim.KindRepeatedSchedule, eim.KindOSUpdateRun, eim.KindCluster, eim.KindClusterTemplate}

// clusterKinds are the kinds the clusters pages show, all a user with
// only a cluster role is told of.
var clusterKinds = []eim.Kind{eim.KindCluster, eim.KindClusterTemplate}

// allLiveKinds are the kinds whose changes the audit log records: all
// but the workflows' progress.
var allLiveKinds = slices.DeleteFunc(eim.Kinds(), func(k eim.Kind) bool { return k == eim.KindWorkflow })

func (h *Handler) events(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx, cancel := context.WithTimeout(r.Context(), liveFor)
	defer cancel()
	rev, err := h.inv.Revision(ctx)
	if err != nil {
		return err
	}
	var last int64
	if _, err := fmt.Sscan(r.Header.Get("Last-Event-ID"), &last); err == nil && last > 0 && last < rev {
		rev = last // changes made while the browser reconnected are told at once
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprintf(w, "retry: 2000\nid: %d\nevent: hello\ndata: %d\n\n", rev, rev); err != nil {
		return nil
	}
	_ = rc.Flush()

	kinds := liveKinds
	switch {
	case c.clustersOnly:
		kinds = clusterKinds // what a cluster role may see change
	case r.URL.Query().Get("all") != "":
		kinds = allLiveKinds // the audit log
	}
	changes := make(chan int64, 1)
	go func() {
		defer close(changes)
		for ev, err := range h.inv.Watch(ctx, rev, kinds...) {
			if err != nil {
				return
			}
			if ev.Project != c.project.Name {
				continue
			}
			select { // keep the newest only
			case changes <- ev.Revision:
			default:
				select {
				case <-changes:
				default:
				}
				changes <- ev.Revision
			}
		}
	}()
	tick := time.NewTicker(liveEvery)
	defer tick.Stop()
	var pending int64
	for {
		select {
		case rv, ok := <-changes:
			if !ok {
				return nil
			}
			pending = rv
		case <-tick.C:
			if pending == 0 {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: change\ndata: %d\n\n", pending, pending); err != nil {
				cancel()
				for range changes {
				}
				return nil
			}
			_ = rc.Flush()
			pending = 0
		}
	}
}
