package server

import (
	"strings"

	"github.com/eimhq/eim/onboarding"
	"github.com/eimhq/eim/proto/eim/onboarding/v1/onboardingv1connect"
	"github.com/eimhq/eim/southbound"
)

func onboardingModule() *Module {
	return &Module{
		Name:    "onboarding",
		Summary: "nodes calling home are matched to registered hosts and given credentials; unknown devices with a project's token wait in its enrollment lobby (…/enrollmentrequests, …/enrollmentrules); invalidations finished; zero-touch instances created",
		Needs:   []Need{{"provisioning", "onboarded nodes ask it for their workflow"}},
		Agent:   true,
		Build:   buildOnboarding,
	}
}

// onboardingService is the onboarding service.
var onboardingService = &Part[*onboarding.Service]{Name: "onboarding service", Build: func(b *Builder) (*onboarding.Service, error) {
	bt, err := Use(b, southboundBatcher)
	if err != nil {
		return nil, err
	}
	return onboarding.New(onboarding.Options{
		Store: b.Store, Batcher: bt, Logger: b.Log, Metrics: b.Metrics,
		TokenURL: strings.TrimSuffix(b.agentURL, "/") + southbound.TokenPath,
	}), nil
}}

func buildOnboarding(b *Builder) (Parts, error) {
	onb, err := Use(b, onboardingService)
	if err != nil {
		return Parts{}, err
	}
	// A node's first calls: it has no credentials yet.
	opts, err := rpcOptions(b, false)
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		// The enrollment lobby's API (docs/enrollment.md).
		Routes: routesOf(onb.Routes(b.Verifier)),
		Agent:  []Route{route(onboardingv1connect.NewOnboardingServiceHandler(onb, opts...))},
		Loops:  []Loop{{Name: "reconciler", Once: true, Run: onb.Run}},
	}, nil
}
