package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// MaxFilterLength is the longest audit filter accepted.
const MaxFilterLength = 1000

// AuditQuery selects a page of a project's audit log.
type AuditQuery struct {
	Filter           string
	PageSize, Offset int
}

// Audit returns one page of the project's audit records, newest first, and
// how many match.
func (s *Service) Audit(ctx context.Context, project string, q AuditQuery) ([]eim.AuditRecord, int, error) {
	if err := checkProject(project); err != nil {
		return nil, 0, err
	}
	size, err := checkPage(q.PageSize, q.Offset)
	if err != nil {
		return nil, 0, err
	}
	if len(q.Filter) > MaxFilterLength {
		return nil, 0, eim.Errorf(eim.EINVALID, "filter: longer than %d characters", MaxFilterLength)
	}
	return s.store.Audit(ctx, project, eim.AuditQuery{Filter: q.Filter, Limit: size, Offset: q.Offset})
}

// WebhookInput is what a caller gives for a new webhook. An empty Secret
// asks the server for one (returned once, in the answer).
type WebhookInput struct {
	URL        string
	EventTypes []string
	Secret     string
}

// CreateWebhook validates in and stores the webhook; it returns it and the
// secret when the server generated it.
func (s *Service) CreateWebhook(ctx context.Context, project string, in WebhookInput) (*eim.Webhook, string, error) {
	if err := checkProject(project); err != nil {
		return nil, "", err
	}
	if err := eim.CheckWebhookURL(strings.TrimSpace(in.URL), s.webhookURLs); err != nil {
		return nil, "", err
	}
	if err := eim.CheckEventTypes(in.EventTypes); err != nil {
		return nil, "", err
	}
	var generated string
	if in.Secret == "" {
		in.Secret = newSecret()
		generated = in.Secret
	} else if err := eim.CheckWebhookSecret(in.Secret); err != nil {
		return nil, "", err
	}
	w := &eim.Webhook{Project: project, URL: strings.TrimSpace(in.URL), EventTypes: in.EventTypes, ID: eim.NewID(eim.KindWebhook)}
	w.Secret = s.secrets.SealText(in.Secret, eim.WebhookSecretPurpose(project, w.ID))
	if err := s.store.CreateWebhook(ctx, w); err != nil {
		return nil, "", err
	}
	return w, generated, nil
}

// WebhookChange changes a webhook: nil members keep their value; Secret
// "new" asks the server for a new secret (returned once).
type WebhookChange struct {
	URL        *string
	EventTypes *[]string
	Secret     *string
}

// NewSecret is WebhookChange.Secret's value that generates a secret.
const NewSecret = "new"

// UpdateWebhook validates ch and applies it; it returns the webhook and
// the secret when the server generated one.
func (s *Service) UpdateWebhook(ctx context.Context, project, id string, ch WebhookChange) (*eim.Webhook, string, error) {
	w, err := s.FindWebhook(ctx, project, id)
	if err != nil {
		return nil, "", err
	}
	if ch.URL != nil {
		u := strings.TrimSpace(*ch.URL)
		if err := eim.CheckWebhookURL(u, s.webhookURLs); err != nil {
			return nil, "", err
		}
		w.URL = u
	}
	if ch.EventTypes != nil {
		if err := eim.CheckEventTypes(*ch.EventTypes); err != nil {
			return nil, "", err
		}
		w.EventTypes = *ch.EventTypes
	}
	var generated string
	if ch.Secret != nil {
		if *ch.Secret == NewSecret {
			generated = newSecret()
			w.Secret = s.secrets.SealText(generated, eim.WebhookSecretPurpose(project, w.ID))
		} else {
			if err := eim.CheckWebhookSecret(*ch.Secret); err != nil {
				return nil, "", err
			}
			w.Secret = s.secrets.SealText(*ch.Secret, eim.WebhookSecretPurpose(project, w.ID))
		}
	}
	if err := s.store.UpdateWebhook(ctx, w); err != nil {
		return nil, "", err
	}
	return w, generated, nil
}

func newSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// FindWebhook returns a webhook of the project.
func (s *Service) FindWebhook(ctx context.Context, project, id string) (*eim.Webhook, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	if err := eim.CheckID(eim.KindWebhook, "webhookId", id); err != nil {
		return nil, err
	}
	return s.store.FindWebhook(ctx, project, id)
}

// ListWebhooks returns the project's webhooks.
func (s *Service) ListWebhooks(ctx context.Context, project string) ([]*eim.Webhook, error) {
	if err := checkProject(project); err != nil {
		return nil, err
	}
	return s.store.ListWebhooks(ctx, project)
}

// DeleteWebhook deletes a webhook of the project and its pending
// deliveries.
func (s *Service) DeleteWebhook(ctx context.Context, project, id string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := eim.CheckID(eim.KindWebhook, "webhookId", id); err != nil {
		return err
	}
	return s.store.DeleteWebhook(ctx, project, id)
}

// Deliveries returns a page of a webhook's deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, project, id string, pageSize, offset int) ([]*eim.Delivery, int, error) {
	if _, err := s.FindWebhook(ctx, project, id); err != nil {
		return nil, 0, err
	}
	size, err := checkPage(pageSize, offset)
	if err != nil {
		return nil, 0, err
	}
	return s.store.Deliveries(ctx, project, id, size, offset)
}

// DefaultAuditRetention is how long audit records are kept by default.
const DefaultAuditRetention = 90 * 24 * time.Hour

// AuditRetention deletes, every interval until ctx ends, the audit records
// older than retention (a run-once loop of the api module).
func (s *Service) AuditRetention(ctx context.Context, retention, every time.Duration) error {
	if retention <= 0 {
		retention = DefaultAuditRetention
	}
	if every <= 0 {
		every = time.Hour
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		n, err := s.store.PruneAudit(ctx, s.now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.Warn("audit retention", "err", err)
		case n > 0:
			s.logger.Info("audit retention: deleted old records", "records", n, "older_than", retention)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
