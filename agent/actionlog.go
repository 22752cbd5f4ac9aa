package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"github.com/eimhq/eim/internal/atomicfile"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
)

// actionLogFile, in the node's state directory, holds the host actions the
// agent carried out (their ids and outcome), newest last.
const actionLogFile = "host-actions.json"

// maxActionLog bounds the log: an action id is only ever repeated while it
// is pending, so the last few suffice.
const maxActionLog = 16

// actionLog remembers the host actions carried out, on disk when it has a
// directory, so that the boot after a reboot does not reboot again.
type actionLog struct {
	mu      sync.Mutex
	path    string // "" = memory only
	entries []actionEntry
}

type actionEntry struct {
	ID     string `json:"id"`
	State  string `json:"state"` // STATE_STARTED, STATE_FAILED
	Detail string `json:"detail,omitempty"`
}

// loadActionLog reads the log of dir ("" = none). A missing or unreadable
// file is an empty log: at worst an action is carried out again.
func loadActionLog(dir string) *actionLog {
	l := &actionLog{}
	if dir == "" {
		return l
	}
	l.path = filepath.Join(dir, actionLogFile)
	if b, err := os.ReadFile(l.path); err == nil {
		_ = json.Unmarshal(b, &l.entries)
	}
	return l
}

func (l *actionLog) get(id string) (*hostv1.ActionResult, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if e.ID == id {
			st := hostv1.ActionResult_State(hostv1.ActionResult_State_value[e.State])
			return &hostv1.ActionResult{Id: e.ID, State: st, Detail: e.Detail}, true
		}
	}
	return nil, false
}

// add records r (replacing an entry of the same id) and, with a directory,
// writes the log durably before returning.
func (l *actionLog) add(r *hostv1.ActionResult) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.entries[:0]
	for _, e := range l.entries {
		if e.ID != r.Id {
			out = append(out, e)
		}
	}
	out = append(out, actionEntry{ID: r.Id, State: r.State.String(), Detail: r.Detail})
	if len(out) > maxActionLog {
		out = out[len(out)-maxActionLog:]
	}
	l.entries = out
	if l.path == "" {
		return nil
	}
	b, err := json.Marshal(l.entries)
	if err != nil {
		return err
	}
	return writeFileAtomic(l.path, b, 0o600, 0o700)
}

// writeFileAtomic replaces path with b atomically and durably (see
// atomicfile.Write).
func writeFileAtomic(path string, b []byte, mode, dirMode os.FileMode) error {
	return atomicfile.Write(path, b, mode, dirMode)
}
