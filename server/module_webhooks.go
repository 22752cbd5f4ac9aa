package server

import (
	"github.com/eimhq/eim"
	"github.com/eimhq/eim/webhooks"
)

func webhooksModule() *Module {
	return &Module{
		Name:    "webhooks",
		Summary: "a project's events (host onboarded or lost, instance running or failed, project deleted) delivered to its webhooks, signed, retried for a day",
		Build:   buildWebhooks,
	}
}

func buildWebhooks(b *Builder) (Parts, error) {
	key, err := Use(b, secretsKey)
	if err != nil {
		return Parts{}, err
	}
	wh := webhooks.New(webhooks.Options{Store: b.Store, Logger: b.Log.With("module", "webhooks"), Secrets: key,
		URLs: eim.URLPolicy{AllowPrivate: b.cfg.WebhookAllowPrivate}, Timeout: b.cfg.WebhookTimeout})
	return Parts{Loops: []Loop{
		{Name: "follow", Once: true, Run: wh.Follow},
		{Name: "deliver", Once: true, Run: wh.Deliver},
	}}, nil
}
