package hostmgr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim/metrics"
)

// serviceMetrics are the heartbeat series. A heartbeat costs an increment
// and an observation of series resolved here, without labels: nothing is
// looked up or allocated on the path that 100,000 nodes take every 30 s.
type serviceMetrics struct {
	heartbeats prometheus.Counter
	lateness   prometheus.Observer
}

// latenessBuckets (seconds past the interval): on time, a little late, a
// heartbeat or more missed.
var latenessBuckets = []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900}

func newServiceMetrics(reg prometheus.Registerer) *serviceMetrics {
	return &serviceMetrics{
		heartbeats: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "eim_heartbeats_total",
			Help: "Heartbeats received (rate() gives heartbeats per second)."})),
		lateness: metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "eim_heartbeat_lateness_seconds",
			Help:    "How much later than its interval after the node's previous call (heard by this process) a heartbeat came; 0 when on time.",
			Buckets: latenessBuckets})),
	}
}

// heard counts a heartbeat that came at now, the node's previous call at
// prev (zero: none known), for a heartbeat interval of interval.
func (m *serviceMetrics) heard(prev, now time.Time, interval time.Duration) {
	m.heartbeats.Inc()
	if prev.IsZero() {
		return
	}
	m.lateness.Observe(max(0, (now.Sub(prev) - interval).Seconds()))
}
