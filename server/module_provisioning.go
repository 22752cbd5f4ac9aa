package server

import (
	"context"

	"connectrpc.com/connect"

	"github.com/eimhq/eim/attest/tpmquote"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	"github.com/eimhq/eim/provisioning"
)

func provisioningModule() *Module {
	return &Module{
		Name:    "provisioning",
		Summary: "network boot (/boot/), the OS installation workflows nodes run, their timeouts and reprovisioning",
		Needs:   []Need{{"onboarding", "nodes get their credentials from it"}, {"os", "workflows install the OS profiles it loads"}},
		Agent:   true,
		Build:   buildProvisioning,
	}
}

// provisioningOptions are the provisioning service's options, which its
// boot handler is made with too.
var provisioningOptions = &Part[provisioning.Options]{Name: "provisioning options", Build: func(b *Builder) (provisioning.Options, error) {
	bt, err := Use(b, southboundBatcher)
	if err != nil {
		return provisioning.Options{}, err
	}
	o := provisioning.Options{
		Store: b.Store, Batcher: bt, Logger: b.Log, Metrics: b.Metrics,
		AgentURL: b.agentURL, ArtifactsDir: b.cfg.BootArtifacts, ActionTimeouts: b.cfg.ActionTimeouts,
	}
	if b.ca != nil {
		o.CACertPEM, o.CAFingerprint = b.ca.CACertPEM(), b.ca.Fingerprint()
	}
	o.SecureBootCert, o.RequireSecureBoot = b.sbCert, b.cfg.RequireSecureBoot
	// Recovery keys of encrypted disks are sealed with the secrets key.
	if o.SecretsKey, err = Use(b, secretsKey); err != nil {
		return provisioning.Options{}, err
	}
	if len(b.cfg.TPMEKCAFiles) > 0 || len(b.cfg.TPMEKCADirs) > 0 {
		if o.EKRoots, err = tpmquote.LoadEKRoots(b.cfg.TPMEKCAFiles, b.cfg.TPMEKCADirs); err != nil {
			return provisioning.Options{}, err
		}
		b.Log.Info("attestation: TPM endorsement keys are believed only with a certificate that chains to a configured TPM maker CA", "cas", o.EKRoots.Len(), "subjects", o.EKRoots.Subjects())
	} else if b.Selected("provisioning") {
		b.Log.Info("attestation: no TPM maker CA configured (--tpm-ek-ca-file): a host's TPM keys are trusted on first use")
	}
	return o, nil
}}

// provisioningService is the provisioning module's service; the host
// module's report-in and the API's reprovisioning use it too.
var provisioningService = &Part[*provisioning.Service]{Name: "provisioning service", Build: func(b *Builder) (*provisioning.Service, error) {
	o, err := Use(b, provisioningOptions)
	if err != nil {
		return nil, err
	}
	return provisioning.New(o), nil
}}

func buildProvisioning(b *Builder) (Parts, error) {
	prov, err := Use(b, provisioningService)
	if err != nil {
		return Parts{}, err
	}
	o, err := Use(b, provisioningOptions)
	if err != nil {
		return Parts{}, err
	}
	opts, err := rpcOptions(b, true)
	if err != nil {
		return Parts{}, err
	}
	boot := provisioning.BootHandler(o)
	parts := Parts{
		// The boot script over plain HTTP (iPXE without TLS), and over
		// HTTPS too: the micro-OS fetches its signed manifest through the
		// CA it pins (and UEFI HTTPS boot can load the artifacts).
		Routes: []Route{{"/boot/", boot}},
		Agent: []Route{
			route(provisioningv1connect.NewProvisioningServiceHandler(prov, opts...)),
			{"/boot/", boot},
		},
		Loops: []Loop{{Name: "timeouts", Once: true, Run: prov.Run}},
	}
	if !b.Selected("host") {
		// The installed OS's first report-in makes the instance RUNNING:
		// without the host module here, this module serves that call of
		// the host service itself (and answers its others Unimplemented).
		parts.Agent = append(parts.Agent, route(hostv1connect.NewHostServiceHandler(reportInOnly{prov: prov}, opts...)))
	}
	return parts, nil
}

// reportInOnly is the host service of a process without the host module.
type reportInOnly struct {
	hostv1connect.UnimplementedHostServiceHandler
	prov *provisioning.Service
}

func (r reportInOnly) ReportIn(ctx context.Context, req *connect.Request[hostv1.ReportInRequest]) (*connect.Response[hostv1.ReportInResponse], error) {
	return r.prov.ReportIn(ctx, req)
}
