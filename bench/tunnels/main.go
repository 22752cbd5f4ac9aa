// Command tunnels measures what connect tunnels cost the gateway: it
// starts a real "eim server --modules api,connect" process, opens N
// tunnels to it (N agents of package agent in this process, each with
// its own token and connection), and reports the server's RSS and CPU
// per tunnel while they are held with pings; then it cuts one tunnel's
// network path without closing it and reports how long the gateway took
// to find the tunnel dead.
//
//	go build -o /tmp/eim ./cmd/eim && go run ./bench/tunnels -eim /tmp/eim -n 1000
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/client"
	"github.com/eimhq/eim/connect/wire"
)

func main() {
	bin := flag.String("eim", "", "the eim binary (required)")
	n := flag.Int("n", 1000, "tunnels")
	window := flag.Duration("window", 60*time.Second, "how long the held tunnels are measured")
	interval := flag.Duration("ping-interval", wire.DefaultTiming.Interval, "the tunnels' ping interval (both ends)")
	timeout := flag.Duration("ping-timeout", wire.DefaultTiming.Timeout, "the tunnels' ping timeout (both ends)")
	flag.Parse()
	if *bin == "" {
		log.Fatal("-eim is required")
	}
	if err := run(*bin, *n, *window, wire.Timing{Interval: *interval, Timeout: *timeout}); err != nil {
		log.Fatal(err)
	}
}

var (
	apiRE   = regexp.MustCompile(`eim: serving API on (http://\S+)`)
	agentRE = regexp.MustCompile(`eim: serving agents on (https://\S+)`)
)

