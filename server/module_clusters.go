package server

import (
	"slices"

	"github.com/eimhq/eim/clusters"
	"github.com/eimhq/eim/proto/eim/cluster/v1/clusterv1connect"
)

func clustersModule() *Module {
	return &Module{
		Name:    "clusters",
		Summary: "Kubernetes (k3s) clusters built from hosts with cluster templates (the original cluster manager's v2 API): install plans for nodes, rolling upgrades, node removal, the artifact store",
		Needs: []Need{{"host", "nodes learn of plan changes in heartbeat answers"},
			{"tenant", "projects get the baseline cluster templates from its defaults"}},
		Agent: true,
		Build: buildClusters,
	}
}

// clustersService is the clusters module's service: its API, reconciler
// and nodes' service, and the plan versions the host module's heartbeats
// carry. The UI calls its API in process too.
var clustersService = &Part[*clusters.Service]{Name: "clusters service", Build: func(b *Builder) (*clusters.Service, error) {
	key, err := Use(b, secretsKey)
	if err != nil {
		return nil, err
	}
	d := b.deployment
	return clusters.New(clusters.Options{
		Store: b.Store, Inventory: b.Inventory, Authenticator: b.Verifier, Key: key, Logger: b.Log, Metrics: b.Metrics,
		AgentURL: b.agentURL, Artifacts: b.cfg.ClusterArtifacts, ConnectTokenTTL: b.cfg.ConnectTokenTTL,
		Connect: func() bool { return slices.Contains(d.Modules(), "connect") },
	}), nil
}}

func buildClusters(b *Builder) (Parts, error) {
	cl, err := Use(b, clustersService)
	if err != nil {
		return Parts{}, err
	}
	sb, err := Use(b, southboundServer)
	if err != nil {
		return Parts{}, err
	}
	rpc, err := rpcOptions(b, true)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Routes: routesOf(cl.Routes()),
		Agent: []Route{
			route(clusterv1connect.NewClusterServiceHandler(cl, rpc...)),
			{"GET " + clusters.ArtifactsPath, sb.NodeHTTP(cl.ArtifactHandler())},
		},
		Loops: []Loop{
			{Name: "reconciler", Once: true, Run: cl.Reconcile},
			{Name: "versions", Run: cl.Versions().Run, Ready: cl.Versions().Live},
		},
	}, nil
}
