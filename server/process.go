package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/sqlstore"
)

// shutdownGrace bounds how long in-flight requests may finish after the
// process is told to stop.
const shutdownGrace = 10 * time.Second

// Process is one EIM server process, from Open to Close: its store, the
// shared parts and modules built for it, its listeners and its loops.
type Process struct {
	cfg    Config
	log    *slog.Logger
	stdout io.Writer
	store  *sqlstore.Store
	b      *Builder

	// Coordination with the deployment's other processes (coordinate).
	copts   coord.Options
	once    Singleton
	members func(context.Context) ([][]string, error)

	open    []*openListener
	mounts  map[string][]mount // listener name → what the modules mounted on it
	metrics http.Handler       // GET /metrics
	health  *health
	loops   []*runningLoop
	// closers release what Open took (the SQLite lock, the store), last
	// first, after the shared parts' clean-ups.
	closers []func() error

	mu        sync.Mutex
	closed    bool
	cancel    context.CancelFunc // ends Serve
	done      chan struct{}      // closed when Serve returns
	closeOnce sync.Once
	closeErr  error
}

// openListener is a listener of the process, bound.
type openListener struct {
	listener
	ln  net.Listener
	srv *http.Server
}

// mount is a route a module mounted on a listener.
type mount struct {
	Route
	module, listener string
	stream           bool // without the agent listener's body limit
}

// Run opens a process of cfg, serves it until ctx ends, and closes it. An
// error is returned only for what stops the start (a bad flag value, a
// port taken, a store that cannot be opened or migrated) or a listener
// failing; store failures later are survived.
func Run(ctx context.Context, cfg Config) error {
	p, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	err = p.Serve(ctx)
	return errors.Join(err, p.Close())
}

// Open readies a process: it opens and migrates the store, builds the
// selected modules and the shared parts they use, and binds the listeners
// (Addr tells their addresses), but serves nothing and runs no loop yet
// (Serve). What it took is released when it fails, or by Close.
func Open(ctx context.Context, cfg Config) (_ *Process, err error) {
	p := &Process{cfg: cfg.withDefaults()}
	p.log, p.stdout = p.cfg.Logger, p.cfg.Stdout
	defer func() {
		if err != nil {
			_ = p.Close() // the error that stopped the start is the one to tell
		}
	}()
	if err := p.openCore(ctx); err != nil {
		return nil, err
	}
	p.coordinate()
	if err := p.listen(); err != nil {
		return nil, err
	}
	if err := p.build(); err != nil {
		return nil, err
	}
	for _, o := range p.open {
		o.announce(p, o.ln.Addr())
	}
	p.log.Info("serving", "modules", strings.Join(moduleNames(p.cfg.Modules), ","), "addr", addrOf(p.Addr("http")),
		"agent_addr", addrOf(p.Addr("agent")), "metrics_addr", addrOf(p.Addr("metrics")), "agent_url", p.b.agentURL,
		"database", RedactDSN(p.cfg.dsn()))
	return p, nil
}

