package southbound

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultTokenRate is the token requests a second the token endpoint
// serves by default (Options.TokenRate), and DefaultTokenBurst how many
// more it serves at once. Minting a token costs some 50 µs of CPU, but a
// request of a node the per-host view has not read yet reads the store
// too; 5,000 a second lets a fleet of 100,000 that all come back at once
// in within 20 s — inside the heartbeat timeout of a 10 s interval (30 s),
// after which a node without a token would be flagged — while heartbeats
// keep most of the machine.
const (
	DefaultTokenRate  = 5000
	DefaultTokenBurst = 1000
)

// maxTokenRetry bounds the back-off the token endpoint asks for: a node
// told to come back later than its host's heartbeat timeout would be
// flagged "No Connection" meanwhile.
const maxTokenRetry = 60 * time.Second

// admission admits token requests at a bounded rate. A request beyond it
// is refused with the time after which to ask again: the refused are
// given slots one after another at the same rate (the first a slot after
// the last one given), so that the nodes a restart brings all at once
// come back spread over the time the server needs for them, not together.
type admission struct {
	lim   *rate.Limiter
	every time.Duration // one slot at the rate

	mu   sync.Mutex
	last time.Time // the latest slot given to a refused request
}

// newAdmission returns an admission of perSecond requests a second, burst
// more at once; nil (everything admitted) when perSecond is not positive.
func newAdmission(perSecond float64, burst int) *admission {
	if perSecond <= 0 {
		return nil
	}
	return &admission{lim: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1)), every: time.Duration(float64(time.Second) / perSecond)}
}

// admit reports whether a request arriving at now is served; when it is
// not, retry is when to ask again (from now, at most maxTokenRetry).
func (a *admission) admit(now time.Time) (ok bool, retry time.Duration) {
	if a == nil || a.lim.AllowN(now, 1) {
		return true, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	slot := a.last
	if slot.Before(now) {
		slot = now
	}
	slot = slot.Add(a.every)
	if slot.Sub(now) > maxTokenRetry {
		// More are waiting than the bound lets wait: the latest comers
		// share its end (the nodes' jitter spreads them).
		slot = now.Add(maxTokenRetry)
	}
	a.last = slot
	return false, slot.Sub(now)
}
