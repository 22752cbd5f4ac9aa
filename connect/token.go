package connect

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"
	"time"

	"github.com/eimhq/eim"
)

// A connect token is "eimct_<id>.<secret>" (eim.NewConnectToken): the ID
// finds the stored credential, whose hash the secret must match. Only the
// hash is stored.
const tokenPrefix = eim.ConnectTokenPrefix

// newToken makes a credential for the cluster and its token.
func newToken(project, cluster string, now time.Time, ttl time.Duration) (*eim.ConnectCredential, string, error) {
	return eim.NewConnectToken(project, cluster, now, ttl)
}

// checkToken returns the credential the token is for when it is valid
// now: a known ID, a secret whose hash matches (compared in constant
// time), not expired.
func checkToken(ctx context.Context, store eim.ConnectStore, token string, now time.Time) (*eim.ConnectCredential, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	id, sec, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || !strings.HasPrefix(id, "ct-") || len(id) > 40 || sec == "" {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "malformed connect token (want eimct_<id>.<secret>)")
	}
	c, err := store.FindConnectCredential(ctx, id)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "unknown connect token %s (revoked, or issued by another deployment)", id)
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(sec))
	if subtle.ConstantTimeCompare(sum[:], c.Hash) != 1 {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "connect token %s: wrong secret", id)
	}
	if !now.Before(c.Expires) {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "connect token %s expired at %s: issue a new one (eim connect token)", id, c.Expires.Format(time.RFC3339))
	}
	return c, nil
}
