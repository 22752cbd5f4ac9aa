package auth

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// tokenCache remembers tokens that verified, so that a client sending the
// same bearer token on every request pays for one signature check per
// cacheTTL instead of one per request (an Ed25519 or RSA verification costs
// more than a small API call). Entries never outlive the token's expiry, and
// the short TTL bounds how long a token stays accepted after its signing key
// is withdrawn from the issuer's key set.
type tokenCache struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	principal eim.Principal
	until     time.Time
}

const (
	cacheTTL     = time.Minute
	cacheEntries = 4096
)

func (c *tokenCache) get(token string, now time.Time) (*eim.Principal, bool) {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	// Callers get their own copy: a principal is theirs to keep and change.
	return &eim.Principal{Subject: e.principal.Subject, Roles: append([]string(nil), e.principal.Roles...)}, true
}

func (c *tokenCache) put(token string, p *eim.Principal, expiry, now time.Time) {
	until := now.Add(cacheTTL)
	if expiry.Before(until) {
		until = expiry
	}
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= cacheEntries {
		// Full: start over rather than track recency; a burst of distinct
		// tokens costs one verification each, as without a cache.
		c.entries = make(map[[sha256.Size]byte]cacheEntry, cacheEntries)
	}
	c.entries[key] = cacheEntry{principal: eim.Principal{Subject: p.Subject, Roles: append([]string(nil), p.Roles...)}, until: until}
}
