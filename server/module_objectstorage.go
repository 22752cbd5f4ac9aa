package server

import (
	"github.com/eimhq/eim/objstore"
)

func objectStorageModule() *Module {
	return &Module{
		Name:    "objectstorage",
		Summary: "each project's object storage for its devices' data (/v1/projects/{p}/objectstorage, the secret sealed), the embedded store under the data directory when a project has none (uploads on the agent listener at /objects/, served back at /v1/projects/{p}/edgedata/{hostId}) and the grants devices upload with",
		Agent:   true,
		Build:   buildObjectStorage,
	}
}

// objectStore is the projects' object storage: their settings' API, the
// embedded store, and the granter of devices' uploads and downloads.
// Its embedded store is reached through the agent listener, so it has one
// only in a process with an agent module (the objectstorage module is
// one).
var objectStore = &Part[*objstore.Service]{Name: "object storage", Build: func(b *Builder) (*objstore.Service, error) {
	key, err := Use(b, secretsKey)
	if err != nil {
		return nil, err
	}
	return objstore.New(objstore.Options{Store: b.Store, Authenticator: b.Verifier, Key: key, DataDir: b.cfg.DataDir,
		AgentURL: b.agentURL, Logger: b.Log.With("part", "objstore")})
}}

func buildObjectStorage(b *Builder) (Parts, error) {
	svc, err := Use(b, objectStore)
	if err != nil {
		return Parts{}, err
	}
	return Parts{Routes: routesOf(svc.Routes()), AgentStreams: routesOf(svc.AgentRoutes())}, nil
}
