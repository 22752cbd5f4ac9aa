package connect

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// oneCredential is a ConnectStore that knows one credential.
type oneCredential struct {
	eim.ConnectStore
	c *eim.ConnectCredential
}

func (o oneCredential) FindConnectCredential(_ context.Context, id string) (*eim.ConnectCredential, error) {
	if id == o.c.ID {
		return o.c, nil
	}
	return nil, eim.Errorf(eim.ENOTFOUND, "none")
}

// FuzzCheckToken: whatever an agent presents, the check answers an
// EUNAUTHORIZED error or the credential, never panics, and accepts only
// the issued token.
func FuzzCheckToken(f *testing.F) {
	now := time.Now()
	c, tok, err := newToken("p", "c", now, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	store := oneCredential{c: c}
	for _, s := range []string{tok, "", "eimct_", "eimct_ct-.x", "eimct_" + c.ID + ".", "eimct_" + c.ID + ".x.y", tok + "x", strings.ToUpper(tok)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := checkToken(context.Background(), store, s, now)
		if s == tok {
			if err != nil || got != c {
				t.Fatalf("the issued token: %v, %v", got, err)
			}
			return
		}
		if err == nil || eim.ErrorCode(err) != eim.EUNAUTHORIZED {
			t.Fatalf("checkToken(%q): got %v, %v; want EUNAUTHORIZED", s, got, err)
		}
	})
}

// TestTokenExpiry: a token is refused from its expiry on.
func TestTokenExpiry(t *testing.T) {
	now := time.Now()
	c, tok, _ := newToken("p", "c", now, time.Minute)
	store := oneCredential{c: c}
	if _, err := checkToken(context.Background(), store, tok, now.Add(59*time.Second)); err != nil {
		t.Fatalf("before its expiry: %v", err)
	}
	if _, err := checkToken(context.Background(), store, tok, now.Add(time.Minute)); eim.ErrorCode(err) != eim.EUNAUTHORIZED || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("at its expiry: got %v, want expired", err)
	}
}
