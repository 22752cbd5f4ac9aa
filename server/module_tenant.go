package server

import "github.com/eimhq/eim/tenant"

func tenantModule() *Module {
	return &Module{
		Name:        "tenant",
		Summary:     "every project's defaults (telemetry groups, the default provider) from a versioned definition, its readiness, and its deletion as a resumable cascade",
		Needs:       []Need{{"api", "its reaper finishes the two-phase deletes of a deleted project's hosts and instances"}},
		Initialises: true,
		Build:       buildTenant,
	}
}

func buildTenant(b *Builder) (Parts, error) {
	o := tenant.Options{Store: b.Store, Inventory: b.Inventory, Logger: b.Log}
	rec, del := tenant.NewReconciler(o), tenant.NewDeleter(o)
	return Parts{Loops: []Loop{
		{Name: "defaults", Once: true, Run: rec.Run},
		{Name: "deletions", Once: true, Run: del.Run},
	}}, nil
}