// listen binds the listeners the process opens.
func (p *Process) listen() error {
	for _, l := range listeners() {
		addr := l.addr(&p.cfg)
		opened := addr != ""
		if l.want != nil {
			opened = l.want(p.cfg.Modules)
		}
		if !opened {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		p.open = append(p.open, &openListener{listener: l, ln: ln})
		if l.bound != nil {
			if err := l.bound(p, ln); err != nil {
				return err
			}
		}
	}
	return nil
}

// build builds the modules, gathers what they mount and run, and makes the
// listeners' servers of it. The shared parts are all built then.
func (p *Process) build() error {
	p.mounts = map[string][]mount{}
	var metricsBy string
	for _, m := range p.cfg.Modules {
		parts, err := m.Build(p.b)
		if err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
		for _, mt := range mountsOf(m.Name, parts) {
			if i := slices.IndexFunc(p.mounts[mt.listener], func(o mount) bool { return o.Pattern == mt.Pattern }); i >= 0 {
				return fmt.Errorf("module %s: %s is mounted by module %s already", m.Name, mt.Pattern, p.mounts[mt.listener][i].module)
			}
			if p.Addr(mt.listener) == nil {
				return fmt.Errorf("module %s: %s is for the %s listener, which this process does not open", m.Name, mt.Pattern, mt.listener)
			}
			p.mounts[mt.listener] = append(p.mounts[mt.listener], mt)
		}
		for _, l := range parts.Loops {
			p.loops = append(p.loops, &runningLoop{module: m.Name, Loop: l})
		}
		if parts.Metrics != nil {
			if metricsBy != "" {
				return fmt.Errorf("module %s: /metrics is served by module %s already", m.Name, metricsBy)
			}
			p.metrics, metricsBy = parts.Metrics, m.Name
		}
	}
	if p.metrics == nil {
		p.metrics = metrics.Handler(p.b.Metrics)
	}
	p.health = &health{store: p.store, modules: moduleNames(p.cfg.Modules)}
	for _, o := range p.open {
		srv, err := o.server(p)
		if err != nil {
			return fmt.Errorf("%s listener: %w", o.name, err)
		}
		o.srv = srv
	}
	p.b.sealed = true
	p.loops = append(p.loops, p.b.loops...)
	p.health.loops = p.loops
	return nil
}

// mountsOf is what a module's parts mount on which listener.
func mountsOf(module string, parts Parts) []mount {
	var out []mount
	for _, r := range parts.Routes {
		out = append(out, mount{Route: r, module: module, listener: "http"})
	}
	for _, r := range parts.Agent {
		out = append(out, mount{Route: r, module: module, listener: "agent"})
	}
	for _, r := range parts.AgentStreams {
		out = append(out, mount{Route: r, module: module, listener: "agent", stream: true})
	}
	return out
}

// Addr returns the bound address of the listener name ("http", "agent",
// "metrics", "debug"), or nil when the process does not open it.
func (p *Process) Addr(name string) net.Addr {
	for _, o := range p.open {
		if o.name == name {
			return o.ln.Addr()
		}
	}
	return nil
}

// Serve serves the listeners and runs the loops until ctx ends, Close is
// called or a listener fails; then it gives requests in flight
// shutdownGrace to finish and returns once every goroutine it started
// returned. A process is served once.
func (p *Process) Serve(ctx context.Context) error {
	p.mu.Lock()
	if p.closed || p.done != nil {
		p.mu.Unlock()
		return errors.New("server: a process is served once, before Close")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	p.mu.Unlock()
	defer close(p.done)
	defer p.cancel()

	// Announced before serving (so a process that answers ready is seen
	// by the others' next read), and what the other processes run read
	// before the first check (so a process started after them reports
	// only needs that are missing indeed). A failed announce is retried by
	// Announce's loop.
	modules := moduleNames(p.cfg.Modules)
	if p.members != nil {
		if err := coord.Join(ctx, p.copts, modules); err != nil {
			p.log.Warn("coord: cannot announce this process yet; retrying", "err", err)
		}
	}
	p.b.deployment.refresh(ctx)
	p.b.deployment.check(p.cfg.Modules)

	g, gctx := errgroup.WithContext(ctx)
	if p.members != nil {
		g.Go(func() error { return coord.Announce(gctx, p.copts, modules) })
	}
	for _, o := range p.open {
		g.Go(func() error {
			var err error
			if o.srv.TLSConfig != nil {
				err = o.srv.ServeTLS(o.ln, "", "")
			} else {
				err = o.srv.Serve(o.ln)
			}
			if !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve %s: %w", o.name, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		return p.shutdown(context.WithoutCancel(gctx))
	})
	for _, l := range p.loops {
		g.Go(func() error {
			l.run(gctx, p.once, p.log)
			return nil
		})
	}
	g.Go(func() error { return p.b.deployment.run(gctx, p.cfg.Modules) })
	err := g.Wait()
	p.log.Info("stopped")
	return err
}

// shutdown stops the listeners: requests in flight have shutdownGrace to
// finish, except on the abrupt ones.
func (p *Process) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, shutdownGrace)
	defer cancel()
	errs := make(chan error, len(p.open))
	for _, o := range p.open {
		go func() {
			if o.abrupt {
				errs <- o.srv.Close()
				return
			}
			errs <- o.srv.Shutdown(ctx)
		}()
	}
	var err error
	for range p.open {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// Close stops the process: it ends Serve and waits for it, then closes the
// listeners, the shared parts and the store. It may be called more than
// once, and from another goroutine than Serve's.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		cancel, done := p.cancel, p.done
		p.mu.Unlock()
		if cancel != nil {
			cancel()
			<-done
		}
		for _, o := range p.open {
			_ = o.ln.Close() // closed already when it was served
		}
		if p.b != nil {
			for _, c := range slices.Backward(p.b.closers) {
				c()
			}
		}
		var err error
		for _, c := range slices.Backward(p.closers) {
			err = errors.Join(err, c())
		}
		p.closeErr = err
	})
	return p.closeErr
}

func addrOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
