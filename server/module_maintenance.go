package server

import (
	"github.com/eimhq/eim/maintenance"
	"github.com/eimhq/eim/proto/eim/maintenance/v1/maintenancev1connect"
)

func maintenanceModule() *Module {
	return &Module{
		Name:    "maintenance",
		Summary: "maintenance windows and OS update policies delivered to nodes, their update reports",
		Needs:   []Need{{"host", "nodes learn of plan changes in heartbeat answers"}},
		Agent:   true,
		Build:   buildMaintenance,
	}
}

// maintenanceService is the maintenance service (a cache of every
// project's maintenance plans kept by the feed); the host module's
// heartbeat answers read its versions.
var maintenanceService = &Part[*maintenance.Service]{Name: "maintenance service", Build: func(b *Builder) (*maintenance.Service, error) {
	hosts, err := Use(b, hostView)
	if err != nil {
		return nil, err
	}
	return maintenance.New(maintenance.Options{Store: b.Store, Logger: b.Log, Hosts: hosts, Metrics: b.Metrics}), nil
}}

func buildMaintenance(b *Builder) (Parts, error) {
	maint, err := Use(b, maintenanceService)
	if err != nil {
		return Parts{}, err
	}
	rpc, err := rpcOptions(b, true)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Agent: []Route{route(maintenancev1connect.NewMaintenanceServiceHandler(maint, rpc...))},
		Loops: []Loop{{Name: "plans", Run: maint.Run}},
	}, nil
}
