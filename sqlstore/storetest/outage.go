package storetest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between a store and its database, for outage
// tests: Cut drops every connection and refuses new ones (as a database
// that went away does) until Restore; Stall holds every byte in either
// direction, on the connections open and on new ones, without closing
// anything (as a database too loaded to answer does: statements wait and
// time out) until Resume. It listens on 127.0.0.1.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// resumed is closed while traffic flows; a stall replaces it with an
	// open channel that Resume closes.
	resumed chan struct{}
}

// NewProxy starts a proxy to target (host:port), closed when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, resumed: make(chan struct{})}
	close(p.resumed)
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns dsn, a postgres:// URL, with its host and port replaced by
// the proxy's.
func (p *Proxy) URL(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.Addr()
	return u.String()
}

// Cut closes every proxied connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore lets connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Stall holds the traffic of every connection, open or new, until
// Resume: the database's answers, and the statements sent to it, wait.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
		p.resumed = make(chan struct{})
	default: // stalled already
	}
}

// Resume lets the traffic held by Stall through, in order.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.resumed:
	default:
		close(p.resumed)
	}
}

// flowing returns a channel closed while traffic is not stalled.
func (p *Proxy) flowing() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resumed
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Resume()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

// pipe joins the client c to a new connection to the target, unless cut.
func (p *Proxy) pipe(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		return // accepted and closed at once: the client's read ends
	}
	d, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	defer d.Close()
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		return
	}
	p.conns[c], p.conns[d] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, d)
		p.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	go func() { p.copy(d, c); d.Close(); done <- struct{}{} }()
	go func() { p.copy(c, d); c.Close(); done <- struct{}{} }()
	<-done
	<-done
}

// copy forwards what src sends to dst, each read held while the proxy
// is stalled, until either side fails.
func (p *Proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.flowing()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// OwnPostgres is a PostgreSQL server of a test's own (initdb in a
// temporary directory, its own port on 127.0.0.1, trust authentication),
// so that an outage test can stop and start it without touching the
// machine's shared server.
type OwnPostgres struct {
	bin, dir, data, log string
	port                int
	asUser              string // run the server's tools as this user (root cannot)
}

// StartPostgres initialises and starts a PostgreSQL of t's own, stopped
// and removed when t ends. It skips t where PostgreSQL's server binaries
// are not installed, unless PostgresEnv is set (CI installs them): then
// their absence fails it.
func StartPostgres(t testing.TB) *OwnPostgres {
	t.Helper()
	bin := postgresBin()
	if bin == "" {
		if os.Getenv(PostgresEnv) != "" {
			t.Fatal("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
		}
		t.Skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
	}
	dir, err := os.MkdirTemp("", "eim-pg-")
	if err != nil {
		t.Fatal(err)
	}
	pg := &OwnPostgres{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log")}
	t.Cleanup(func() {
		_ = pg.ctl("stop", "-m", "immediate")
		if t.Failed() {
			if b, err := os.ReadFile(pg.log); err == nil {
				t.Logf("PostgreSQL's log:\n%s", tail(string(b), 40))
			}
		}
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the server runs as postgres.
		pg.asUser = "postgres"
		if out, err := exec.Command("chown", "postgres:", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown %s: %v: %s", dir, err, out)
		}
	}
	if out, err := pg.run(filepath.Join(bin, "initdb"), "-D", pg.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pg.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	return pg
}

// URL is the server's postgres database.
func (pg *OwnPostgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// Start starts the server and waits until it accepts connections.
func (pg *OwnPostgres) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", pg.port, pg.dir)
	if err := pg.ctl("start", "-w", "-t", "60", "-l", pg.log, "-o", opts); err != nil {
		return fmt.Errorf("start PostgreSQL: %w", err)
	}
	return nil
}

// Stop stops the server the way an operator's restart does (fast
// shutdown: sessions are ended with "terminating connection due to
// administrator command").
func (pg *OwnPostgres) Stop() error {
	if err := pg.ctl("stop", "-w", "-m", "fast"); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	return nil
}

func (pg *OwnPostgres) ctl(args ...string) error {
	out, err := pg.run(filepath.Join(pg.bin, "pg_ctl"), append([]string{"-D", pg.data}, args...)...)
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %w: %s", args[0], err, strings.TrimSpace(out))
	}
	return nil
}

func (pg *OwnPostgres) run(name string, args ...string) (string, error) {
	if pg.asUser != "" {
		args = append([]string{"-u", pg.asUser, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = pg.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// postgresBin returns the newest installed PostgreSQL's bin directory
// (Debian's layout), or "".
func postgresBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) < versionOf(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

func versionOf(bin string) int {
	var v int
	_, _ = fmt.Sscanf(filepath.Base(filepath.Dir(bin)), "%d", &v)
	return v
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
