package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

func TestNodeTokenRoundTrip(t *testing.T) {
	iss := newIssuer(t)
	want := auth.NodeClaims{Subject: "edgenode-host-1234abcd", HostID: "host-1234abcd", Project: "default", Gen: 3}
	tok, exp, err := iss.MintNode(want, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 14*time.Minute || d > 15*time.Minute {
		t.Errorf("expiry in %s, want about 15m", d)
	}
	v := auth.NewNodeVerifier(iss, 0, nil)
	for range 2 { // the second answer comes from the cache
		got, err := v.Verify(tok)
		if err != nil {
			t.Fatal(err)
		}
		want.Expiry = got.Expiry
		if got != want || !got.Expiry.Equal(exp.Truncate(time.Second)) {
			t.Errorf("Verify = %+v, want %+v (expiry %s)", got, want, exp)
		}
	}

	// The node token carries the realm role and no project role: the
	// northbound API gives it nothing.
	nv, err := auth.NewVerifier(context.Background(), iss, auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nv.Authenticate(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.IsAdmin() || p.CanRead(&eim.Project{Name: "default"}) || len(p.Roles) != 1 || p.Roles[0] != auth.NodeRole {
		t.Errorf("node token as a principal: roles %v, want only %s", p.Roles, auth.NodeRole)
	}
}

func TestNodeVerifierRefuses(t *testing.T) {
	iss, other := newIssuer(t), newIssuer(t)
	node := auth.NodeClaims{Subject: "edgenode-h", HostID: "h", Project: "p", Gen: 1}
	good, _, err := iss.MintNode(node, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _, err := other.MintNode(node, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	user, err := iss.Mint("alice", []string{eim.RoleAdmin}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name, token string
		at          time.Time
		want        string
	}{
		{"empty", "", now, "missing"},
		{"garbage", "a.b.c", now, "not a valid token"},
		{"other server", foreign, now, "unknown key"},
		{"user token", user, now, "not a node token"},
		{"expired", good, now.Add(2 * time.Minute), "expired"},
		{"tampered", good[:len(good)-4] + "AAAA", now, "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := auth.NewNodeVerifier(iss, 0, func() time.Time { return tc.at })
			_, err := v.Verify(tc.token)
			if eim.ErrorCode(err) != eim.EUNAUTHORIZED || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Verify: got %v, want EUNAUTHORIZED mentioning %q", err, tc.want)
			}
		})
	}

	// A cached token still expires.
	at := now
	v := auth.NewNodeVerifier(iss, 0, func() time.Time { return at })
	if _, err := v.Verify(good); err != nil {
		t.Fatal(err)
	}
	at = now.Add(2 * time.Minute)
	if _, err := v.Verify(good); eim.ErrorCode(err) != eim.EUNAUTHORIZED {
		t.Errorf("cached token after expiry: got %v, want EUNAUTHORIZED", err)
	}

	if _, _, err := iss.MintNode(auth.NodeClaims{Subject: "edgenode-h", HostID: "h"}, time.Minute); err == nil {
		t.Error("MintNode without project: got nil error, want one")
	}
}

// A token remembered at its minting answers as one verified: the same
// claims as a verifier that checked its signature finds, and it still
// expires.
func TestNodeVerifierRemember(t *testing.T) {
	iss := newIssuer(t)
	now := time.Now()
	clock := func() time.Time { return now }
	claims := auth.NodeClaims{Subject: "edgenode-host-1234abcd", HostID: "host-1234abcd", Project: "default", Gen: 2}
	tok, exp, err := iss.MintNode(claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checked, err := auth.NewNodeVerifier(iss, 0, clock).Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	claims.Expiry = exp
	v := auth.NewNodeVerifier(iss, 0, clock)
	v.Remember(tok, claims)
	got, err := v.Verify(tok)
	if err != nil || got != checked {
		t.Fatalf("remembered token: %+v, %v; want %+v as checked", got, err, checked)
	}
	// What is remembered is what Verify returns, without a check: a
	// string that is no token at all shows it came from the cache.
	v.Remember("not-a-jwt", claims)
	if got, err := v.Verify("not-a-jwt"); err != nil || got != claims {
		t.Fatalf("remembered string: %+v, %v; want the remembered claims", got, err)
	}
	now = exp.Add(time.Second)
	if _, err := v.Verify(tok); eim.ErrorCode(err) != eim.EUNAUTHORIZED {
		t.Fatalf("remembered token after its expiry: %v, want EUNAUTHORIZED", err)
	}
}
