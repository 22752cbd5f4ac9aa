package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/eimhq/eim"
)

// The headers of a delivery (besides eim.SignatureHeader).
const (
	HeaderEventID    = "EIM-Event-Id"    // the event's ID, the same in every attempt and for every webhook
	HeaderDeliveryID = "EIM-Delivery-Id" // this webhook's delivery of it
	HeaderEventType  = "EIM-Event-Type"
)

// batchPerWebhook bounds what one worker takes at a time: a receiver that
// hangs holds its worker for at most this many timeouts before the
// deliveries are looked at again.
const batchPerWebhook = 10

// dueBatch is how many due deliveries Deliver reads at a time.
const dueBatch = 200

// Deliver runs until ctx ends: it sends the due deliveries, one worker per
// webhook at a time (a webhook's deliveries go one after another; those of
// one resource in the order of their events), and records each attempt.
func (s *Service) Deliver(ctx context.Context) error {
	client := s.client()
	defer client.CloseIdleConnections()
	var (
		mu   sync.Mutex
		busy = map[string]bool{}
		wg   sync.WaitGroup
	)
	defer wg.Wait()
	done := make(chan struct{}, 1)
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	for {
		mu.Lock()
		skip := make([]string, 0, len(busy))
		for id := range busy {
			skip = append(skip, id)
		}
		mu.Unlock()
		due, err := s.o.Store.DueDeliveries(ctx, s.o.Now(), dueBatch, skip)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("webhooks: read due deliveries", "err", err)
		}
		byHook := map[string][]*eim.Delivery{}
		var hooks []string
		for _, d := range due {
			if len(byHook[d.WebhookID]) == 0 {
				hooks = append(hooks, d.WebhookID)
			}
			if len(byHook[d.WebhookID]) < batchPerWebhook {
				byHook[d.WebhookID] = append(byHook[d.WebhookID], d)
			}
		}
		for _, id := range hooks {
			mu.Lock()
			if busy[id] {
				mu.Unlock()
				continue
			}
			busy[id] = true
			mu.Unlock()
			ds := byHook[id]
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(busy, id)
					mu.Unlock()
					select {
					case done <- struct{}{}:
					default:
					}
				}()
				for _, d := range ds {
					if ctx.Err() != nil {
						return
					}
					s.attempt(ctx, client, d)
				}
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.wake:
		case <-done:
		}
	}
}

// attempt sends d once and records the outcome.
func (s *Service) attempt(ctx context.Context, client *http.Client, d *eim.Delivery) {
	status, err := s.send(ctx, client, d)
	if ctx.Err() != nil {
		return // the loop ends: the attempt is made again by whoever runs it next
	}
	now := s.o.Now()
	d.Attempts++
	d.LastStatus = status
	switch {
	case err == nil:
		d.State, d.LastError = eim.DeliveryDelivered, ""
	default:
		d.LastError = err.Error()
		if len(d.LastError) > 500 {
			d.LastError = d.LastError[:500]
		}
		next := now.Add(s.backoff(d.Attempts))
		if next.Sub(d.CreatedAt.Time) > s.o.MaxAge {
			d.State = eim.DeliveryFailed
		} else {
			d.NextAt = eim.NewTime(next)
		}
	}
	if err := s.o.Store.SaveDelivery(ctx, d); err != nil && ctx.Err() == nil {
		s.log.Warn("webhooks: record a delivery attempt", "delivery", d.ID, "err", err)
	}
	if err != nil {
		s.log.Info("webhooks: delivery failed", "delivery", d.ID, "webhook", d.WebhookID, "attempt", d.Attempts, "status", status, "err", d.LastError)
	}
}

// backoff is the pause after the n-th failed attempt: MinBackoff doubled
// n-1 times, up to MaxBackoff, less up to a fifth at random.
func (s *Service) backoff(n int) time.Duration {
	d := s.o.MinBackoff
	for i := 1; i < n && d < s.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, s.o.MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// send posts d's body, signed; a 2xx answer is a success.
func (s *Service) send(ctx context.Context, client *http.Client, d *eim.Delivery) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "eim-webhooks/1")
	req.Header.Set(HeaderEventID, eventID(d))
	req.Header.Set(HeaderDeliveryID, d.ID)
	req.Header.Set(HeaderEventType, d.EventType)
	secret, err := s.o.Secrets.OpenText(d.Secret, eim.WebhookSecretPurpose(d.Project, d.WebhookID))
	if err != nil {
		// Not sent unsigned: the receiver would refuse it, or worse, not.
		// A process given another key than the API's is a configuration
		// error the operator can fix within the delivery's retries.
		return 0, fmt.Errorf("the webhook's secret cannot be read, so the delivery cannot be signed (%v): give this process the same --secrets-key as the API's", err)
	}
	req.Header.Set(eim.SignatureHeader, eim.Sign(secret, s.o.Now(), d.Body))
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("no answer within %s", s.o.Timeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// eventID is the event's ID: the delivery's less its webhook suffix.
func eventID(d *eim.Delivery) string {
	if i := len(d.ID) - 9; i > 0 && d.ID[i] == '-' {
		return d.ID[:i]
	}
	return d.ID
}

// client is the HTTP client of the deliveries: no redirects (a receiver
// must not send the server elsewhere), no proxy from the environment, and
// every connection's address checked against the URL policy once the name
// is resolved (a name that resolves to a metadata address is refused).
func (s *Service) client() *http.Client {
	dialer := &net.Dialer{
		Timeout: s.o.Timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return eim.CheckWebhookAddr(ap.Addr(), s.o.URLs)
		},
	}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   s.o.Timeout,
		ResponseHeaderTimeout: s.o.Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       time.Minute,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
