package server

import (
	"github.com/eimhq/eim/proto/eim/workloads/v1/workloadsv1connect"
	"github.com/eimhq/eim/workloads"
)

func workloadsModule() *Module {
	return &Module{
		Name:    "workloads",
		Summary: "edge workloads: containers run as podman pods on devices (hosts) selected by label, their revisions, per-device targets and status, log tails, upload grants",
		Needs:   []Need{{"host", "devices learn of changes of their workloads in heartbeat answers"}},
		Agent:   true,
		Build:   buildWorkloads,
	}
}

// workloadsService is the workloads module's service: its API, its
// devices' service, its targets loop and the heartbeats' versions of the
// devices' sets. The UI calls its API in process too.
var workloadsService = &Part[*workloads.Service]{Name: "workloads service", Build: func(b *Builder) (*workloads.Service, error) {
	key, err := Use(b, secretsKey)
	if err != nil {
		return nil, err
	}
	// Devices' uploads and downloads are granted by the projects' object
	// storage (or the embedded store, served by the objectstorage module).
	objects, err := Use(b, objectStore)
	if err != nil {
		return nil, err
	}
	return workloads.New(workloads.Options{Store: b.Store, FeedStore: b.Store, Inventory: b.Inventory,
		Authenticator: b.Verifier, Key: key, Logger: b.Log, Metrics: b.Metrics, Uploads: objects, Downloads: objects,
		RolloutTick: b.cfg.WorkloadsRolloutTick, StatusGrace: b.cfg.WorkloadsStatusGrace})
}}

func buildWorkloads(b *Builder) (Parts, error) {
	wl, err := Use(b, workloadsService)
	if err != nil {
		return Parts{}, err
	}
	rpc, err := rpcOptions(b, true)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Routes: routesOf(wl.Routes()),
		Agent:  []Route{route(workloadsv1connect.NewWorkloadServiceHandler(wl, rpc...))},
		Loops: []Loop{
			{Name: "targets", Once: true, Run: wl.Reconcile},
			{Name: "versions", Run: wl.Versions().Run, Ready: wl.Versions().Live},
		},
	}, nil
}
