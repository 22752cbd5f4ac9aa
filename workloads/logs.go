package workloads

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// Log tails: GET …/edgeworkloads/{name}/logs?host=&container=&tail=
// asks the device (a log request, which moves its version: it learns of
// it at its next heartbeat) and waits up to Options.LogWait (or the
// request's wait=N seconds, at most 30) for the answer: 200 with the
// logs, or 202 with the request's id to poll at …/logs/{id} (200 once
// answered, 202 while pending).

func logView(r *eim.EdgeWorkloadLogRequest) *LogView {
	v := &LogView{ID: r.ID, HostID: r.HostID, Container: r.Container, Tail: r.Tail, State: "pending", Logs: []eim.ContainerLog{}, Error: r.Error, CreatedAt: r.CreatedAt}
	if r.Answered {
		v.State = "answered"
		if r.Logs != nil {
			v.Logs = r.Logs
		}
	}
	return v
}

func newLogID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "log-" + hex.EncodeToString(b[:])
}

func (s *Service) logs(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	host := q.Get("host")
	if err := eim.CheckID(eim.KindHost, "host", host); err != nil {
		return err
	}
	ctr := q.Get("container")
	if ctr != "" {
		if err := eim.CheckEdgeWorkloadName(ctr); err != nil {
			return badParam("container", "%q is not a container name", ctr)
		}
	}
	tail := uint64(100)
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n < 1 || n > 10000 {
			return badParam("tail", "want 1 to 10000 lines")
		}
		tail = n
	}
	wait := s.o.LogWait
	if v := q.Get("wait"); v != "" {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil || n > 30 {
			return badParam("wait", "want 0 to 30 seconds")
		}
		wait = time.Duration(n) * time.Second
	}
	ctx := r.Context()
	targets, err := s.o.Store.EdgeWorkloadTargets(ctx, c.proj.Name, host)
	if err != nil {
		return err
	}
	found := false
	for _, t := range targets {
		found = found || t.Workload == c.name
	}
	if !found {
		if _, err := s.o.Store.FindEdgeWorkload(ctx, c.proj.Name, c.name); err != nil {
			return err
		}
		return badParam("host", "%s does not run edge workload %s", host, c.name)
	}
	lr := &eim.EdgeWorkloadLogRequest{Project: c.proj.Name, ID: newLogID(), Workload: c.name, HostID: host, Container: ctr, Tail: uint32(tail)}
	if err := s.o.Store.CreateEdgeWorkloadLogRequest(ctx, lr); err != nil {
		return err
	}
	// Poll the store for the answer (it may come through another
	// replica), until the deadline.
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			apiv2.WriteJSON(w, http.StatusAccepted, logView(lr))
			return nil
		case <-tick.C:
			got, err := s.o.Store.FindEdgeWorkloadLogRequest(ctx, c.proj.Name, lr.ID)
			if err != nil {
				return err
			}
			if got.Answered {
				apiv2.WriteJSON(w, http.StatusOK, logView(got))
				return nil
			}
		}
	}
}

func (s *Service) logResult(w http.ResponseWriter, r *http.Request, c *call) error {
	got, err := s.o.Store.FindEdgeWorkloadLogRequest(r.Context(), c.proj.Name, r.PathValue("id"))
	if err != nil {
		return err
	}
	if got.Workload != c.name {
		return eim.Errorf(eim.ENOTFOUND, "log request %s not found", got.ID)
	}
	code := http.StatusOK
	if !got.Answered {
		code = http.StatusAccepted
	}
	apiv2.WriteJSON(w, code, logView(got))
	return nil
}
