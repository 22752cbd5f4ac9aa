// Package wire is the connect tunnel's protocol, shared by the gateway
// (package connect) and the agent (package agent, eim-agent connect).
//
// The agent opens the tunnel with an HTTP/1.1 upgrade on the agent
// listener (TLS, the CA the agent pins): GET Path with "Upgrade: Protocol",
// its token as a bearer token, its cluster and version in headers. The
// gateway answers 101 and both sides run yamux over the connection: one
// TCP connection carrying many streams, each with its own flow-control
// window. Streams the gateway opens carry HTTP/1.1 to the agent's proxy of
// its upstream (the Kubernetes API); streams the agent opens carry
// HTTP/1.1 to the gateway's control endpoints (token rotation).
package wire

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/hashicorp/yamux"
)

const (
	// Path is where the agent listener accepts tunnels.
	Path = "/eim.connect.v1/tunnel"
	// Protocol is the Upgrade token.
	Protocol = "eim-connect/1"
	// ClusterHeader names the cluster as "project/cluster".
	ClusterHeader = "Eim-Connect-Cluster"
	// VersionHeader carries the agent's version.
	VersionHeader = "Eim-Agent-Version"
	// ExpiresHeader, on the 101 answer, is when the presented token
	// expires (RFC 3339): the agent rotates it before then.
	ExpiresHeader = "Eim-Token-Expires"

	// RotatePath is the control endpoint (on a stream the agent opens)
	// that issues the agent a fresh token; the answer is a Token.
	RotatePath = "/rotate"
)

// Token is the answer of RotatePath.
type Token struct {
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// Timing of the tunnel's pings: each side pings every Interval and gives
// up on a connection whose ping is not answered within Timeout, so a dead
// tunnel is found within Interval + Timeout (20 s by default).
type Timing struct {
	Interval, Timeout time.Duration
}

// DefaultTiming is the timing of a tunnel when none is given.
var DefaultTiming = Timing{Interval: 10 * time.Second, Timeout: 10 * time.Second}

func (t Timing) orDefault() Timing {
	if t.Interval <= 0 {
		t.Interval = DefaultTiming.Interval
	}
	if t.Timeout <= 0 {
		t.Timeout = DefaultTiming.Timeout
	}
	return t
}

// Config is the yamux configuration of both ends. keepalive sets whether
// yamux pings by itself (the agent's side; the gateway pings from its own
// loop, which records the round-trip times).
func Config(t Timing, keepalive bool) *yamux.Config {
	t = t.orDefault()
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = keepalive
	c.KeepAliveInterval = t.Interval
	c.ConnectionWriteTimeout = t.Timeout
	c.LogOutput = io.Discard
	// Streams are HTTP connections; a window of 1 MiB lets a list or a
	// watch of many objects flow without waiting a round trip per 256 KiB.
	c.MaxStreamWindowSize = 1 << 20
	c.AcceptBacklog = 1024
	return c
}

// Conn returns c reading first what r buffered of it (the bytes read with
// the HTTP upgrade's head that belong to what follows).
func Conn(c net.Conn, r *bufio.Reader) net.Conn {
	if r == nil || r.Buffered() == 0 {
		return c
	}
	return &bufConn{Conn: c, r: io.MultiReader(io.LimitReader(r, int64(r.Buffered())), c)}
}

type bufConn struct {
	net.Conn
	r io.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
