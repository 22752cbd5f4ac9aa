package redfishsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// QMP is a client of QEMU's machine protocol (QMP) on one connection: a
// greeting, capability negotiation, then commands answered in order, with
// asynchronous events in between. QEMU serves one client per -qmp socket at a
// time, so hold a connection only as long as needed.
type QMP struct {
	conn net.Conn
	dec  *json.Decoder

	mu     sync.Mutex
	id     int
	events []QMPEvent // received while waiting for answers, not yet taken
	broken error
}

// QMPEvent is an asynchronous event (RESET, SHUTDOWN, POWERDOWN, STOP…).
type QMPEvent struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
}

// QMPError is an error QEMU answered to a command.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return "qmp: " + e.Class + ": " + e.Desc }

// qmpMessage is any message QEMU sends.
type qmpMessage struct {
	Greeting json.RawMessage `json:"QMP"`
	Return   json.RawMessage `json:"return"`
	Error    *QMPError       `json:"error"`
	Event    string          `json:"event"`
	Data     json.RawMessage `json:"data"`
	ID       json.RawMessage `json:"id"`
}

const maxEvents = 64

// DialQMP connects to QEMU's QMP socket (network "unix" or "tcp") and
// negotiates capabilities.
func DialQMP(ctx context.Context, network, addr string) (*QMP, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	q := &QMP{conn: conn, dec: json.NewDecoder(conn)}
	stop := q.bound(ctx)
	defer stop()
	var greet qmpMessage
	if err := q.dec.Decode(&greet); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: greeting: %w", err)
	}
	if greet.Greeting == nil {
		conn.Close()
		return nil, errors.New("qmp: no greeting")
	}
	if _, err := q.exec("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

// bound applies ctx's deadline (or 10 s) and cancellation to the
// connection until the returned function is called.
func (q *QMP) bound(ctx context.Context) func() {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	_ = q.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = q.conn.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// Execute runs a command (args nil or a JSON object) and returns its result.
func (q *QMP) Execute(ctx context.Context, command string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.broken != nil {
		return nil, q.broken
	}
	stop := q.bound(ctx)
	defer stop()
	return q.exec(command, args)
}

// exec sends a command and reads until its answer; called with mu held (or
// before the client is shared).
func (q *QMP) exec(command string, args any) (json.RawMessage, error) {
	q.id++
	id := fmt.Sprint(q.id)
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(data, '\n')); err != nil {
		q.broken = fmt.Errorf("qmp: %s: %w", command, err)
		return nil, q.broken
	}
	for {
		m, err := q.read()
		if err != nil {
			return nil, fmt.Errorf("qmp: %s: %w", command, err)
		}
		if m.Event != "" {
			continue
		}
		var got string
		if json.Unmarshal(m.ID, &got) != nil || got != id {
			continue // an answer to a command given up on
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Return, nil
	}
}

// read reads one message, keeping events; a failed read breaks the client.
func (q *QMP) read() (qmpMessage, error) {
	var m qmpMessage
	if err := q.dec.Decode(&m); err != nil {
		q.broken = err
		return m, err
	}
	if m.Event != "" {
		if len(q.events) == maxEvents {
			q.events = q.events[1:]
		}
		q.events = append(q.events, QMPEvent{Name: m.Event, Data: m.Data})
	}
	return m, nil
}

// WaitEvent returns the first event named name received since the last
// WaitEvent took one, reading until it comes.
func (q *QMP) WaitEvent(ctx context.Context, name string) (QMPEvent, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	take := func() (QMPEvent, bool) {
		for i, e := range q.events {
			if e.Name == name {
				q.events = append(q.events[:i:i], q.events[i+1:]...)
				return e, true
			}
		}
		return QMPEvent{}, false
	}
	if e, ok := take(); ok {
		return e, nil
	}
	if q.broken != nil {
		return QMPEvent{}, q.broken
	}
	stop := q.bound(ctx)
	defer stop()
	for {
		if _, err := q.read(); err != nil {
			return QMPEvent{}, fmt.Errorf("qmp: waiting for %s: %w", name, err)
		}
		if e, ok := take(); ok {
			return e, nil
		}
	}
}

// Status returns query-status's run state: running, prelaunch, paused,
// shutdown…
func (q *QMP) Status(ctx context.Context) (string, error) {
	raw, err := q.Execute(ctx, "query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("qmp: query-status: %w", err)
	}
	return st.Status, nil
}

// Close closes the connection.
func (q *QMP) Close() error { return q.conn.Close() }
