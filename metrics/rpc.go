package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
)

// RPC counts the southbound (Connect) calls a process answers, by
// procedure and code, and times them by procedure. Procedures are those
// of the handlers mounted (Connect answers an unknown one before any
// interceptor), codes Connect's seventeen and "ok": the series are
// bounded.
type RPC struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	mu    sync.RWMutex
	procs map[string]*procSeries
}

// procSeries are a procedure's resolved series; a code's counter is
// resolved on its first call.
type procSeries struct {
	name     string
	duration prometheus.Observer
	codes    [maxCode + 1]atomic.Pointer[prometheus.Counter] // [0]: ok
}

// maxCode is the highest Connect code (Unauthenticated).
const maxCode = int(connect.CodeUnauthenticated)

// NewRPC returns the instrument, registered on reg.
func NewRPC(reg prometheus.Registerer) *RPC {
	return &RPC{
		requests: Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eim_rpc_requests_total",
			Help: "Southbound RPCs answered, by procedure and code (\"ok\", or the Connect error code).",
		}, []string{"procedure", "code"})),
		duration: Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "eim_rpc_duration_seconds",
			Help:    "Time to answer southbound RPCs, by procedure.",
			Buckets: durationBuckets,
		}, []string{"procedure"})),
		procs: map[string]*procSeries{},
	}
}

// Interceptor returns the Connect interceptor that counts calls; put it
// before the others (authentication), so that their refusals count.
func (m *RPC) Interceptor() connect.Interceptor { return rpcInterceptor{m} }

type rpcInterceptor struct{ m *RPC }

func (i rpcInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		resp, err := next(ctx, req)
		i.m.observe(req.Spec().Procedure, err, time.Since(start))
		return resp, err
	}
}

func (i rpcInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i rpcInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		i.m.observe(conn.Spec().Procedure, err, time.Since(start))
		return err
	}
}

// observe counts a call.
func (m *RPC) observe(procedure string, err error, took time.Duration) {
	m.mu.RLock()
	p := m.procs[procedure]
	m.mu.RUnlock()
	if p == nil {
		p = m.proc(procedure)
	}
	code := 0
	if err != nil {
		code = int(connect.CodeOf(err))
		if code <= 0 || code > maxCode {
			code = int(connect.CodeUnknown)
		}
	}
	c := p.codes[code].Load()
	if c == nil {
		label := "ok"
		if code > 0 {
			label = connect.Code(code).String()
		}
		cnt := m.requests.WithLabelValues(p.name, label)
		c = &cnt
		p.codes[code].Store(c)
	}
	(*c).Inc()
	p.duration.Observe(took.Seconds())
}

func (m *RPC) proc(procedure string) *procSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.procs[procedure]; p != nil {
		return p
	}
	p := &procSeries{name: procedure, duration: m.duration.WithLabelValues(procedure)}
	m.procs[procedure] = p
	return p
}
