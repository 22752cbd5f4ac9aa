package server

import (
	"context"
	"net/http"

	"github.com/eimhq/eim/oscatalog"
)

func osModule() *Module {
	return &Module{
		Name:        "os",
		Summary:     "the OS profile catalog loaded into every project, kept in line with the manifests; which instances have an update available",
		Initialises: true,
		Build:       buildOS,
	}
}

func buildOS(b *Builder) (Parts, error) {
	// The manifests are read before anything listens: a bad one stops the
	// start, naming the file and the field.
	cat, err := b.loadCatalog(b.ctx)
	if err != nil {
		return Parts{}, err
	}
	refresh := b.cfg.OSCatalogRefresh
	if refresh == 0 {
		refresh = -1 // never
	}
	return Parts{Loops: []Loop{{Name: "catalog", Once: true, Run: func(ctx context.Context) error {
		// A Manager runs once: a lease won back starts a fresh one, from
		// the manifests as they are now.
		if c, err := b.loadCatalog(ctx); err == nil {
			cat = c
		} else if ctx.Err() == nil {
			b.Log.Warn("os catalog: manifests not read again; using those read before", "err", err)
		}
		return oscatalog.New(oscatalog.Options{Store: b.Store, Catalog: cat, Logger: b.Log, Refresh: refresh, Metrics: b.Metrics,
			Reload: func() (*oscatalog.Catalog, error) { return b.loadCatalog(ctx) }}).Run(ctx)
	}}}}, nil
}

// loadCatalog reads the shipped OS profiles and the operator's manifests
// (and, when asked, their package lists).
func (b *Builder) loadCatalog(ctx context.Context) (*oscatalog.Catalog, error) {
	c, err := oscatalog.Load(oscatalog.Shipped(), b.cfg.OSProfiles)
	if err != nil || !b.cfg.FetchPackages {
		return c, err
	}
	c, errs := oscatalog.FetchPackages(ctx, c, http.DefaultClient)
	for _, err := range errs {
		b.Log.Warn("os catalog: package list not fetched", "err", err)
	}
	return c, nil
}
