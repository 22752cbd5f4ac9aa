package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// Sign-in through an external OIDC issuer (Keycloak-compatible): the
// authorization code flow with PKCE (S256), for a public client. The
// browser goes to the issuer's authorization endpoint with a fresh state
// and code challenge, kept meanwhile in a short-lived HttpOnly cookie; the
// issuer sends it back to /ui/oidc/callback with a code, which the server
// exchanges (with the verifier) for an access token. That token is checked
// by the same Authenticator as a pasted one and becomes the session. The
// refresh token that comes with it is kept in a cookie of its own: when
// the access token is refused (it expired: Keycloak's last five minutes),
// the server trades the refresh token for a new one and the user stays
// signed in, for as long as the issuer lets the session live.

// OIDC configures sign-in through an external issuer.
type OIDC struct {
	// Issuer is the issuer's URL (its /.well-known/openid-configuration
	// names the endpoints): the server's --oidc-issuer.
	Issuer string
	// ClientID is the UI's client at the issuer (a public client whose
	// redirect URI is https://<this server>/ui/oidc/callback).
	ClientID string
	// Scopes asked besides openid.
	Scopes []string
	// HTTPClient reaches the issuer; nil: a client with a 10 s timeout.
	HTTPClient *http.Client
}

const (
	oidcCookie    = "eim_oidc"
	refreshCookie = "eim_refresh"
	// refreshShare is how long a refresh's result answers the other
	// requests that came with the same refresh token (a page and its
	// event stream): an issuer that rotates refresh tokens takes each once.
	// Short, as it is also how long a replayed old refresh token would be
	// answered without the issuer seeing it.
	refreshShare = 10 * time.Second
	oidcFlow     = 10 * time.Minute // how long a sign-in at the issuer may take
)

// oidcClient runs the flow.
type oidcClient struct {
	cfg OIDC
	hc  *http.Client

	mu        sync.Mutex
	endpoints *oidcEndpoints
	fetched   time.Time
	refreshes map[[32]byte]*refreshCall // by the refresh token's digest
}

// refreshCall is one trade of a refresh token, shared by the requests
// that bring the same one meanwhile.
type refreshCall struct {
	done            chan struct{}
	access, refresh string
	err             error
	at              time.Time
}

type oidcEndpoints struct {
	Authorization string `json:"authorization_endpoint"`
	Token         string `json:"token_endpoint"`
}

func newOIDC(cfg *OIDC) *oidcClient {
	if cfg == nil || cfg.Issuer == "" || cfg.ClientID == "" {
		return nil
	}
	c := &oidcClient{cfg: *cfg, hc: cfg.HTTPClient}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: 10 * time.Second}
	}
	return c
}

// discover reads the issuer's endpoints, reusing them for an hour.
func (c *oidcClient) discover(ctx context.Context) (*oidcEndpoints, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.endpoints != nil && time.Since(c.fetched) < time.Hour {
		return c.endpoints, nil
	}
	u := strings.TrimSuffix(c.cfg.Issuer, "/") + "/.well-known/openid-configuration"
	var ep oidcEndpoints
	if err := c.getJSON(ctx, u, &ep); err != nil {
		return nil, err
	}
	if ep.Authorization == "" || ep.Token == "" {
		return nil, fmt.Errorf("%s names no authorization or token endpoint", u)
	}
	c.endpoints, c.fetched = &ep, time.Now()
	return &ep, nil
}

func (c *oidcClient) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, res.Status)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v)
}

