package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
)

// errInvalidClient means the token endpoint refused the client credentials:
// they were revoked or superseded, and only a new Discover gets new ones.
var errInvalidClient = errors.New("token endpoint: invalid_client")

// tokenError is a refused token request other than invalid_client.
type tokenError struct {
	status int
	code   string
	desc   string
	// retryAfter is the server's Retry-After (0: none): a token endpoint
	// that admits no more for now says when to come back (RetryHint).
	retryAfter time.Duration
}

// RetryAfter implements the hint RetryHint finds.
func (e *tokenError) RetryAfter() time.Duration { return e.retryAfter }

func (e *tokenError) Error() string {
	if e.code == "" {
		return fmt.Sprintf("token endpoint: HTTP %d", e.status)
	}
	return fmt.Sprintf("token endpoint: %s: %s", e.code, e.desc)
}

// tokens gets and caches node tokens with the OAuth2 client-credentials
// grant and refreshes them before they expire.
type tokens struct {
	client       *http.Client
	url          string
	clientID     string
	clientSecret string
	now          func() time.Time

	mu      sync.Mutex
	token   string
	refresh time.Time // when to get a new one
}

// get returns a valid token, fetching one if none is cached or the cached
// one is close to expiry.
func (t *tokens) get(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.now().Before(t.refresh) {
		return t.token, nil
	}
	tok, ttl, err := t.fetch(ctx)
	if err != nil {
		return "", err
	}
	t.token = tok
	// Refresh at 80% of the lifetime, so a token is never used at its edge.
	t.refresh = t.now().Add(ttl * 4 / 5)
	return tok, nil
}

// invalidate drops tok (the server refused it), unless a newer one has
// replaced it already.
func (t *tokens) invalidate(tok string) {
	t.mu.Lock()
	if t.token == tok {
		t.token = ""
	}
	t.mu.Unlock()
}

func (t *tokens) fetch(ctx context.Context) (string, time.Duration, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {t.clientID},
		"client_secret": {t.clientSecret},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return "", 0, connect.NewError(connect.CodeUnavailable, fmt.Errorf("token request: %w", err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", 0, connect.NewError(connect.CodeUnavailable, fmt.Errorf("token response: %w", err))
	}
	var r struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
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
		return "", 0, errInvalidClient
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusOK:
		return "", 0, connect.NewError(connect.CodeUnavailable, &tokenError{status: resp.StatusCode, code: r.Error, desc: r.Description,
			retryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"))})
	default:
		return "", 0, connect.NewError(connect.CodeInvalidArgument, &tokenError{status: resp.StatusCode, code: r.Error, desc: r.Description})
	}
}

// interceptor adds the node token to every unary call. On
// Unauthenticated the token is dropped so the next call fetches a new one.
func (t *tokens) interceptor() connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			tok, err := t.get(ctx)
			if err != nil {
				return nil, err
			}
			req.Header().Set("Authorization", "Bearer "+tok)
			resp, err := next(ctx, req)
			if connect.CodeOf(err) == connect.CodeUnauthenticated {
				t.invalidate(tok)
			}
			return resp, err
		}
	})
}
