package agent

import (
	"fmt"
	"sync"
)

// maxBuffered bounds the output kept between reports; beyond it the oldest
// unreported output is dropped (a note says how much).
const maxBuffered = 1 << 20

// outputBuffer collects an action's output until it is reported. Writes
// come from the executor's goroutine, reads from the reporter.
type outputBuffer struct {
	mu      sync.Mutex
	buf     []byte
	dropped int
}

func (b *outputBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - maxBuffered; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped += over
	}
	return len(p), nil
}

// peek returns up to n bytes of unreported output (a copy), preceded by a
// note when output was dropped.
func (b *outputBuffer) peek(n int) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []byte
	if b.dropped > 0 {
		out = fmt.Appendf(nil, "[%d bytes of output dropped]\n", b.dropped)
	}
	k := min(n-len(out), len(b.buf))
	return append(out, b.buf[:k]...)
}

// consume drops n bytes returned by peek (the note counts too).
func (b *outputBuffer) consume(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		note := len(fmt.Sprintf("[%d bytes of output dropped]\n", b.dropped))
		b.dropped = 0
		n -= note
	}
	n = min(max(n, 0), len(b.buf))
	b.buf = append(b.buf[:0], b.buf[n:]...)
}

func (b *outputBuffer) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buf)
}
