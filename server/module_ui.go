package server

import (
	"net/http"
	"strings"

	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/objstore"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/ui"
)

func uiModule() *Module {
	return &Module{
		Name:    "ui",
		Summary: "the web UI for fleet operators at /ui/ (server-rendered, embedded; / sends browsers there), signed in with the API's tokens and rights",
		Needs:   []Need{{"provisioning", "its reprovision button starts a workflow that module serves"}},
		Build:   buildUI,
	}
}

func buildUI(b *Builder) (Parts, error) {
	// The UI's forms write through the API, in process, whether or not
	// this process serves the API to others.
	v2, err := uiV2(b)
	if err != nil {
		return Parts{}, err
	}
	v1, err := uiV1(b)
	if err != nil {
		return Parts{}, err
	}
	prov, err := Use(b, provisioningService)
	if err != nil {
		return Parts{}, err
	}
	opts := ui.Options{Logger: b.Log, Reprovisioner: prov, Store: b.Store, API: v1, V2: v2, Deployed: b.deployment.Modules}
	if b.cfg.OIDCIssuer != "" && b.cfg.UIOIDCClientID != "" {
		opts.OIDC = &ui.OIDC{Issuer: b.cfg.OIDCIssuer, ClientID: b.cfg.UIOIDCClientID}
	}
	h, err := ui.New(b.Inventory, b.Verifier, opts)
	if err != nil {
		return Parts{}, err
	}
	var routes []Route
	for _, p := range ui.Patterns() {
		routes = append(routes, Route{p, h})
	}
	return Parts{Routes: routes, Loops: []Loop{{Name: "fleet", Run: h.Run, Ready: h.Loaded}}}, nil
}

// uiV2 is the v2 API (the clusters and connect modules' /v2/ routes) as
// the UI's clusters pages call it, in process with the user's token, as
// the server mounts it: the API's own checks apply. The clusters API is
// there when this process runs the clusters module, or was given the
// deployment's secrets key (--secrets-key: a cluster's join token is
// sealed under it when it is created); without either, a UI-only process
// would seal under a key of its own that no clusters module could open,
// so its clusters pages answer what the fallback says instead.
func uiV2(b *Builder) (http.Handler, error) {
	mux := http.NewServeMux()
	if b.Selected("clusters") || b.cfg.SecretsKey != "" {
		cl, err := Use(b, clustersService)
		if err != nil {
			return nil, err
		}
		for p, h := range cl.Routes() {
			mux.Handle(p, h)
		}
	}
	gw, err := Use(b, connectGateway)
	if err != nil {
		return nil, err
	}
	for p, h := range gw.Routes() {
		if strings.Contains(p, "/v2/") {
			mux.Handle(p, h)
		}
	}
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotImplemented)
		_, _ = w.Write([]byte(`{"code":"Unimplemented","message":"this process does not serve the clusters API: run the ui module beside the clusters module, or give it the deployment's --secrets-key"}` + "\n"))
	})
	return mux, nil
}

// uiV1 is the v1 API the UI's pages call in process: the api module's,
// and the API routes of the workloads, oob and objectstorage modules
// (edge workloads, hosts' BMCs and power jobs, the object storage
// setting) when this process runs the module or has the deployment's
// secrets key to build it with; otherwise those paths answer 501 saying
// so, and the pages show it.
func uiV1(b *Builder) (http.Handler, error) {
	api, err := Use(b, apiHandler)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", httpapi.InProcess(api))
	can := func(module string) bool { return b.Selected(module) || b.cfg.SecretsKey != "" }
	add := func(routes map[string]http.Handler) {
		for p, h := range routes {
			mux.Handle(p, h)
		}
	}
	absent := func(module string, patterns ...string) {
		for _, p := range patterns {
			mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotImplemented)
				_, _ = w.Write([]byte(`{"code":"Unimplemented","message":"this process does not serve the ` + module + ` module's API: run the ui module beside it, or give it the deployment's --secrets-key"}` + "\n"))
			})
		}
	}
	if can("workloads") {
		wl, err := Use(b, workloadsService)
		if err != nil {
			return nil, err
		}
		add(wl.Routes())
	} else {
		absent("workloads", "/v1/projects/{projectName}/edgeworkloads", "/v1/projects/{projectName}/edgeworkloads/")
	}
	if can("oob") {
		svc, err := Use(b, oobService)
		if err != nil {
			return nil, err
		}
		add(svc.Routes())
	} else {
		absent("oob", oob.BMCPath, oob.BMCPath+"/")
	}
	if can("objectstorage") {
		objs, err := Use(b, objectStore)
		if err != nil {
			return nil, err
		}
		add(objs.Routes())
	} else {
		absent("objectstorage", objstore.SettingPath, "/v1/projects/{projectName}/edgedata/")
	}
	return mux, nil
}
