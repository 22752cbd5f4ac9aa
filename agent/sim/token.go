package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eimhq/eim/agent"
)

// errRevoked means the token endpoint refused a node's credentials
// (invalid_client): only a new Discover would get it new ones.
var errRevoked = errors.New("token endpoint: invalid_client (credentials revoked)")

// deferredError is a token request the endpoint admits later: it asks
// to be tried again after a while (agent.RetryHint reads it).
type deferredError struct{ after time.Duration }

func (e *deferredError) Error() string {
	return fmt.Sprintf("token endpoint: deferred (retry after %s)", e.after)
}

// RetryAfter implements agent.RetryHint's hint.
func (e *deferredError) RetryAfter() time.Duration { return e.after }

// fetchToken gets a node token with the OAuth2 client-credentials grant, as
// agent.Node does (its token cache is per node and unexported; a simulated
// node in the scheduler keeps its token in its own record instead).
func fetchToken(ctx context.Context, hc *http.Client, tokenURL, clientID, secret string) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", 0, fmt.Errorf("token response: %w", err)
	}
	var r struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
	}
	_ = json.Unmarshal(body, &r) // an unparsable body is judged by its status
	switch {
	case resp.StatusCode == http.StatusOK && r.AccessToken != "":
		ttl := time.Duration(r.ExpiresIn) * time.Second
		if ttl <= 0 {
			ttl = time.Minute
		}
		return r.AccessToken, ttl, nil
	case r.Error == "invalid_client":
		return "", 0, errRevoked
	case resp.StatusCode == http.StatusServiceUnavailable && agent.ParseRetryAfter(resp.Header.Get("Retry-After")) > 0:
		return "", 0, &deferredError{after: agent.ParseRetryAfter(resp.Header.Get("Retry-After"))}
	case r.Error != "":
		return "", 0, fmt.Errorf("token endpoint: HTTP %d: %s", resp.StatusCode, r.Error)
	default:
		return "", 0, fmt.Errorf("token endpoint: HTTP %d", resp.StatusCode)
	}
}
