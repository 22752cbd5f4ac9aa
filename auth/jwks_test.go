package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

// keycloak is a stand-in for a Keycloak realm over real HTTPS: it serves
// the OpenID configuration and a JWKS of RSA keys with key IDs, and signs
// RS256 access tokens as Keycloak does.
type keycloak struct {
	srv     *httptest.Server
	issuer  string
	fetches atomic.Int32

	mu   sync.Mutex
	keys []*rsa.PrivateKey
	kids []string
}

func newKeycloak(t *testing.T) *keycloak {
	t.Helper()
	kc := &keycloak{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /realms/edge/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{
			"issuer":   kc.issuer,
			"jwks_uri": kc.issuer + "/protocol/openid-connect/certs",
		})
	})
	mux.HandleFunc("GET /realms/edge/protocol/openid-connect/certs", func(w http.ResponseWriter, r *http.Request) {
		kc.fetches.Add(1)
		kc.mu.Lock()
		defer kc.mu.Unlock()
		set := jose.JSONWebKeySet{}
		for i, k := range kc.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kc.kids[i], Algorithm: "RS256", Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	kc.srv = httptest.NewTLSServer(mux)
	t.Cleanup(kc.srv.Close)
	kc.issuer = kc.srv.URL + "/realms/edge"
	kc.rotate(t, "k1")
	return kc
}

// rotate adds a key that becomes the signing key.
func (kc *keycloak) rotate(t *testing.T, kid string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.keys = append(kc.keys, k)
	kc.kids = append(kc.kids, kid)
}

func (kc *keycloak) token(t *testing.T, claims map[string]any) string {
	t.Helper()
	kc.mu.Lock()
	key, kid := kc.keys[len(kc.keys)-1], kc.kids[len(kc.kids)-1]
	kc.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (kc *keycloak) claims(sub string, roles ...string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": kc.issuer, "sub": sub, "aud": "account", "typ": "Bearer", "azp": "system-client",
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"realm_access":       map[string]any{"roles": roles},
		"preferred_username": sub + "-user",
	}
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestExternalIssuerViaJWKS(t *testing.T) {
	kc := newKeycloak(t)
	local := newIssuer(t)
	v := newVerifier(t, local, auth.VerifierOptions{
		OIDCIssuer: kc.issuer,
		JWKSURL:    kc.issuer + "/protocol/openid-connect/certs",
		HTTPClient: kc.srv.Client(),
	})
	ctx := context.Background()

	p, err := v.Authenticate(ctx, kc.token(t, kc.claims("u-1", "p1_im-rw", "offline_access")))
	if err != nil {
		t.Fatalf("Keycloak token: %v", err)
	}
	if p.Subject != "u-1" || !slices.Equal(p.Roles, []string{"p1_im-rw", "offline_access"}) {
		t.Errorf("principal: got %+v, want subject u-1 with roles [p1_im-rw offline_access]", p)
	}

	// Local tokens still work beside the external issuer.
	tok, err := local.Mint("admin", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(ctx, tok); err != nil {
		t.Errorf("local token with an external issuer configured: %v", err)
	}

	expired := kc.claims("u-1")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	idToken := kc.claims("u-1")
	idToken["typ"] = "ID"
	wrongIss := kc.claims("u-1")
	wrongIss["iss"] = kc.srv.URL + "/realms/other"
	tests := []struct {
		name    string
		claims  map[string]any
		wantMsg string
	}{
		{"expired", expired, "token expired"},
		{"other realm", wrongIss, "unknown issuer"},
		{"ID token", idToken, "not an access token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Authenticate(ctx, kc.token(t, tt.claims))
			if got := eim.ErrorCode(err); got != eim.EUNAUTHORIZED {
				t.Fatalf("error code: got %q (%v), want %q", got, err, eim.EUNAUTHORIZED)
			}
			if msg := eim.ErrorMessage(err); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", msg, tt.wantMsg)
			}
		})
	}
}

func TestExternalIssuerDiscoveryAndAudience(t *testing.T) {
	kc := newKeycloak(t)
	v := newVerifier(t, nil, auth.VerifierOptions{OIDCIssuer: kc.issuer, Audience: "eim-api", HTTPClient: kc.srv.Client()})
	ctx := context.Background()

	withAud := kc.claims("u-2", "r")
	withAud["aud"] = []string{"account", "eim-api"}
	if _, err := v.Authenticate(ctx, kc.token(t, withAud)); err != nil {
		t.Errorf("token for eim-api: %v", err)
	}
	_, err := v.Authenticate(ctx, kc.token(t, kc.claims("u-2", "r")))
	if msg := eim.ErrorMessage(err); eim.ErrorCode(err) != eim.EUNAUTHORIZED || !strings.Contains(msg, "audience") {
		t.Errorf("token for another audience: got %v, want EUNAUTHORIZED naming the audience", err)
	}
}

func TestExternalKeyRotationIsRateLimited(t *testing.T) {
	kc := newKeycloak(t)
	clk := &clock{t: time.Now()}
	v := newVerifier(t, nil, auth.VerifierOptions{
		OIDCIssuer:         kc.issuer,
		JWKSURL:            kc.issuer + "/protocol/openid-connect/certs",
		HTTPClient:         kc.srv.Client(),
		MinRefreshInterval: time.Minute,
		Now:                clk.Now,
	})
	ctx := context.Background()
	if got := kc.fetches.Load(); got != 1 {
		t.Fatalf("fetches after NewVerifier: got %d, want 1", got)
	}

	// The realm rotates its key; the first token naming the new kid fetches
	// the set again (the minimum interval since start-up has passed).
	clk.Add(2 * time.Minute)
	kc.rotate(t, "k2")
	if _, err := v.Authenticate(ctx, kc.token(t, kc.claims("u-3"))); err != nil {
		t.Fatalf("token with rotated key: %v", err)
	}
	if got := kc.fetches.Load(); got != 2 {
		t.Errorf("fetches after rotation: got %d, want 2", got)
	}

	// Forged tokens naming unknown keys cause at most one fetch per interval.
	kc.rotate(t, "k3")
	for range 5 {
		if _, err := v.Authenticate(ctx, kc.token(t, kc.claims("u-3"))); eim.ErrorCode(err) != eim.EUNAUTHORIZED {
			t.Fatalf("token with unknown kid inside the interval: got %v, want EUNAUTHORIZED", err)
		}
	}
	if got := kc.fetches.Load(); got != 2 {
		t.Errorf("fetches within the interval: got %d, want 2", got)
	}
	clk.Add(time.Minute)
	if _, err := v.Authenticate(ctx, kc.token(t, kc.claims("u-3"))); err != nil {
		t.Fatalf("token with k3 after the interval: %v", err)
	}
	if got := kc.fetches.Load(); got != 3 {
		t.Errorf("fetches after the interval: got %d, want 3", got)
	}
}

func TestNewVerifierConfigErrors(t *testing.T) {
	kc := newKeycloak(t)
	tests := []struct {
		name string
		iss  bool
		opts auth.VerifierOptions
	}{
		{"nothing configured", false, auth.VerifierOptions{}},
		{"JWKS without issuer", true, auth.VerifierOptions{JWKSURL: kc.issuer + "/protocol/openid-connect/certs", HTTPClient: kc.srv.Client()}},
		{"unreachable JWKS", true, auth.VerifierOptions{OIDCIssuer: kc.issuer, JWKSURL: kc.srv.URL + "/nope", HTTPClient: kc.srv.Client()}},
		{"TLS not trusted", true, auth.VerifierOptions{OIDCIssuer: kc.issuer, JWKSURL: kc.issuer + "/protocol/openid-connect/certs"}},
		{"discovery of a different issuer", true, auth.VerifierOptions{OIDCIssuer: kc.issuer + "/", HTTPClient: kc.srv.Client()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var iss *auth.Issuer
			if tt.iss {
				iss = newIssuer(t)
			}
			v, err := auth.NewVerifier(context.Background(), iss, tt.opts)
			if err == nil {
				t.Errorf("NewVerifier: got %v, want an error", v)
			}
		})
	}
}
