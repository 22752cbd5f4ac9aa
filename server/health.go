package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/eimhq/eim"
)

// health serves /healthz (the process is alive: it answers through a
// database outage, so that nothing restarts it for one) and /readyz (it can
// do its work: the database answers and every loop of its modules runs, or
// stands by for a lease another process holds).
type health struct {
	store   eim.Store
	modules []string
	loops   []*runningLoop
}

type healthBody struct {
	Status  string            `json:"status"`
	Reason  string            `json:"reason,omitempty"`
	Modules []string          `json:"modules"`
	Loops   map[string]string `json:"loops"`
}

func (h *health) healthz(w http.ResponseWriter, _ *http.Request) {
	writeHealth(w, http.StatusOK, healthBody{Status: "ok", Modules: h.modules, Loops: h.states()})
}

func (h *health) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	body := healthBody{Status: "ready", Modules: h.modules, Loops: h.states()}
	if _, err := h.store.Revision(ctx); err != nil {
		body.Status, body.Reason = "not ready", "the database is unavailable"
		w.Header().Set("Retry-After", "2")
		writeHealth(w, http.StatusServiceUnavailable, body)
		return
	}
	for _, l := range h.loops {
		if !l.ready() {
			body.Status, body.Reason = "not ready", "loop "+l.name()+" is "+l.State()
			if l.State() == loopRunning {
				body.Reason = "loop " + l.name() + " is starting"
			}
			writeHealth(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	writeHealth(w, http.StatusOK, body)
}

func (h *health) states() map[string]string {
	out := make(map[string]string, len(h.loops))
	for _, l := range h.loops {
		out[l.name()] = l.State()
	}
	return out
}

func writeHealth(w http.ResponseWriter, status int, body healthBody) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
