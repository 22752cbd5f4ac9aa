package auth

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
)

// VerifierOptions configure a Verifier. Zero values select the defaults.
type VerifierOptions struct {
	// OIDCIssuer is the "iss" of an external OIDC provider whose tokens are
	// accepted too, e.g. "https://keycloak.example.com/realms/master".
	OIDCIssuer string
	// JWKSURL is where the external issuer publishes its keys. When empty
	// and OIDCIssuer is set, it is discovered from the issuer's
	// /.well-known/openid-configuration.
	JWKSURL string
	// Audience, when set, must be in the "aud" of external tokens.
	Audience string
	// HTTPClient fetches the discovery document and the JWKS; nil means a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// MinRefreshInterval is the least time between two JWKS fetches caused by
	// tokens naming an unknown key, so that a flood of forged tokens cannot
	// turn into a flood of requests to the issuer. Default 30 s.
	MinRefreshInterval time.Duration
	// MaxKeyAge is how long fetched keys are used before they are fetched
	// again (on the next use). Default 1 h.
	MaxKeyAge time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat: an expired
	// token is accepted for this long. Default DefaultLeeway; negative
	// means none.
	Leeway time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// DefaultLeeway is the clock skew allowed by default: enough for servers
// whose clocks are kept in step (NTP), short enough that a token is not
// used noticeably past its expiry.
const DefaultLeeway = 5 * time.Second

// Verifier authenticates bearer tokens: those of the local Issuer and, when
// configured, those of an external OIDC issuer. It implements
// httpapi.Authenticator and is safe for concurrent use.
type Verifier struct {
	local    *Issuer
	localPub ed25519.PublicKey
	external string // expected iss of external tokens; "" when none
	audience string
	jwks     *jwks
	leeway   time.Duration
	now      func() time.Time
	cache    tokenCache
}

// algorithms are the signature algorithms accepted at all; a key only
// verifies the algorithms of its own type.
var algorithms = []jose.SignatureAlgorithm{
	jose.EdDSA, jose.ES256, jose.ES384, jose.ES512,
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
}

// NewVerifier returns a Verifier for the local issuer iss (nil: none) and
// the external issuer of opts. With an external issuer it fetches the keys
// once before returning, so that a wrong URL is reported at start-up.
func NewVerifier(ctx context.Context, iss *Issuer, opts VerifierOptions) (*Verifier, error) {
	v := &Verifier{local: iss, leeway: opts.Leeway, now: opts.Now, audience: opts.Audience}
	if iss != nil {
		v.localPub = iss.PublicKey()
	}
	switch {
	case v.leeway == 0:
		v.leeway = DefaultLeeway
	case v.leeway < 0:
		v.leeway = 0
	}
	if v.now == nil {
		v.now = time.Now
	}
	if opts.JWKSURL == "" && opts.OIDCIssuer == "" {
		if iss == nil {
			return nil, eim.Errorf(eim.EINVALID, "auth: no local issuer and no external issuer configured")
		}
		return v, nil
	}
	if opts.OIDCIssuer == "" {
		return nil, eim.Errorf(eim.EINVALID, "oidc issuer: required with a JWKS URL (tokens' \"iss\" is checked against it)")
	}
	if opts.OIDCIssuer == LocalIssuer {
		return nil, eim.Errorf(eim.EINVALID, "oidc issuer: %q is the local issuer's name", LocalIssuer)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	url := opts.JWKSURL
	if url == "" {
		var err error
		if url, err = discoverJWKS(ctx, client, opts.OIDCIssuer); err != nil {
			return nil, err
		}
	}
	v.external = opts.OIDCIssuer
	v.jwks = newJWKS(url, client, opts.MinRefreshInterval, opts.MaxKeyAge, v.now)
	if err := v.jwks.refresh(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// Authenticate verifies token and returns its principal. Errors are
// EUNAUTHORIZED.
func (v *Verifier) Authenticate(ctx context.Context, token string) (*eim.Principal, error) {
	if token == "" {
		return nil, unauthorized("missing bearer token")
	}
	now := v.now()
	if p, ok := v.cache.get(token, now); ok {
		return p, nil
	}
	tok, err := jwt.ParseSigned(token, algorithms)
	if err != nil {
		return nil, malformed(token, algorithms)
	}
	if len(tok.Headers) != 1 {
		return nil, unauthorized("malformed token: want one signature")
	}
	hdr := tok.Headers[0]
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, unauthorized("malformed token claims")
	}

	var key any
	switch {
	case unverified.Issuer == LocalIssuer && v.local != nil:
		if hdr.KeyID != v.local.kid || hdr.Algorithm != string(jose.EdDSA) {
			return nil, unauthorized("token signed by an unknown key (was it minted by another server?)")
		}
		key = v.localPub
	case v.external != "" && unverified.Issuer == v.external:
		k, err := v.jwks.key(ctx, hdr.KeyID, hdr.Algorithm)
		if err != nil {
			return nil, err
		}
		key = k
	case unverified.Issuer == "":
		return nil, unauthorized("token has no issuer")
	default:
		return nil, unauthorized("token from unknown issuer %q", unverified.Issuer)
	}

	var std jwt.Claims
	var extra claims
	if err := tok.Claims(key, &std, &extra); err != nil {
		return nil, unauthorized("bad token signature")
	}
	if std.Expiry == nil {
		return nil, unauthorized("token has no expiry")
	}
	exp := jwt.Expected{Issuer: unverified.Issuer, Time: now}
	if v.audience != "" && std.Issuer == v.external {
		exp.AnyAudience = jwt.Audience{v.audience}
	}
	if err := std.ValidateWithLeeway(exp, v.leeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return nil, unauthorized("token expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
		case errors.Is(err, jwt.ErrNotValidYet):
			return nil, unauthorized("token not valid before %s", std.NotBefore.Time().UTC().Format(time.RFC3339))
		case errors.Is(err, jwt.ErrIssuedInTheFuture):
			return nil, unauthorized("token issued in the future (check the clocks)")
		case errors.Is(err, jwt.ErrInvalidAudience):
			return nil, unauthorized("token not issued for audience %q", v.audience)
		default:
			return nil, unauthorized("invalid token claims: %v", err)
		}
	}
	if extra.Typ != "" && !strings.EqualFold(extra.Typ, "Bearer") {
		// Keycloak marks ID and refresh tokens with another typ.
		return nil, unauthorized("not an access token (typ %q)", extra.Typ)
	}
	subject := std.Subject
	if subject == "" {
		subject = extra.PreferredUsername
	}
	if subject == "" {
		return nil, unauthorized("token has no subject")
	}
	p := &eim.Principal{Subject: subject, Roles: extra.RealmAccess.Roles}
	v.cache.put(token, p, std.Expiry.Time().Add(v.leeway), now)
	return p, nil
}

// malformed says why a token did not parse: not a token at all (a JWT is
// three base64url parts whose header names its algorithm), or one signed
// with an algorithm not accepted.
func malformed(token string, accepted []jose.SignatureAlgorithm) error {
	parts := strings.Split(token, ".")
	var hdr struct {
		Alg string `json:"alg"`
	}
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[0]); err == nil && json.Unmarshal(b, &hdr) == nil &&
			hdr.Alg != "" && !slices.Contains(accepted, jose.SignatureAlgorithm(hdr.Alg)) {
			return unauthorized("token signed with %q, an algorithm EIM does not accept", hdr.Alg)
		}
	}
	return unauthorized("not a valid token: a JWT was expected")
}

func unauthorized(format string, args ...any) error {
	return eim.Errorf(eim.EUNAUTHORIZED, format, args...)
}
