package main

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

// expiredToken signs, with the server's key in dataDir, an admin token that
// expired ago.
func expiredToken(t *testing.T, dataDir string, ago time.Duration) string {
	t.Helper()
	iss, err := auth.LoadIssuer(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dataDir, auth.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: k.(ed25519.PrivateKey)},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", iss.KeyID()))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: auth.LocalIssuer, Subject: "late", IssuedAt: jwt.NewNumericDate(now.Add(-time.Hour)), Expiry: jwt.NewNumericDate(now.Add(-ago)),
	}).Claims(map[string]any{"typ": "Bearer", "realm_access": map[string]any{"roles": []string{eim.RoleAdmin}}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// An expired token is refused once the leeway (5 s unless --token-leeway
// says otherwise) has passed.
func TestServerTokenLeeway(t *testing.T) {
	get := func(t *testing.T, url, tok string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url+"/v1/projects/default/regions", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	dir := t.TempDir()
	url, stop := startServer(t, dir)
	tok := expiredToken(t, dir, 30*time.Second)
	if got := get(t, url, tok); got != http.StatusUnauthorized {
		t.Errorf("token expired 30 s ago, default leeway: got %d, want 401", got)
	}
	stop()

	url, _ = startServer(t, dir, "--token-leeway", "2m")
	if got := get(t, url, tok); got != http.StatusOK {
		t.Errorf("token expired 30 s ago, --token-leeway 2m: got %d, want 200", got)
	}
	if got := get(t, url, expiredToken(t, dir, 3*time.Minute)); got != http.StatusUnauthorized {
		t.Errorf("token expired 3 min ago, --token-leeway 2m: got %d, want 401", got)
	}
}
