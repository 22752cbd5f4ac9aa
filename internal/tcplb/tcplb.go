// Package tcplb is a round-robin TCP proxy, the plain layer-4 load balancer
// that tests and benchmarks put in front of several EIM processes: each
// connection goes to the next backend that accepts it; a backend that dies
// drops its connections, and their clients reconnect to another.
package tcplb

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a running round-robin proxy.
type Proxy struct {
	ln       net.Listener
	backends func() []string
	wg       sync.WaitGroup

	mu    sync.Mutex
	next  int
	conns map[net.Conn]struct{} // nil once closed
}

// Listen starts a proxy on addr ("127.0.0.1:0" picks a port) to the
// addresses backends returns at each new connection (it may change: a
// restarted process at a new port).
func Listen(addr string, backends func() []string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Static returns a backends function of fixed addresses.
func Static(addrs ...string) func() []string {
	return func() []string { return addrs }
}

// Addr returns the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every proxied connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *Proxy) handle(c net.Conn) {
	bs := p.backends()
	for range bs {
		p.mu.Lock()
		addr := bs[p.next%len(bs)]
		p.next++
		p.mu.Unlock()
		b, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue // a process that is down: the next one
		}
		if !p.track(c, b) {
			return
		}
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
		<-done
		c.Close()
		b.Close()
		<-done
		p.untrack(c, b)
		return
	}
	c.Close()
}

// track records live connections for Close; false (and both closed) when
// the proxy is closed already.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}
