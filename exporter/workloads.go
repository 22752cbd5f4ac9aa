package exporter

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eimhq/eim"
)

// eim_workload_devices: the devices of each edge workload by the revision
// they report running and their summary (eim.EdgeWorkloadSummary). A
// projection of the workloads module's tables, read by one grouped
// statement at each scrape: no copy of the devices is kept here.
var descWorkloadDevices = prometheus.NewDesc("eim_workload_devices",
	"Devices of each edge workload by the revision they report running (\"0\" before any report) and their status: running, degraded, failed, updating, unknown (no report yet), removing (no longer selected).",
	[]string{"project", "workload", "revision", "status"}, nil)

// workloadCollector collects eim_workload_devices within a scrape.
type workloadCollector struct {
	ctx   context.Context
	store eim.EdgeWorkloadStore
	log   *slog.Logger
}

// Describe sends nothing: the collector is unchecked.
func (workloadCollector) Describe(chan<- *prometheus.Desc) {}

// Collect counts the devices; a store away shows no series (logged).
func (c workloadCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.store.EdgeWorkloadDeviceCounts(c.ctx)
	if err != nil {
		if c.ctx.Err() == nil {
			c.log.Warn("exporter: edge workload devices", "err", err)
		}
		return
	}
	type key struct{ project, workload, revision, status string }
	sum := map[key]int{}
	var order []key
	for _, n := range counts {
		k := key{n.Project, n.Workload, strconv.FormatInt(n.Revision, 10), eim.EdgeWorkloadSummary(n.Target, n.Revision, n.Phase)}
		if _, ok := sum[k]; !ok {
			order = append(order, k)
		}
		sum[k] += n.Devices
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(descWorkloadDevices, prometheus.GaugeValue, float64(sum[k]), k.project, k.workload, k.revision, k.status)
	}
}
