package auth_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

func newIssuer(t *testing.T) *auth.Issuer {
	t.Helper()
	iss, err := auth.LoadIssuer(t.TempDir())
	if err != nil {
		t.Fatalf("LoadIssuer: %v", err)
	}
	return iss
}

func newVerifier(t *testing.T, iss *auth.Issuer, opts auth.VerifierOptions) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(context.Background(), iss, opts)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func TestMintVerifyRoundTrip(t *testing.T) {
	iss := newIssuer(t)
	roles := []string{"4d3c2b1a-0000-4000-8000-000000000001_im-rw", eim.RoleAdmin}
	tok, err := iss.Mint("alice", roles, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newVerifier(t, iss, auth.VerifierOptions{}).Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	if p.Subject != "alice" {
		t.Errorf("subject: got %q, want %q", p.Subject, "alice")
	}
	if !slices.Equal(p.Roles, roles) {
		t.Errorf("roles: got %v, want %v", p.Roles, roles)
	}

	// The claims have Keycloak's shape.
	var hdr, payload map[string]any
	parts := strings.Split(tok, ".")
	decodePart(t, parts[0], &hdr)
	decodePart(t, parts[1], &payload)
	if hdr["alg"] != "EdDSA" || hdr["kid"] != iss.KeyID() {
		t.Errorf("header: got %v, want alg EdDSA and kid %s", hdr, iss.KeyID())
	}
	for _, c := range []string{"sub", "iss", "exp", "iat", "jti"} {
		if _, ok := payload[c]; !ok {
			t.Errorf("claims: no %q in %v", c, payload)
		}
	}
	ra, _ := payload["realm_access"].(map[string]any)
	if got, _ := json.Marshal(ra["roles"]); string(got) != `["4d3c2b1a-0000-4000-8000-000000000001_im-rw","eim-admin"]` {
		t.Errorf("realm_access.roles: got %s", got)
	}
	exp, iat := payload["exp"].(float64), payload["iat"].(float64)
	if exp-iat != 3600 {
		t.Errorf("exp - iat: got %v, want 3600", exp-iat)
	}
}

func decodePart(t *testing.T, s string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}

func TestAuthenticateRejects(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := auth.NewIssuer(priv)
	if err != nil {
		t.Fatal(err)
	}
	other := newIssuer(t)
	good, err := iss.Mint("alice", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fromOther, err := other.Mint("alice", []string{eim.RoleAdmin}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	var payload map[string]any
	decodePart(t, parts[1], &payload)

	// A payload rewritten to grant more, keeping the original signature.
	payload["sub"] = "mallory"
	forgedPayload := encodePart(t, payload)
	tampered := parts[0] + "." + forgedPayload + "." + parts[2]

	// A flipped bit in the signature.
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	// Claims of another issuer, signed with a key the verifier does not know.
	payload["iss"] = "https://evil.example.com/realms/x"
	unknownIss := parts[0] + "." + encodePart(t, payload) + "." + parts[2]

	// alg "none".
	noneTok := encodePart(t, map[string]any{"alg": "none", "typ": "JWT"}) + "." + parts[1] + "."

	// A token without exp, signed properly: mint one with our own key.
	noExp := signEd25519(t, priv, iss.KeyID(), map[string]any{"iss": auth.LocalIssuer, "sub": "x"})
	// The same key under another kid.
	otherKid := signEd25519(t, priv, "nope", map[string]any{"iss": auth.LocalIssuer, "sub": "x", "exp": time.Now().Add(time.Hour).Unix()})

	tests := []struct {
		name    string
		token   string
		now     time.Time
		wantMsg string
	}{
		{"empty", "", time.Time{}, "missing bearer token"},
		{"garbage", "not-a-jwt", time.Time{}, "not a valid token"},
		{"expired", good, time.Now().Add(2 * time.Hour), "token expired"},
		{"tampered payload", tampered, time.Time{}, "bad token signature"},
		{"flipped signature bit", badSig, time.Time{}, "bad token signature"},
		{"wrong key", fromOther, time.Time{}, "unknown key"},
		{"unknown issuer", unknownIss, time.Time{}, "unknown issuer"},
		{"alg none", noneTok, time.Time{}, `signed with "none"`},
		{"no expiry", noExp, time.Time{}, "no expiry"},
		{"unknown kid", otherKid, time.Time{}, "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := auth.VerifierOptions{}
			if !tt.now.IsZero() {
				opts.Now = func() time.Time { return tt.now }
			}
			p, err := newVerifier(t, iss, opts).Authenticate(context.Background(), tt.token)
			if p != nil {
				t.Errorf("principal: got %+v, want nil", p)
			}
			if got := eim.ErrorCode(err); got != eim.EUNAUTHORIZED {
				t.Fatalf("error code: got %q (%v), want %q", got, err, eim.EUNAUTHORIZED)
			}
			if msg := eim.ErrorMessage(err); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message: got %q, want it to contain %q", msg, tt.wantMsg)
			}
		})
	}
}

// The leeway lets a token through for a little while past its expiry, for
// clocks out of step: 5 s by default, longer when configured, never when
// negative.
func TestAuthenticateLeeway(t *testing.T) {
	iss := newIssuer(t)
	tok, err := iss.Mint("alice", nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(time.Minute)
	tests := []struct {
		name   string
		leeway time.Duration
		after  time.Duration // past the expiry
		ok     bool
	}{
		{"default, 3 s after", 0, 3 * time.Second, true},
		{"default, 10 s after", 0, 10 * time.Second, false},
		{"default, 59 s after", 0, 59 * time.Second, false},
		{"1 min, 30 s after", time.Minute, 30 * time.Second, true},
		{"1 min, 61 s after", time.Minute, 61 * time.Second, false},
		{"none, 1 s after", -1, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := expiry.Add(tt.after)
			v := newVerifier(t, iss, auth.VerifierOptions{Now: func() time.Time { return now }, Leeway: tt.leeway})
			_, err := v.Authenticate(context.Background(), tok)
			if (err == nil) != tt.ok {
				t.Errorf("got %v, want accepted %v", err, tt.ok)
			}
		})
	}
	if auth.DefaultLeeway != 5*time.Second {
		t.Errorf("DefaultLeeway: got %s, want 5s", auth.DefaultLeeway)
	}
}

func encodePart(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// signEd25519 signs arbitrary claims with priv, so tests can craft claims
// that Mint would never produce.
func signEd25519(t *testing.T, priv ed25519.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	hdr := encodePart(t, map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid})
	body := encodePart(t, claims)
	sig := ed25519.Sign(priv, []byte(hdr+"."+body))
	return hdr + "." + body + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// A verified token is cached, but the cache never extends its life: once it
// expires (past the leeway) it is refused even though it verified before.
func TestAuthenticateCacheHonoursExpiry(t *testing.T) {
	iss := newIssuer(t)
	tok, err := iss.Mint("alice", []string{eim.RoleAdmin}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := newVerifier(t, iss, auth.VerifierOptions{Now: func() time.Time { return now }, Leeway: -1})
	for i := range 2 {
		p, err := v.Authenticate(context.Background(), tok)
		if err != nil || p.Subject != "alice" {
			t.Fatalf("call %d: got %v, %v; want alice", i, p, err)
		}
		p.Roles[0] = "tampered" // callers may not corrupt the cache
	}
	if p, _ := v.Authenticate(context.Background(), tok); p == nil || p.Roles[0] != eim.RoleAdmin {
		t.Fatalf("cached principal was shared with a caller: got %v", p)
	}
	now = now.Add(3 * time.Minute)
	if _, err := v.Authenticate(context.Background(), tok); eim.ErrorCode(err) != eim.EUNAUTHORIZED {
		t.Errorf("after expiry: got %v, want EUNAUTHORIZED", err)
	}
	// A token with a tampered signature is refused even while a good one is cached.
	if _, err := v.Authenticate(context.Background(), tok[:len(tok)-2]+"AA"); eim.ErrorCode(err) != eim.EUNAUTHORIZED {
		t.Errorf("tampered: got %v, want EUNAUTHORIZED", err)
	}
}
