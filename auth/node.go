package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/internal/intern"
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

	mu sync.Mutex
	// cache holds the claims of tokens verified, by tokenKey, compactly
	// (cachedNode); odd holds those that do not fit that shape.
	cache map[tokenKey]cachedNode
	odd   map[tokenKey]NodeClaims
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
	key := keyOf(token)
	v.mu.Lock()
	n, ok := v.lookup(key)
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
	key := keyOf(token)
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
func (v *NodeVerifier) add(key tokenKey, n NodeClaims, now time.Time) {
	if v.cache == nil {
		v.cache = make(map[tokenKey]cachedNode)
	}
	if v.cached() >= v.capacity() {
		v.prune(now)
	} else if now.Sub(v.swept) >= expireEvery {
		v.expire(now)
	}
	if c, ok := compact(n); ok {
		v.cache[key] = c
	} else {
		if v.odd == nil {
			v.odd = make(map[tokenKey]NodeClaims)
		}
		v.odd[key] = n
	}
	v.peak = max(v.peak, v.cached())
}

// cached returns how many tokens the cache holds. v.mu is held.
func (v *NodeVerifier) cached() int { return len(v.cache) + len(v.odd) }

// lookup returns the claims of the token of key, if cached. v.mu is held.
func (v *NodeVerifier) lookup(key tokenKey) (NodeClaims, bool) {
	if c, ok := v.cache[key]; ok {
		return c.claims(), true
	}
	n, ok := v.odd[key]
	return n, ok
}

// tokenKey is a token's key in the cache: the first half of its SHA-256.
// Finding a token with the key of another (a second preimage of 128
// bits) is out of reach, as it is for the whole hash.
type tokenKey [sha256.Size / 2]byte

func keyOf(token string) tokenKey {
	sum := sha256.Sum256([]byte(token))
	return tokenKey(sum[:sha256.Size/2])
}

// cachedNode is a cached token's claims, compact (a process caches one
// per node of the fleet): the host ID's eight hex digits as a number, the
// subject being the host's client ID ("edgenode-host-xxxxxxxx"), the
// project interned, the expiry in unix nanoseconds.
type cachedNode struct {
	host    uint32
	project intern.Ref
	gen     int64
	expiry  int64
}

// nodeSubject is what every node token's subject starts with: the
// node's OAuth2 client ID is it and the host ID (southbound.ClientID).
const nodeSubject = "edgenode-"

// compact returns n as cachedNode, and whether it fits that shape.
func compact(n NodeClaims) (cachedNode, bool) {
	id, ok := strings.CutPrefix(n.Subject, nodeSubject)
	if !ok || id != n.HostID || !eim.ValidID(eim.KindHost, id) || n.Expiry.IsZero() {
		return cachedNode{}, false
	}
	p, ok := intern.Of(n.Project)
	if !ok {
		return cachedNode{}, false
	}
	var b [4]byte
	hex.Decode(b[:], []byte(id[len(id)-8:]))
	return cachedNode{host: binary.BigEndian.Uint32(b[:]), project: p, gen: n.Gen, expiry: n.Expiry.UnixNano()}, true
}

// claims returns the claims c holds; its subject and host ID share one
// allocation.
func (c cachedNode) claims() NodeClaims {
	var b [len(nodeSubject) + len("host-") + 8]byte
	var raw [4]byte
	binary.BigEndian.PutUint32(raw[:], c.host)
	n := copy(b[:], nodeSubject)
	n += copy(b[n:], "host-")
	hex.Encode(b[n:], raw[:])
	subject := string(b[:])
	return NodeClaims{Subject: subject, HostID: subject[len(nodeSubject):], Project: c.project.String(), Gen: c.gen, Expiry: time.Unix(0, c.expiry)}
}

// expire drops the expired tokens and shrinks the map when it is less
// than half full of its peak. v.mu is held.
func (v *NodeVerifier) expire(now time.Time) {
	v.swept = now
	end := now.Add(-v.leeway).UnixNano()
	for k, c := range v.cache {
		if c.expiry <= end {
			delete(v.cache, k)
		}
	}
	for k, c := range v.odd {
		if !now.Before(c.Expiry.Add(v.leeway)) {
			delete(v.odd, k)
		}
	}
	if v.cached() < v.peak/2 {
		// Made anew: a copy of a map keeps its table's size.
		m := make(map[tokenKey]cachedNode, len(v.cache))
		maps.Copy(m, v.cache)
		v.cache = m
		if v.odd != nil {
			o := make(map[tokenKey]NodeClaims, len(v.odd))
			maps.Copy(o, v.odd)
			v.odd = o
		}
		v.peak = v.cached()
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
	if v.cached() > v.capacity()*3/4 {
		v.cache, v.odd, v.peak = make(map[tokenKey]cachedNode), nil, 0
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
