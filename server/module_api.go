package server

import (
	"context"
	"net/http"
	"time"

	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/inventory"
)

func apiModule() *Module {
	return &Module{
		Name:    "api",
		Summary: "the northbound REST API (v1 and the original's legacy paths) and the reaper that finishes deletes of hosts and instances",
		Build:   buildAPI,
	}
}

// apiHandler is the northbound REST API's handler: the api module serves
// it, and the ui module's forms call it in process.
var apiHandler = &Part[http.Handler]{Name: "api handler", Build: func(b *Builder) (http.Handler, error) {
	prov, err := Use(b, provisioningService)
	if err != nil {
		return nil, err
	}
	return httpapi.New(b.Inventory, b.Verifier, httpapi.Options{
		Logger: b.Log, RateLimit: b.cfg.RateLimit, Reprovisioner: prov, RecoveryKeys: prov, AttestationKeys: prov,
		Deployed: b.deployment.Modules, DeployedNow: b.deployment.Fresh, Initialisers: b.registry.Initialisers(), Version: buildVersion(),
		Metrics: b.Metrics,
	}), nil
}}

func buildAPI(b *Builder) (Parts, error) {
	api, err := Use(b, apiHandler)
	if err != nil {
		return Parts{}, err
	}
	inv := b.Inventory
	return Parts{
		Routes: []Route{{"/", api}},
		Loops: []Loop{{Name: "reaper", Once: true, Run: func(ctx context.Context) error {
			return inventory.NewReaper(inv, inventory.ReaperOptions{Logger: b.Log, Metrics: b.Metrics}).Run(ctx)
		}}, {Name: "audit-retention", Once: true, Run: func(ctx context.Context) error {
			return inv.AuditRetention(ctx, b.cfg.AuditRetention, time.Hour)
		}}},
	}, nil
}