func run(bin string, n int, window time.Duration, timing wire.Timing) error {
	dir, err := os.MkdirTemp("", "eim-tunnels-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, bin, "server", "--data-dir", dir, "--modules", "api,connect", "--http-addr", "127.0.0.1:0",
		"--agent-addr", "127.0.0.1:0", "--log-level", "warn", "--rate-limit", "0",
		"--connect-ping-interval", timing.Interval.String(), "--connect-ping-timeout", timing.Timeout.String())
	out, err := srv.StdoutPipe()
	if err != nil {
		return err
	}
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var apiURL, agentURL string
	sc := bufio.NewScanner(out)
	for (apiURL == "" || agentURL == "") && sc.Scan() {
		if m := apiRE.FindStringSubmatch(sc.Text()); m != nil {
			apiURL = m[1]
		}
		if m := agentRE.FindStringSubmatch(sc.Text()); m != nil {
			agentURL = m[1]
		}
	}
	if apiURL == "" || agentURL == "" {
		return errors.New("the server did not print its addresses")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		return err
	}
	admin := client.New(apiURL, strings.TrimSpace(string(tok)), nil)
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	if blk, _ := pem.Decode(caPEM); blk != nil {
		sum := sha256.Sum256(blk.Bytes)
		fmt.Printf("gateway %s, agent listener %s (CA sha256:%s…)\n", apiURL, agentURL, hex.EncodeToString(sum[:4]))
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })}
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = upstream.Serve(uln) }()
	defer upstream.Close()
	up, _ := url.Parse("http://" + uln.Addr().String())

	time.Sleep(2 * time.Second)
	base := sample(srv.Process.Pid)
	fmt.Printf("server idle: RSS %.1f MiB\n", float64(base.rss)/(1<<20))

	// The tunnels: n agents, and one more through a relay that can cut
	// its path.
	var connected atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	agents := func(i int, server string) (*agent.Connect, error) {
		t, err := admin.IssueConnectToken(ctx, "default", fmt.Sprintf("c%d", i), 0, 0)
		if err != nil {
			return nil, err
		}
		f := filepath.Join(dir, fmt.Sprintf("c%d.token", i))
		if err := os.WriteFile(f, []byte(t.Token), 0o600); err != nil {
			return nil, err
		}
		pin, err := agent.NewPin(string(caPEM))
		if err != nil {
			return nil, err
		}
		return &agent.Connect{Server: server, Pin: pin, TokenFile: f, Upstream: up, Timing: timing,
			Backoff: agent.Backoff{Min: time.Second, Max: 10 * time.Second}, Logger: slog.New(slog.DiscardHandler),
			OnConnect: func() { connected.Add(1) }}, nil
	}
	for i := range n {
		a, err := agents(i, agentURL)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	for connected.Load() < int64(n) {
		if time.Since(start) > 5*time.Minute {
			return fmt.Errorf("%d of %d tunnels open after 5 min", connected.Load(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("%d tunnels open in %v\n", n, time.Since(start).Round(time.Millisecond))
	for {
		cs, err := admin.ClusterConnections(ctx, "default")
		if err != nil {
			return err
		}
		up := 0
		for _, c := range cs {
			if c.Connected {
				up++
			}
		}
		if up >= n {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(timing.Interval) // a round of pings
	s0 := sample(srv.Process.Pid)
	time.Sleep(window)
	s1 := sample(srv.Process.Pid)
	cpu := float64(s1.ticks-s0.ticks) / 100 // seconds (USER_HZ 100)
	fmt.Printf("held %d tunnels for %v: server RSS %.1f MiB (%.1f KiB per tunnel over idle), CPU %.2f s = %.2f%% of a core (%.3f ms per tunnel per minute)\n",
		n, window, float64(s1.rss)/(1<<20), float64(s1.rss-base.rss)/1024/float64(n), cpu, 100*cpu/window.Seconds(),
		1000*cpu/float64(n)/window.Minutes())
	self := sample(os.Getpid())
	fmt.Printf("the agents' process (%d agents): RSS %.1f MiB (%.1f KiB per agent)\n", n, float64(self.rss)/(1<<20), float64(self.rss)/1024/float64(n))

	// A dead path: the relay stops carrying bytes, nothing is closed.
	rl, err := newRelay(strings.TrimPrefix(agentURL, "https://"))
	if err != nil {
		return err
	}
	a, err := agents(n, "https://"+rl.addr())
	if err != nil {
		return err
	}
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	go func() { _ = a.Run(actx) }()
	name := fmt.Sprintf("c%d", n)
	waitState := func(want bool, limit time.Duration) (time.Duration, error) {
		t0 := time.Now()
		for time.Since(t0) < limit {
			c, err := admin.ClusterConnection(ctx, "default", name)
			if err == nil && c.Replica != "" == want && (c.Connected || !want) {
				return time.Since(t0), nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return 0, fmt.Errorf("%s: not %v within %v", name, want, limit)
	}
	if _, err := waitState(true, time.Minute); err != nil {
		return err
	}
	rl.freeze()
	d, err := waitState(false, 3*(timing.Interval+timing.Timeout))
	if err != nil {
		return err
	}
	fmt.Printf("dead tunnel found by the gateway after %v (ping interval %v, timeout %v: bound %v)\n",
		d.Round(10*time.Millisecond), timing.Interval, timing.Timeout, timing.Interval+timing.Timeout)
	cancel()
	wg.Wait()
	return nil
}

type usage struct {
	rss   int64 // bytes
	ticks int64 // utime + stime
}

func sample(pid int) usage {
	var u usage
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				u.rss = kb * 1024
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+2:])
			if len(f) > 13 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				u.ticks = ut + st
			}
		}
	}
	return u
}

// relay carries TCP to target until frozen: then it holds the
// connections open and carries nothing, as a path that died does.
type relay struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	once   sync.Once
}

func newRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, frozen: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.handle(c)
		}
	}()
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }
func (r *relay) freeze()      { r.once.Do(func() { close(r.frozen) }) }

func (r *relay) handle(c net.Conn) {
	b, err := net.Dial("tcp", r.target)
	if err != nil {
		c.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-r.frozen:
				<-make(chan struct{}) // hold until the process ends
			default:
			}
			if n > 0 {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(b, c)
	go pipe(c, b)
}
