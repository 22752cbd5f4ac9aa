package server

import "github.com/eimhq/eim/exporter"

func exporterModule() *Module {
	return &Module{
		Name:    "exporter",
		Summary: "the fleet's state as Prometheus metrics on /metrics: the original's per-host series, aggregates by project and site, duration histograms",
		Build:   buildExporter,
	}
}

func buildExporter(b *Builder) (Parts, error) {
	exp := exporter.New(exporter.Options{Store: b.Store, Logger: b.Log, PerHost: b.cfg.ExporterPerHost, Own: b.Metrics, Metrics: b.Metrics})
	return Parts{
		// /metrics: the process's own series, then the fleet's.
		Metrics: exp,
		Loops:   []Loop{{Name: "snapshot", Run: exp.Run, Ready: exp.Loaded}},
	}, nil
}
