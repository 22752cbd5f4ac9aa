package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Progress categories: where a node is now, as the progress line shows it.
var categories = []string{"waiting", "discover", "onboarded", "workflow", "actions", "node", OutcomeRunning, OutcomeFailed, OutcomeStuck}

// category maps a phase (agent.Provisioner's OnPhase names and the
// simulator's own) to its progress category.
func category(phase string) string {
	switch {
	case strings.HasPrefix(phase, "action:"):
		return "actions"
	case phase == "done" || phase == "node":
		return "node"
	case phase == "restart":
		return "discover"
	}
	for _, c := range categories {
		if c == phase {
			return c
		}
	}
	return "workflow"
}

// tracker counts nodes per category.
type tracker struct {
	counts map[string]*atomic.Int64
	start  time.Time
}

func newTracker(n int, start time.Time) *tracker {
	t := &tracker{counts: make(map[string]*atomic.Int64), start: start}
	for _, c := range categories {
		t.counts[c] = new(atomic.Int64)
	}
	t.counts["waiting"].Store(int64(n))
	return t
}

func (t *tracker) move(from, to string) {
	if from == to {
		return
	}
	t.counts[from].Add(-1)
	t.counts[to].Add(1)
}

// line renders the counts and the rate of nodes reaching running.
func (t *tracker) line(now time.Time) string {
	var b strings.Builder
	el := now.Sub(t.start)
	fmt.Fprintf(&b, "[%5.1fs]", el.Seconds())
	for _, c := range categories {
		n := t.counts[c].Load()
		if n == 0 && (c == OutcomeFailed || c == OutcomeStuck) {
			continue
		}
		fmt.Fprintf(&b, " %s %d", c, n)
	}
	rate := 0.0
	if el > 0 {
		rate = float64(t.counts[OutcomeRunning].Load()) / el.Seconds()
	}
	fmt.Fprintf(&b, " · %.0f running/s", rate)
	return b.String()
}

// progress prints the tracker's line to w every interval until stop is
// closed, then once more. On a terminal it rewrites one line (\r).
type progress struct {
	w        io.Writer
	tty      bool
	interval time.Duration
	t        *tracker
	now      func() time.Time
	stop     chan struct{}
	wg       sync.WaitGroup
}

func (p *progress) start() {
	p.stop = make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(p.interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.print(false)
			case <-p.stop:
				p.print(true)
				return
			}
		}
	}()
}

func (p *progress) print(last bool) {
	l := p.t.line(p.now())
	switch {
	case p.tty && last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", l)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", l)
	default:
		fmt.Fprintln(p.w, l)
	}
}

func (p *progress) close() {
	close(p.stop)
	p.wg.Wait()
}