// redirectURI is where the issuer sends the browser back: this server,
// as the browser reached it.
func redirectURI(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/ui/oidc/callback"
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// oidcStart sends the browser to the issuer.
func (h *Handler) oidcStart(w http.ResponseWriter, r *http.Request) {
	if h.oidc == nil {
		h.renderError(w, r, nil, eim.Errorf(eim.ENOTFOUND, "sign-in through an identity provider is not configured on this server"))
		return
	}
	ep, err := h.oidc.discover(r.Context())
	if err != nil {
		h.log.Warn("ui: OIDC discovery", "issuer", h.oidc.cfg.Issuer, "error", err)
		h.renderError(w, r, nil, eim.Errorf(eim.EUNAVAILABLE, "the identity provider %s does not answer; try again, or sign in with a token", h.oidc.cfg.Issuer))
		return
	}
	state, verifier := randomString(24), randomString(32)
	next := safeNext(r.URL.Query().Get("next"))
	// SameSite=Lax: the cookie must come back with the issuer's redirect,
	// a navigation from another site.
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: state + "." + verifier + "." + base64.RawURLEncoding.EncodeToString([]byte(next)),
		Path: "/ui/oidc/", MaxAge: int(oidcFlow / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	q := url.Values{
		"response_type": {"code"}, "client_id": {h.oidc.cfg.ClientID}, "redirect_uri": {redirectURI(r)},
		"scope": {strings.Join(append([]string{"openid"}, h.oidc.cfg.Scopes...), " ")}, "state": {state},
		"code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"},
	}
	sep := "?"
	if strings.Contains(ep.Authorization, "?") {
		sep = "&"
	}
	http.Redirect(w, r, ep.Authorization+sep+q.Encode(), http.StatusSeeOther)
}

// oidcCallback takes the issuer's answer: checks the state, exchanges the
// code, checks the token, and starts the session.
func (h *Handler) oidcCallback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		h.render(w, r, status, "login", &view{Title: "Sign in", Data: loginData{Error: msg, OIDC: h.oidc != nil}})
	}
	if h.oidc == nil {
		fail(http.StatusNotFound, "sign-in through an identity provider is not configured on this server")
		return
	}
	q := r.URL.Query()
	c, err := r.Cookie(oidcCookie)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Path: "/ui/oidc/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "the identity provider refused the sign-in: "+e+" "+q.Get("error_description"))
		return
	}
	var state, verifier, next string
	if err == nil {
		parts := strings.SplitN(c.Value, ".", 3)
		if len(parts) == 3 {
			state, verifier = parts[0], parts[1]
			if b, err := base64.RawURLEncoding.DecodeString(parts[2]); err == nil {
				next = safeNext(string(b))
			}
		}
	}
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(q.Get("state"))) != 1 {
		fail(http.StatusForbidden, "the sign-in did not start here, or took over ten minutes: start it again")
		return
	}
	code := q.Get("code")
	if code == "" {
		fail(http.StatusBadRequest, "the identity provider sent no code")
		return
	}
	tok, refresh, err := h.oidcExchange(r, code, verifier)
	if err != nil {
		h.log.Warn("ui: OIDC code exchange", "issuer", h.oidc.cfg.Issuer, "error", err)
		fail(http.StatusBadGateway, "the identity provider did not give a token for the sign-in; try again")
		return
	}
	p, err := h.authn.Authenticate(r.Context(), tok)
	if err != nil || p == nil || len(tok) > maxTokenLen {
		msg := "the identity provider's token is not accepted by this server"
		if err != nil && eim.ErrorCode(err) == eim.EUNAUTHORIZED {
			msg += ": " + eim.ErrorMessage(err)
		}
		fail(http.StatusUnauthorized, msg)
		return
	}
	setSession(w, r, tok, 0)
	if refresh != "" && len(refresh) <= maxTokenLen {
		setRefresh(w, r, refresh, 0)
	} else {
		setRefresh(w, r, "", -1)
	}
	if next == "" {
		next = "/ui/"
	}
	// A page, not a redirect: the browser sends a SameSite=Strict cookie
	// only from a navigation that started on this site, which the
	// redirect from the issuer did not.
	h.render(w, r, http.StatusOK, "signedin", &view{Title: "Signed in", Data: template.URL(next)})
}

// oidcExchange trades the code for an access token (and the refresh
// token, when the issuer gives one) at the token endpoint.
func (h *Handler) oidcExchange(r *http.Request, code, verifier string) (string, string, error) {
	return h.oidc.token(r.Context(), url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI(r)},
		"client_id": {h.oidc.cfg.ClientID}, "code_verifier": {verifier}})
}

// token posts a grant to the issuer's token endpoint and returns the
// access token and the refresh token (if any).
func (c *oidcClient) token(ctx context.Context, form url.Values) (string, string, error) {
	ep, err := c.discover(ctx)
	if err != nil {
		return "", "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.Token, strings.NewReader(form.Encode()))
	if err != nil {
		return "", "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return "", "", err
	}
	defer res.Body.Close()
	var out struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		Error        string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&out); err != nil {
		return "", "", fmt.Errorf("token endpoint: %s: %w", res.Status, err)
	}
	if res.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", "", fmt.Errorf("token endpoint: %s %s", res.Status, out.Error)
	}
	return out.AccessToken, out.RefreshToken, nil
}

// refreshSession trades the session's refresh token for a new access
// token when the issuer is configured and the browser has one; it sets
// the new session (and the new refresh token, if the issuer rotated it)
// in w's cookies. A refresh token the issuer no longer takes is dropped:
// the user signs in again.
func (h *Handler) refreshSession(w http.ResponseWriter, r *http.Request) (*eim.Principal, string) {
	if h.oidc == nil {
		return nil, ""
	}
	ck, err := r.Cookie(refreshCookie)
	if err != nil || ck.Value == "" {
		return nil, ""
	}
	access, refresh, err := h.oidc.refresh(r.Context(), ck.Value)
	if err != nil {
		h.log.Info("ui: session not refreshed: sign in again", "issuer", h.oidc.cfg.Issuer, "error", err)
		setRefresh(w, r, "", -1)
		return nil, ""
	}
	p, err := h.authn.Authenticate(r.Context(), access)
	if err != nil || p == nil || len(access) > maxTokenLen {
		setRefresh(w, r, "", -1)
		return nil, ""
	}
	setSession(w, r, access, 0)
	if refresh != "" && refresh != ck.Value && len(refresh) <= maxTokenLen {
		setRefresh(w, r, refresh, 0)
	}
	return p, access
}

// refresh trades a refresh token once for the requests that bring it
// within refreshShare.
func (c *oidcClient) refresh(ctx context.Context, token string) (string, string, error) {
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	c.mu.Lock()
	if c.refreshes == nil {
		c.refreshes = map[[32]byte]*refreshCall{}
	}
	for k, rc := range c.refreshes {
		if now.Sub(rc.at) > refreshShare {
			delete(c.refreshes, k)
		}
	}
	rc, ok := c.refreshes[key]
	if !ok {
		rc = &refreshCall{done: make(chan struct{}), at: now}
		c.refreshes[key] = rc
	}
	c.mu.Unlock()
	if ok {
		select {
		case <-rc.done:
			return rc.access, rc.refresh, rc.err
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
	// Not the request's context: the others wait on this trade too.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	rc.access, rc.refresh, rc.err = c.token(tctx, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {token}, "client_id": {c.cfg.ClientID}})
	close(rc.done)
	return rc.access, rc.refresh, rc.err
}
