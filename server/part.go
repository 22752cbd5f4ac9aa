package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/pki"
)

// Part is a component that the modules of a process share (the host view,
// the southbound server, a module's service that another module calls):
// declared once, next to the module that owns it, and built once per
// process, on first use (Use). A Part value is only a key and a recipe;
// what it builds lives in the process's Builder.
type Part[T any] struct {
	// Name names the part in errors.
	Name string
	// Build makes the part for the process of b. It may use other parts;
	// it may add loops that the process runs (Builder.runLoop) and
	// clean-ups that it runs when it closes (Builder.onClose).
	Build func(b *Builder) (T, error)
}

// Use returns the process's p, built on first use. A Build that fails is
// tried again by the next Use. Parts are built while the process opens:
// a part first asked for later (by a handler, say) is an error, so that
// everything a process runs is known before it serves.
func Use[T any](b *Builder, p *Part[T]) (T, error) {
	var zero T
	if v, ok := b.parts[p]; ok {
		return v.(T), nil
	}
	if b.sealed {
		return zero, fmt.Errorf("shared part %s: first used after the process opened", p.Name)
	}
	if slices.Contains(b.building, any(p)) {
		return zero, fmt.Errorf("shared part %s: needs itself", p.Name)
	}
	b.building = append(b.building, p)
	v, err := p.Build(b)
	b.building = b.building[:len(b.building)-1]
	if err != nil {
		return zero, err
	}
	b.parts[p] = v
	return v, nil
}

// Builder is what a module's Build and a Part's Build are given: the core
// every module may use (the store, the inventory, the token verifier, the
// process's metrics), the process's configuration, and the shared parts
// (Use).
type Builder struct {
	// ctx is Open's: what is built reads with it (the OS manifests), never
	// what runs after (loops and handlers have their own).
	ctx context.Context
	cfg *Config

	Store     eim.Store
	Inventory *inventory.Service
	Log       *slog.Logger
	Issuer    *auth.Issuer
	Verifier  *auth.Verifier
	// Metrics is the process's registry: components register their series
	// on it, and /metrics serves it.
	Metrics *prometheus.Registry

	registry   *Registry
	selected   []*Module
	deployment *deployment

	// The agent side, set when the agent listener is open (a module of the
	// process serves nodes).
	ca       *pki.Authority
	sbCert   *x509.Certificate
	agentURL string
	// httpAddr is the HTTP listener's bound address.
	httpAddr string

	parts    map[any]any
	building []any // the parts being built, to report a cycle
	sealed   bool  // the process is open: no part is built any more
	// loops are the loops the shared parts run (the host view's, the
	// southbound server's credentials cache), after the modules' loops.
	loops []*runningLoop
	// closers run when the process closes, last added first.
	closers []func()
}

// Selected reports whether module name runs in this process.
func (b *Builder) Selected(name string) bool {
	return slices.ContainsFunc(b.selected, func(m *Module) bool { return m.Name == name })
}

// shared reports whether this process shares the database with others
// (PostgreSQL: any number of processes, coordinated through it) rather
// than being the whole deployment (SQLite).
func (b *Builder) shared() bool { return IsPostgres(b.cfg.dsn()) }

// runLoop has the process run l, a shared part's loop, on behalf of owner
// (the name /readyz and the logs show it under).
func (b *Builder) runLoop(owner string, l Loop) {
	b.loops = append(b.loops, &runningLoop{module: owner, Loop: l})
}

// onClose has the process run fn when it closes, after its loops and
// listeners stopped.
func (b *Builder) onClose(fn func()) { b.closers = append(b.closers, fn) }
