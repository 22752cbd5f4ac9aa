package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
)

// NodeRole is the realm role of node tokens, as the original's agents had.
const NodeRole = "en-agent-rw"

// NodeClaims identify the node a node token was issued to.
type NodeClaims struct {
	// Subject is the node's OAuth2 client ID ("edgenode-<hostID>").
	Subject string
	HostID  string
	// Project is the name of the host's project.
	Project string
	// Gen is the host's credential generation when the token was issued;
	// the token stops working when the host's generation moves on.
	Gen int64
	// Expiry is when the token ends.
	Expiry time.Time
}

// nodeClaims are the JWT claims of a node token besides the registered ones.
type nodeClaims struct {
	claims
	Host    string `json:"eim_host"`
	Project string `json:"eim_project"`
	Gen     *int64 `json:"eim_gen"`
}

// MintNode returns a node token: an access token for subject n.Subject with
// the realm role en-agent-rw and the claims eim_host, eim_project and
// eim_gen, valid for ttl from now. It returns the token's expiry too.
func (i *Issuer) MintNode(n NodeClaims, ttl time.Duration) (string, time.Time, error) {
	if n.Subject == "" || n.HostID == "" || n.Project == "" {
		return "", time.Time{}, eim.Errorf(eim.EINVALID, "node token: subject, host and project are required")
	}
	if ttl <= 0 {
		return "", time.Time{}, eim.Errorf(eim.EINVALID, "ttl: must be positive, got %s", ttl)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("token id: %w", err)
	}
	now := i.now()
	exp := now.Add(ttl)
	std := jwt.Claims{
		Issuer:   LocalIssuer,
		Subject:  n.Subject,
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(exp),
		ID:       hex.EncodeToString(jti[:]),
	}
	gen := n.Gen
	extra := nodeClaims{
		claims:  claims{RealmAccess: realmAccess{Roles: []string{NodeRole}}, Typ: "Bearer"},
		Host:    n.HostID,
		Project: n.Project,
		Gen:     &gen,
	}
	tok, err := jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token: %w", err)
	}
	return tok, std.Expiry.Time(), nil
}

// NodeVerifier checks node tokens minted by one Issuer. Tokens of other
// issuers (an external OIDC provider, another server) and tokens without the
// node claims are refused: a user's token is not a node's. Verified tokens
// are cached (never past their expiry), as the Verifier does, so that a node
// calling often pays for one signature check a minute. It is safe for
// concurrent use.
type NodeVerifier struct {
	iss    *Issuer
	leeway time.Duration
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]NodeClaims
	max   int // the cache's bound; 0 = nodeCacheEntries (tests set less)
	// swept is when expired tokens were last dropped, and peak the most
	// tokens cached since the map was last made (a Go map keeps its
	// table when entries are deleted).
	swept time.Time
	peak  int
}

// NewNodeVerifier returns a verifier of iss's node tokens. now nil means
// time.Now; leeway is the clock skew allowed on exp and iat.
func NewNodeVerifier(iss *Issuer, leeway time.Duration, now func() time.Time) *NodeVerifier {
	if now == nil {
		now = time.Now
	}
	return &NodeVerifier{iss: iss, leeway: leeway, now: now}
}

// Verify checks token and returns its claims. Errors are EUNAUTHORIZED with
// a message that says what was wrong.
func (v *NodeVerifier) Verify(token string) (NodeClaims, error) {
	if token == "" {
		return NodeClaims{}, unauthorized("missing bearer token")
	}
	now := v.now()
	key := sha256.Sum256([]byte(token))
	v.mu.Lock()
	n, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		if now.Before(n.Expiry.Add(v.leeway)) {
			return n, nil
		}
		return NodeClaims{}, unauthorized("token expired at %s", n.Expiry.UTC().Format(time.RFC3339))
	}
	n, err := v.verify(token, now)
	if err != nil {
		return NodeClaims{}, err
	}
	v.mu.Lock()
	v.add(key, n, now)
	v.mu.Unlock()
	return n, nil
}

