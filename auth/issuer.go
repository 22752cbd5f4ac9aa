package auth

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/eimhq/eim"
)

// Issuer mints tokens signed with the server's Ed25519 key (EdDSA JWTs).
// It is safe for concurrent use.
type Issuer struct {
	key    ed25519.PrivateKey
	kid    string
	signer jose.Signer
	now    func() time.Time
}

// LoadIssuer loads the signing key from dataDir/signing.key, creating the
// directory and a fresh key (mode 0600) when there is none. Creation is
// atomic: the key is written to a temporary file and linked into place, so
// two processes starting at once end up with the same key and a reader never
// sees a half-written file. A key file readable by group or others is
// refused, as ssh refuses such keys.
func LoadIssuer(dataDir string) (*Issuer, error) {
	path := filepath.Join(dataDir, KeyFile)
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createKey(dataDir, path)
	}
	if err != nil {
		return nil, err
	}
	return newIssuer(key)
}

// LoadIssuerFile loads the signing key from a file the operator provides
// (--signing-key), such as a Kubernetes Secret mounted read-only, so that
// every replica of a deployment signs and verifies with one key. It never
// creates or writes the file. The file may be readable by its group, as a
// Secret mounted for a pod's fsGroup is, but not by others.
func LoadIssuerFile(path string) (*Issuer, error) {
	key, err := readKeyMode(path, 0o007, "readable by its owner (and group) only, e.g. chmod 640")
	if err != nil {
		return nil, err
	}
	return newIssuer(key)
}

// NewIssuer returns an Issuer for a key held in memory (tests, tools).
func NewIssuer(key ed25519.PrivateKey) (*Issuer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, eim.Errorf(eim.EINVALID, "signing key: want an Ed25519 private key of %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	return newIssuer(key)
}

func newIssuer(key ed25519.PrivateKey) (*Issuer, error) {
	jwk := jose.JSONWebKey{Key: key.Public()}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key thumbprint: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.EdDSA, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), kid),
	)
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	return &Issuer{key: key, kid: kid, signer: signer, now: time.Now}, nil
}

// KeyID returns the "kid" of the tokens the Issuer mints: the RFC 7638
// thumbprint of its public key.
func (i *Issuer) KeyID() string { return i.kid }

// PublicKey returns the public half of the signing key.
func (i *Issuer) PublicKey() ed25519.PublicKey { return i.key.Public().(ed25519.PublicKey) }

// Mint returns a signed JWT for subject with the realm roles, valid for ttl
// from now. Its claims are sub, iss ("eim"), iat, exp, jti, typ ("Bearer")
// and realm_access.roles, as a Keycloak access token has them.
func (i *Issuer) Mint(subject string, roles []string, ttl time.Duration) (string, error) {
	if subject == "" {
		return "", eim.Errorf(eim.EINVALID, "subject: must not be empty")
	}
	if ttl <= 0 {
		return "", eim.Errorf(eim.EINVALID, "ttl: must be positive, got %s", ttl)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("token id: %w", err)
	}
	now := i.now()
	std := jwt.Claims{
		Issuer:   LocalIssuer,
		Subject:  subject,
		IssuedAt: jwt.NewNumericDate(now),
		Expiry:   jwt.NewNumericDate(now.Add(ttl)),
		ID:       hex.EncodeToString(jti[:]),
	}
	if roles == nil {
		roles = []string{}
	}
	extra := claims{RealmAccess: realmAccess{Roles: roles}, Typ: "Bearer"}
	tok, err := jwt.Signed(i.signer).Claims(std).Claims(extra).Serialize()
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return tok, nil
}

func readKey(path string) (ed25519.PrivateKey, error) {
	return readKeyMode(path, 0o077, "private with chmod 600")
}

// readKeyMode reads an Ed25519 key in PEM (PKCS #8), refusing a file whose
// permission bits meet forbidden; fix says how to repair it.
func readKeyMode(path string, forbidden fs.FileMode, fix string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&forbidden != 0 {
		return nil, eim.Errorf(eim.EINVALID, "signing key %s is accessible by others (mode %04o); make it %s", path, fi.Mode().Perm(), fix)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, eim.Errorf(eim.EINVALID, "signing key %s: not a PEM \"PRIVATE KEY\" block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, eim.Errorf(eim.EINVALID, "signing key %s: %v", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, eim.Errorf(eim.EINVALID, "signing key %s: want an Ed25519 key, got %T", path, k)
	}
	return ek, nil
}

// createKey writes a new key to a temporary file and links it to path; if
// another process linked its key first, that key wins and is returned.
func createKey(dir, path string) (ed25519.PrivateKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode signing key: %w", err)
	}
	f, err := os.CreateTemp(dir, ".signing.key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("write signing key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	werr := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, fmt.Errorf("write signing key: %w", werr)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path)
		}
		return nil, fmt.Errorf("install signing key: %w", err)
	}
	return key, nil
}
