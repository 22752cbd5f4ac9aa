package auth_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

// FuzzAuthenticate feeds arbitrary bearer tokens to the verifier: it must
// never panic, must fail only with EUNAUTHORIZED, and must accept only
// tokens that carry a subject. The seed corpus (testdata/fuzz) holds real
// tokens of a fixed key and near-misses.
func FuzzAuthenticate(f *testing.F) {
	seed := make([]byte, ed25519.SeedSize) // a fixed key, so corpus tokens verify
	iss, err := auth.NewIssuer(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		f.Fatal(err)
	}
	v, err := auth.NewVerifier(context.Background(), iss, auth.VerifierOptions{})
	if err != nil {
		f.Fatal(err)
	}
	tok, err := iss.Mint("fuzz", []string{eim.RoleAdmin, "p_im-r"}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:len(tok)-3])
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, token string) {
		p, err := v.Authenticate(context.Background(), token)
		if err != nil {
			if code := eim.ErrorCode(err); code != eim.EUNAUTHORIZED {
				t.Fatalf("error code: got %q (%v), want %q", code, err, eim.EUNAUTHORIZED)
			}
			if p != nil {
				t.Fatalf("principal %+v returned with error %v", p, err)
			}
			return
		}
		if p == nil || p.Subject == "" {
			t.Fatalf("accepted token %q with principal %+v", token, p)
		}
	})
}
