package server

import (
	"context"

	"github.com/eimhq/eim/coord"
	"github.com/eimhq/eim/hostmgr"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
)

func hostModule() *Module {
	return &Module{
		Name:    "host",
		Summary: "heartbeats, hardware inventory and liveness of running nodes (\"No Connection\"), reboot and shut-down actions; shared by its replicas",
		Agent:   true,
		Build:   buildHost,
	}
}

func buildHost(b *Builder) (Parts, error) {
	bt, err := Use(b, southboundBatcher)
	if err != nil {
		return Parts{}, err
	}
	prov, err := Use(b, provisioningService)
	if err != nil {
		return Parts{}, err
	}
	hosts, err := Use(b, hostView)
	if err != nil {
		return Parts{}, err
	}
	opts := hostmgr.Options{
		Store: b.Store, Liveness: hostmgr.StoreOf(b.Store, bt), ReportIn: prov.ReportIn, Logger: b.Log, Hosts: hosts, Metrics: b.Metrics,
		Interval: b.cfg.HeartbeatInterval, Timeout: b.cfg.HeartbeatTimeout,
		RebootTimeout: b.cfg.RebootTimeout, UpdateTimeout: b.cfg.UpdateTimeout,
	}
	// On PostgreSQL the host module's processes share the fleet's
	// liveness, by shards of hosts leased to the live processes running
	// it (hostmgr, "Replicas"); alone (SQLite) it watches every host.
	if b.shared() {
		store := b.Store
		opts.Members = func(ctx context.Context) ([]string, error) { return coord.Members(ctx, store, "host") }
		opts.Replica, opts.LeaseTTL = b.cfg.ReplicaID, b.cfg.LeaseTTL
	}
	// Heartbeat answers carry the versions of the node's telemetry,
	// maintenance, cluster and workloads configuration when those modules
	// run in this process (their caches answer from memory).
	if b.Selected("telemetry") {
		if opts.Telemetry, err = Use(b, telemetryService); err != nil {
			return Parts{}, err
		}
	}
	if b.Selected("maintenance") {
		if opts.Maintenance, err = Use(b, maintenanceService); err != nil {
			return Parts{}, err
		}
	}
	if b.Selected("clusters") {
		if opts.Clusters, err = Use(b, clustersService); err != nil {
			return Parts{}, err
		}
	}
	if b.Selected("workloads") {
		if opts.Workloads, err = Use(b, workloadsService); err != nil {
			return Parts{}, err
		}
	}
	rpc, err := rpcOptions(b, true)
	if err != nil {
		return Parts{}, err
	}
	svc := hostmgr.New(opts)
	return Parts{
		Agent: []Route{route(hostv1connect.NewHostServiceHandler(svc, rpc...))},
		Loops: []Loop{{Name: "liveness", Run: svc.Run, Ready: svc.Restored}},
	}, nil
}
