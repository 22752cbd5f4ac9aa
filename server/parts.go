package server

import (
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim/hostview"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/metrics"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/southbound"
)

// The parts that no one module owns. A module's own service, which other
// modules may call too, is declared in its file (provisioningService in
// module_provisioning.go, …).

// hostView is the process's one view of the hosts, which node
// authentication, the host module, telemetry and maintenance share: a
// host is read and followed once per process, not once per module. The
// process runs it (a per-process loop) once something asked for it.
var hostView = &Part[*hostview.View]{Name: "host view", Build: func(b *Builder) (*hostview.View, error) {
	// Without the UI's or the exporter's projections (a replica of the
	// nodes' modules), the view holds only the hosts whose nodes call
	// this process, dropping those silent for many intervals (a node's
	// connection, and so its replica, changed).
	v := hostview.New(hostview.Options{Store: b.Store, Logger: b.Log, Metrics: b.Metrics,
		Evict: max(5*time.Minute, 10*b.cfg.HeartbeatInterval)})
	b.runLoop("agent", Loop{Name: "hosts", Run: v.Run, Ready: v.Live})
	return v, nil
}}

// southboundBatcher batches the nodes' writes: concurrent calls share a
// transaction (inventory.Batcher).
//
// SQLite has one writer: one batch at a time. On PostgreSQL each statement
// is a round trip; batches in flight together hide it, and the agents'
// calls, several reads each, gain from overlapping, up to a point: with
// batches written grouped and a worker free at its commit, 10,000 nodes'
// Day 0 took 83 s with one worker, 60 s with two and 70 s with eight
// (BENCHMARKS.md).
var southboundBatcher = &Part[*inventory.Batcher]{Name: "southbound batcher", Build: func(b *Builder) (*inventory.Batcher, error) {
	// The workers' default follows the store's capabilities: one on
	// SQLite, two on PostgreSQL.
	bt := inventory.NewBatcher(b.Store, inventory.BatcherOptions{MaxBatch: 128, Logger: b.Log})
	b.onClose(bt.Close)
	registerBatcher(b.Metrics, "southbound", bt)
	return bt, nil
}}

// southboundServer is the agent listener's handler: node authentication,
// the token endpoint, and the services the modules mount on it.
var southboundServer = &Part[*southbound.Server]{Name: "southbound server", Build: func(b *Builder) (*southbound.Server, error) {
	hosts, err := Use(b, hostView)
	if err != nil {
		return nil, err
	}
	sb := southbound.New(southbound.Options{Store: b.Store, Issuer: b.Issuer, Logger: b.Log, TokenLeeway: leewayOption(b.cfg.TokenLeeway), Hosts: hosts,
		TokenRate: b.cfg.NodeTokenRate, Metrics: b.Metrics})
	// Node credentials, read by every authenticated call, are a cache
	// kept by the feed.
	b.runLoop("agent", Loop{Name: "credentials", Run: sb.Run})
	return sb, nil
}}

// rpcMetrics counts the Connect handlers' calls (rpcOptions).
var rpcMetrics = &Part[*metrics.RPC]{Name: "rpc metrics", Build: func(b *Builder) (*metrics.RPC, error) {
	return metrics.NewRPC(b.Metrics), nil
}}

// secretsKey is the key that seals secrets at rest (webhooks' secrets and
// the inventory's, clusters' tokens, BMC passwords …): every process that
// writes or reads them must hold the same one (--secrets-key on a
// deployment of several). The operator's file, else the data directory's
// (made on first start).
var secretsKey = &Part[*seal.Key]{Name: "secrets key", Build: func(b *Builder) (*seal.Key, error) {
	if b.cfg.SecretsKey != "" {
		return seal.Load(b.cfg.SecretsKey) // its errors name the key
	}
	return seal.LoadDir(b.cfg.DataDir)
}}

// rpcOptions are the Connect options of a handler of the nodes' calls: its
// calls counted (first, so that the calls node authentication refuses
// count too), nodes authenticated unless the calls are a node's first
// (onboarding), small answers not compressed.
func rpcOptions(b *Builder, authenticated bool) ([]connect.HandlerOption, error) {
	rpc, err := Use(b, rpcMetrics)
	if err != nil {
		return nil, err
	}
	opts := []connect.HandlerOption{connect.WithInterceptors(rpc.Interceptor())}
	if authenticated {
		sb, err := Use(b, southboundServer)
		if err != nil {
			return nil, err
		}
		opts = append(opts, connect.WithInterceptors(sb.Interceptor()))
	}
	return append(opts, small), nil
}

// small: most answers are a few hundred bytes, where gzip would cost more
// CPU than it saves bytes; workflows with their cloud-init are compressed.
var small = connect.WithCompressMinBytes(4 << 10)

// registerBatcher exposes a batcher's queue and counters on reg, labelled
// batcher=name; they are read at each scrape, so the batcher's own path
// costs nothing more.
func registerBatcher(reg prometheus.Registerer, name string, bt *inventory.Batcher) {
	if reg == nil {
		return
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"batcher": name}, reg)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "eim_batcher_queue_depth",
			Help: "Calls waiting in a batcher's queue for a transaction (api: the API's creates; southbound: the nodes' writes)."},
			func() float64 { return float64(bt.Stats().Queued) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_batches_total",
			Help: "Transactions a batcher committed."},
			func() float64 { return float64(bt.Stats().Batches) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_calls_total",
			Help: "Calls a batcher finished (committed or failed)."},
			func() float64 { return float64(bt.Stats().Calls) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "eim_batcher_reruns_total",
			Help: "Batches a batcher ran again without a call that failed."},
			func() float64 { return float64(bt.Stats().Reruns) }),
	)
}
