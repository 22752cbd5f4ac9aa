// Package metrics is EIM's own instrumentation: the process's registry
// (Go runtime and process collectors from client_golang, and the series
// the packages register on it), its /metrics handler, and the shared
// instruments of the two listeners: HTTP requests by route template
// (HTTP) and southbound RPCs by procedure and code (RPC).
//
// Registries are passed through constructors: a package that has series
// takes a prometheus.Registerer in its options and registers them there
// (nil: they are kept but not exposed, as in most tests). Nothing here or
// in the packages uses prometheus.DefaultRegisterer. docs/metrics.md
// lists every series.
package metrics

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a process's registry with the Go runtime and
// process collectors on it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Register registers c on reg and returns it; when an equal collector is
// registered already (a second instance of a component, a loop started
// again), that one is returned instead, so that instances share their
// series. A nil reg registers nothing. Any other failure (the same name
// with other labels) is a programming error: it panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("metrics: " + err.Error())
	}
	return c
}

// Handler serves g's series in the text format (gzip-compressed when
// the scraper accepts it), for a process without a module that serves
// more (the exporter module includes g in its own answer).
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
