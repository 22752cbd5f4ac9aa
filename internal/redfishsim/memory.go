package redfishsim

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Memory is a machine in memory: a power state machine whose transitions
// (PoweringOn, PoweringOff) last Delay, evaluated lazily against its clock —
// it runs no goroutine, so a fleet of thousands costs nothing idle.
type Memory struct {
	now func() time.Time

	mu             sync.Mutex
	delay          time.Duration
	ignoreGraceful bool
	state          PowerState // once steps are done
	steps          []step
	stepStart      time.Time // when steps[0] began
	boots          []BootRecord
	nmis           int
}

// step is a transition: the machine shows during for dur, then is end.
type step struct {
	during, end PowerState
	dur         time.Duration
	boot        *Boot // a boot completes with this step
}

// BootRecord is a boot the machine completed.
type BootRecord struct {
	At time.Time
	Boot
}

// MemoryConfig configures a Memory machine.
type MemoryConfig struct {
	On    bool          // starts on (default off)
	Delay time.Duration // how long PoweringOn and PoweringOff last
	// IgnoreGraceful: the OS does not answer the ACPI power button (no OS,
	// or a hung one), so graceful shutdowns and restarts do nothing.
	IgnoreGraceful bool
	Now            func() time.Time // the clock (default time.Now)
}

// NewMemory returns a machine in memory.
func NewMemory(cfg MemoryConfig) *Memory {
	m := &Memory{now: cfg.Now, delay: cfg.Delay, ignoreGraceful: cfg.IgnoreGraceful, state: PowerOff}
	if m.now == nil {
		m.now = time.Now
	}
	if cfg.On {
		m.state = PowerOn
	}
	return m
}

// advance completes the steps whose time has come; called with mu held.
func (m *Memory) advance() PowerState {
	now := m.now()
	for len(m.steps) > 0 {
		st := m.steps[0]
		end := m.stepStart.Add(st.dur)
		if now.Before(end) {
			return st.during
		}
		m.state = st.end
		if st.boot != nil {
			m.boots = append(m.boots, BootRecord{At: end, Boot: *st.boot})
		}
		m.steps = m.steps[1:]
		m.stepStart = end
	}
	return m.state
}

// start replaces any transition in progress with steps, from now.
func (m *Memory) start(steps ...step) {
	m.steps = steps
	m.stepStart = m.now()
	m.advance()
}

// PowerState implements Machine.
func (m *Memory) PowerState(context.Context) (PowerState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.advance(), nil
}

// PowerOn implements Machine.
func (m *Memory) PowerOn(_ context.Context, boot Boot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.advance() != PowerOff {
		return nil
	}
	m.start(step{during: PoweringOn, end: PowerOn, dur: m.delay, boot: &boot})
	return nil
}

// PowerOff implements Machine.
func (m *Memory) PowerOff(_ context.Context, graceful bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance()
	switch {
	case !graceful:
		m.steps, m.state = nil, PowerOff
	case !m.ignoreGraceful:
		m.start(step{during: PoweringOff, end: PowerOff, dur: m.delay})
	}
	return nil
}

// Restart implements Machine: a warm reset keeps the machine on and is a
// boot at once; a graceful one goes through PoweringOff and PoweringOn.
func (m *Memory) Restart(_ context.Context, graceful bool, boot Boot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance()
	switch {
	case !graceful:
		m.steps, m.state = nil, PowerOn
		m.boots = append(m.boots, BootRecord{At: m.now(), Boot: boot})
	case !m.ignoreGraceful:
		m.start(step{during: PoweringOff, end: PowerOff, dur: m.delay},
			step{during: PoweringOn, end: PowerOn, dur: m.delay, boot: &boot})
	}
	return nil
}

// PowerCycle implements Machine.
func (m *Memory) PowerCycle(_ context.Context, boot Boot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance()
	m.state = PowerOff
	m.start(step{during: PoweringOn, end: PowerOn, dur: m.delay, boot: &boot})
	return nil
}

// Nmi implements Machine.
func (m *Memory) Nmi(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nmis++
	return nil
}

// Set switches the machine to state at once, as a person at the machine
// (or its own OS) would, behind the BMC's back.
func (m *Memory) Set(state PowerState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps, m.state = nil, state
}

// SetDelay changes how long transitions started from now on last.
func (m *Memory) SetDelay(d time.Duration) {
	m.mu.Lock()
	m.delay = d
	m.mu.Unlock()
}

// Boots returns the boots completed so far, oldest first.
func (m *Memory) Boots() []BootRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.advance()
	return slices.Clone(m.boots)
}

// Nmis returns how many NMIs the machine received.
func (m *Memory) Nmis() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nmis
}

var _ Machine = (*Memory)(nil)
