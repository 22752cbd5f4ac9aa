package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/eimhq/eim"
)

// maxJWKSBytes bounds what is read from the issuer.
const maxJWKSBytes = 1 << 20

// jwks caches an external issuer's signing keys. A token naming a key that
// is not in the cache triggers a fetch, at most once per minRefresh; keys
// older than maxAge are fetched again on use, and kept if that fails (keys
// rotate rarely, and an unreachable issuer should not lock everyone out).
//
// We keep this cache small and our own: keyfunc's JWKS dependency is not
// available from the module proxy, and go-oidc's remote key set fetches
// again on every unknown key ID, without a rate limit.
type jwks struct {
	url        string
	client     *http.Client
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time

	fetchMu sync.Mutex // serializes fetches

	mu          sync.Mutex // guards the fields below
	keys        []jose.JSONWebKey
	fetched     time.Time // last successful fetch
	lastAttempt time.Time // last fetch, successful or not
}

func newJWKS(url string, client *http.Client, minRefresh, maxAge time.Duration, now func() time.Time) *jwks {
	if minRefresh <= 0 {
		minRefresh = 30 * time.Second
	}
	if maxAge <= 0 {
		maxAge = time.Hour
	}
	return &jwks{url: url, client: client, minRefresh: minRefresh, maxAge: maxAge, now: now}
}

// key returns the public key for kid and alg, fetching the set again when
// the key is unknown (rate limited) or the set is old.
func (j *jwks) key(ctx context.Context, kid, alg string) (any, error) {
	k, found, stale, mayFetch := j.lookup(kid, alg)
	if found && !stale {
		return k, nil
	}
	if mayFetch {
		j.fetchMu.Lock()
		// Another caller may have fetched while we waited.
		if _, _, _, still := j.lookup(kid, alg); still {
			_ = j.refresh(ctx) // on failure the old keys stay in use
		}
		j.fetchMu.Unlock()
		k, found, _, _ = j.lookup(kid, alg)
	}
	if !found {
		if kid == "" {
			return nil, unauthorized("token names no key (kid) and the issuer has several")
		}
		return nil, unauthorized("token signed by an unknown key %q", kid)
	}
	return k, nil
}

// lookup finds the key; mayFetch tells whether a fetch is allowed now.
func (j *jwks) lookup(kid, alg string) (key any, found, stale, mayFetch bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	stale = now.Sub(j.fetched) > j.maxAge
	found = false
	var match []jose.JSONWebKey
	for _, k := range j.keys {
		if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
			match = append(match, k)
		}
	}
	if len(match) == 1 {
		key, found = match[0].Key, true
	}
	mayFetch = (!found || stale) && now.Sub(j.lastAttempt) >= j.minRefresh
	return key, found, stale, mayFetch
}

// refresh fetches the key set and replaces the cache.
func (j *jwks) refresh(ctx context.Context) error {
	j.mu.Lock()
	j.lastAttempt = j.now()
	j.mu.Unlock()
	keys, err := fetchJWKS(ctx, j.client, j.url)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.keys, j.fetched = keys, j.now()
	j.mu.Unlock()
	return nil
}

// fetchJWKS reads a JWK set, keeping the public signing keys it can parse
// and skipping the others (encryption keys, unknown key types).
func fetchJWKS(ctx context.Context, client *http.Client, url string) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, client, url, &set); err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		keys = append(keys, k.Public())
	}
	if len(keys) == 0 {
		return nil, eim.Errorf(eim.EUNAVAILABLE, "JWKS at %s holds no usable signing key", url)
	}
	return keys, nil
}

// discoverJWKS reads the issuer's OpenID configuration and returns its
// jwks_uri, checking that the document is the issuer's.
func discoverJWKS(ctx context.Context, client *http.Client, issuer string) (string, error) {
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	url := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	if err := getJSON(ctx, client, url, &doc); err != nil {
		return "", fmt.Errorf("OIDC discovery: %w", err)
	}
	if doc.Issuer != issuer {
		return "", eim.Errorf(eim.EINVALID, "OIDC discovery at %s: issuer is %q, want %q", url, doc.Issuer, issuer)
	}
	if doc.JWKSURI == "" {
		return "", eim.Errorf(eim.EINVALID, "OIDC discovery at %s: no jwks_uri", url)
	}
	return doc.JWKSURI, nil
}

func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return eim.Errorf(eim.EINVALID, "bad URL %q: %v", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return eim.Errorf(eim.EUNAVAILABLE, "GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return eim.Errorf(eim.EUNAVAILABLE, "GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(v); err != nil {
		return eim.Errorf(eim.EUNAVAILABLE, "GET %s: bad JSON: %v", url, err)
	}
	return nil
}
