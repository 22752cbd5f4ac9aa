package sqlstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim/metrics"
)

// txMetrics are the transactions' series, resolved once per mode: a
// transaction costs an observation and no lookup.
type txMetrics struct {
	read, write txModeMetrics
}

type txModeMetrics struct {
	duration                        prometheus.Observer
	conflicts                       prometheus.Counter
	retryConflict, retryUnreachable prometheus.Counter
	unavailable                     prometheus.Counter
}

// txBuckets (seconds): from a cached read to a long batch on a busy
// database.
var txBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

func newTxMetrics(reg prometheus.Registerer) *txMetrics {
	duration := metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "eim_store_transaction_duration_seconds",
		Help:    "Time a store transaction took, retries included, by mode (read, write).",
		Buckets: txBuckets}, []string{"mode"}))
	conflicts := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_store_transaction_conflicts_total",
		Help: "Write transactions that lost a race with a concurrent writer (a row changed under them, a deadlock), by mode."}, []string{"mode"}))
	retries := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_store_transaction_retries_total",
		Help: "Transactions run again, by mode and reason: conflict (after losing a race), unreachable (a read that found the database away)."},
		[]string{"mode", "reason"}))
	unavailable := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "eim_store_transaction_unavailable_total",
		Help: "Transactions that failed because the database could not be reached (answered 503 / unavailable), by mode."}, []string{"mode"}))
	mode := func(m string) txModeMetrics {
		return txModeMetrics{
			duration: duration.WithLabelValues(m), conflicts: conflicts.WithLabelValues(m),
			retryConflict: retries.WithLabelValues(m, "conflict"), retryUnreachable: retries.WithLabelValues(m, "unreachable"),
			unavailable: unavailable.WithLabelValues(m),
		}
	}
	return &txMetrics{read: mode("read"), write: mode("write")}
}

func (m *txMetrics) of(write bool) *txModeMetrics {
	if write {
		return &m.write
	}
	return &m.read
}
