package tcplb

import (
	"bufio"
	"fmt"
	"net"
	"testing"
)

// echo starts a backend that answers each line with its name and the line.
func echo(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewScanner(c)
				for r.Scan() {
					fmt.Fprintf(c, "%s %s\n", name, r.Text())
				}
			}()
		}
	}()
	return ln
}

func roundTrip(t *testing.T, addr, line string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, line)
	r := bufio.NewScanner(c)
	if !r.Scan() {
		t.Fatalf("no answer through the proxy: %v", r.Err())
	}
	return r.Text()
}

func TestRoundRobinSkipsDeadBackends(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	p, err := Listen("127.0.0.1:0", Static(a.Addr().String(), deadAddr, b.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := map[string]int{}
	for i := range 6 {
		ans := roundTrip(t, p.Addr(), fmt.Sprint("hi", i))
		if want := fmt.Sprint(" hi", i); len(ans) < 2 || ans[1:] != want {
			t.Fatalf("answer %q, want a backend's name and %q", ans, want)
		}
		got[ans[:1]]++
	}
	if got["a"] != 3 || got["b"] != 3 {
		t.Errorf("connections per backend: %v, want 3 each (the dead one skipped)", got)
	}
}

func TestCloseCutsConnections(t *testing.T) {
	a := echo(t, "a")
	p, err := Listen("127.0.0.1:0", Static(a.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, "x")
	r := bufio.NewScanner(c)
	if !r.Scan() {
		t.Fatal("no answer before Close")
	}
	p.Close() // returns only once every proxied connection is closed
	if r.Scan() {
		t.Errorf("read %q after Close, want the connection cut", r.Text())
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}