// Remember caches token, which this process has just minted with claims
// n (n.Expiry as MintNode returned it), as Verify caches a token it has
// checked: the node's first call then costs no signature check. After a
// restart the whole fleet asks for tokens and makes its first calls within
// one heartbeat interval, and checking the signatures this process had just
// made was a third of that storm's CPU.
func (v *NodeVerifier) Remember(token string, n NodeClaims) {
	if token == "" || n.Expiry.IsZero() {
		return
	}
	key := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.add(key, n, now)
}

// expireEvery is how often the cache drops the tokens that expired: it
// holds the tokens of the nodes that call this process, not every token
// it saw since it filled up (each node renews its token every lifetime,
// and with replicas a node may move to another).
const expireEvery = time.Minute

// add caches n under key. At most once per expireEvery the expired
// tokens go first, and the map is made anew when it holds less than half
// of its peak. v.mu is held.
func (v *NodeVerifier) add(key [sha256.Size]byte, n NodeClaims, now time.Time) {
	if v.cache == nil {
		v.cache = make(map[[sha256.Size]byte]NodeClaims)
	}
	if len(v.cache) >= v.capacity() {
		v.prune(now)
	} else if now.Sub(v.swept) >= expireEvery {
		v.expire(now)
	}
	v.cache[key] = n
	v.peak = max(v.peak, len(v.cache))
}

// expire drops the expired tokens and shrinks the map when it is less
// than half full of its peak. v.mu is held.
func (v *NodeVerifier) expire(now time.Time) {
	v.swept = now
	for k, c := range v.cache {
		if !now.Before(c.Expiry.Add(v.leeway)) {
			delete(v.cache, k)
		}
	}
	if len(v.cache) < v.peak/2 {
		m := make(map[[sha256.Size]byte]NodeClaims, len(v.cache))
		for k, c := range v.cache {
			m[k] = c
		}
		v.cache, v.peak = m, len(m)
	}
}

// nodeCacheEntries bounds the cache of verified node tokens: a fleet of
// 100,000 nodes holds about that many valid tokens (one each, renewed
// every token lifetime), and each heartbeat must find its token here
// rather than pay for a signature check. An entry is ~150 bytes.
const nodeCacheEntries = 1 << 18

func (v *NodeVerifier) capacity() int {
	if v.max > 0 {
		return v.max
	}
	return nodeCacheEntries
}

// prune drops the expired tokens, and everything when that frees less
// than a quarter of the cache (a flood of distinct tokens then costs one
// verification each, as without a cache). v.mu is held.
func (v *NodeVerifier) prune(now time.Time) {
	v.expire(now)
	if len(v.cache) > v.capacity()*3/4 {
		v.cache, v.peak = make(map[[sha256.Size]byte]NodeClaims), 0
	}
}

func (v *NodeVerifier) verify(token string, now time.Time) (NodeClaims, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return NodeClaims{}, malformed(token, []jose.SignatureAlgorithm{jose.EdDSA})
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID != v.iss.kid {
		return NodeClaims{}, unauthorized("token signed by an unknown key (was it minted by another server?)")
	}
	var std jwt.Claims
	var extra nodeClaims
	if err := tok.Claims(v.iss.PublicKey(), &std, &extra); err != nil {
		return NodeClaims{}, unauthorized("bad token signature")
	}
	if std.Expiry == nil {
		return NodeClaims{}, unauthorized("token has no expiry")
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: LocalIssuer, Time: now}, v.leeway); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return NodeClaims{}, unauthorized("token expired at %s", std.Expiry.Time().UTC().Format(time.RFC3339))
		case errors.Is(err, jwt.ErrIssuedInTheFuture):
			return NodeClaims{}, unauthorized("token issued in the future (check the clocks)")
		default:
			return NodeClaims{}, unauthorized("invalid token claims: %v", err)
		}
	}
	if std.Subject == "" || extra.Host == "" || extra.Project == "" || extra.Gen == nil ||
		!slices.Contains(extra.RealmAccess.Roles, NodeRole) {
		return NodeClaims{}, unauthorized("not a node token")
	}
	return NodeClaims{Subject: std.Subject, HostID: extra.Host, Project: extra.Project, Gen: *extra.Gen, Expiry: std.Expiry.Time()}, nil
}
