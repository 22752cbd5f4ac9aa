package server

import "github.com/eimhq/eim/telemetry"

func telemetryModule() *Module {
	return &Module{
		Name:    "telemetry",
		Summary: "each node's effective telemetry configuration (log and metric profiles inherited by region, site and instance)",
		Needs:   []Need{{"host", "nodes fetch the configuration through its service, told by heartbeat answers"}},
		Agent:   true,
		Build:   buildTelemetry,
	}
}

// telemetryService is the telemetry service (a cache of every project's
// telemetry tree kept by the feed), which the host module's service
// answers nodes from.
var telemetryService = &Part[*telemetry.Service]{Name: "telemetry service", Build: func(b *Builder) (*telemetry.Service, error) {
	hosts, err := Use(b, hostView)
	if err != nil {
		return nil, err
	}
	return telemetry.New(telemetry.Options{Store: b.Store, Logger: b.Log, Hosts: hosts, Metrics: b.Metrics}), nil
}}

func buildTelemetry(b *Builder) (Parts, error) {
	tel, err := Use(b, telemetryService)
	if err != nil {
		return Parts{}, err
	}
	return Parts{Loops: []Loop{{Name: "configs", Run: tel.Run}}}, nil
}
