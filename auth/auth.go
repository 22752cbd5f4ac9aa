// Package auth signs and verifies the bearer tokens of the EIM API.
//
// The server keeps its own Ed25519 signing key in its data directory (see
// Issuer) and mints JWTs whose claims look like those of the original EIM's
// Keycloak realm: sub, iss, iat, exp and realm_access.roles. A Verifier
// accepts those tokens and, when configured, the tokens of an external OIDC
// issuer (Keycloak) whose keys it reads from a JWKS URL. Either way the roles
// come from realm_access.roles, so the same role names work for both.
//
// Every verification failure is an *eim.Error with code EUNAUTHORIZED and a
// message that says what was wrong (expired, bad signature, unknown issuer …)
// without echoing the token.
package auth

// LocalIssuer is the "iss" claim of the tokens an Issuer mints.
const LocalIssuer = "eim"

// KeyFile is the name of the signing key's file in the data directory.
const KeyFile = "signing.key"

// claims are the non-registered claims EIM reads, shaped as Keycloak's.
type claims struct {
	RealmAccess       realmAccess `json:"realm_access"`
	Typ               string      `json:"typ,omitempty"`
	PreferredUsername string      `json:"preferred_username,omitempty"`
}

type realmAccess struct {
	Roles []string `json:"roles"`
}
