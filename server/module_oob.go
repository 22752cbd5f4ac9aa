package server

import (
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/oob"
	"github.com/eimhq/eim/oob/ipmi"
)

func oobModule() *Module {
	return &Module{
		Name:    "oob",
		Summary: "hosts' BMCs (Redfish, IPMI, AMT) as resources of the API (…/hosts/{hostId}/bmc), their passwords sealed; desiredPowerState carried out through them as power jobs confirmed from the BMC's state, their power state polled",
		Build:   buildOOB,
	}
}

// oobService is the oob module's service: hosts' BMCs, their power jobs
// and polls. The UI calls its API in process too.
var oobService = &Part[*oob.Service]{Name: "oob service", Build: func(b *Builder) (*oob.Service, error) {
	key, err := Use(b, secretsKey)
	if err != nil {
		return nil, err
	}
	return oob.New(oob.Options{Store: b.Store, Authenticator: b.Verifier, Key: key, Logger: b.Log.With("module", "oob"),
		Feed: b.Store, Metrics: b.Metrics, Holder: b.cfg.ReplicaID + "/" + eim.NewID("oob"),
		Drivers: map[eim.BMCProtocol]oob.Driver{
			eim.BMCIPMI:    oob.NewIPMI(ipmi.NewDriver(b.cfg.OOBIPMITool), ipmi.Config{Timeout: 10 * time.Second}),
			eim.BMCRedfish: oob.NewRedfishDriver(oob.RedfishOptions{}),
			eim.BMCAMT:     oob.NewAMTDriver(oob.AMTOptions{}),
		},
		Workers: b.cfg.OOBWorkers, PollWorkers: b.cfg.OOBPollWorkers, PollEvery: b.cfg.OOBPollEvery, SiteLimit: b.cfg.OOBSiteLimit, SiteWindow: b.cfg.OOBSiteWindow,
		ConfirmTimeout: b.cfg.OOBConfirmTimeout, JobTimeout: b.cfg.OOBJobTimeout, Lease: b.cfg.OOBLease, GracefulTimeout: b.cfg.OOBGracefulTimeout,
		HTTPBootURL: b.cfg.OOBHTTPBootURL, CallHomeTimeout: b.cfg.OOBCallHomeTimeout, VirtualMediaURL: b.cfg.OOBVirtualMediaURL})
}}

func buildOOB(b *Builder) (Parts, error) {
	svc, err := Use(b, oobService)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		Routes: routesOf(svc.Routes()),
		Loops: []Loop{
			{Name: "jobs", Run: svc.Work},
			{Name: "follow", Once: true, Run: svc.Follow},
			{Name: "poll", Once: true, Run: svc.Poll},
		},
	}, nil
}
