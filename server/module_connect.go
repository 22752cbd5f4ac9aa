package server

import (
	"net"
	"slices"

	gateway "github.com/eimhq/eim/connect"
	"github.com/eimhq/eim/connect/wire"
)

func connectModule() *Module {
	return &Module{
		Name:    "connect",
		Summary: "the tunnel edge clusters open to reach their Kubernetes API behind NAT: users at /kubernetes/{project}-{cluster}/ impersonated, connect tokens, the tunnel registry shared by its replicas",
		Agent:   true,
		Build:   buildConnect,
	}
}

// connectGateway is the connect module's gateway: its tunnels, proxy and
// API. The UI calls its API (kubeconfigs, connections) in process too.
var connectGateway = &Part[*gateway.Gateway]{Name: "connect gateway", Build: func(b *Builder) (*gateway.Gateway, error) {
	peer := b.cfg.ConnectPeerURL
	if peer == "" {
		peer = peerURL(b.httpAddr)
	}
	d := b.deployment
	return gateway.New(gateway.Options{
		Store: b.Store, Authenticator: b.Verifier, Minter: b.Issuer, Logger: b.Log, Replica: b.cfg.ReplicaID,
		PeerURL:  func() string { return peer },
		Timing:   wire.Timing{Interval: b.cfg.ConnectPingInterval, Timeout: b.cfg.ConnectPingTimeout},
		TokenTTL: b.cfg.ConnectTokenTTL,
		// With the clusters module in the deployment, a kubeconfig is
		// only for a cluster it knows.
		ClustersDeployed: func() bool { return slices.Contains(d.Modules(), "clusters") },
	}), nil
}}

func buildConnect(b *Builder) (Parts, error) {
	g, err := Use(b, connectGateway)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Routes: routesOf(g.Routes()),
		Agent:  routesOf(g.AgentRoutes()),
		Loops:  []Loop{{Name: "tunnels", Run: g.Run}},
	}, nil
}

// peerURL is http://ADDR of the bound HTTP listener, with an unspecified
// host (0.0.0.0, ::) as loopback: replicas on other machines need
// --connect-peer-url.
func peerURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
