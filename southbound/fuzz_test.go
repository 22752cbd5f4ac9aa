package southbound

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzParseTokenRequest: the token request parser never panics, and what it
// accepts is a client-credentials request with both credentials present and
// within bounds; refusals carry an RFC 6749 code and a status.
func FuzzParseTokenRequest(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", "", "grant_type=client_credentials&client_id=edgenode-host-0123abcd&client_secret=s3cr3t")
	f.Add("application/x-www-form-urlencoded; charset=utf-8", "Basic ZWRnZW5vZGUtaG9zdC0wMTIzYWJjZDpzM2NyM3Q=", "grant_type=client_credentials")
	f.Add("application/x-www-form-urlencoded", "Basic ZWRnZW5vZGUtaG9zdC0wMTIzYWJjZDpzM2NyM3Q=", "grant_type=client_credentials&client_secret=x")
	f.Add("application/json", "", `{"grant_type":"client_credentials"}`)
	f.Add("application/x-www-form-urlencoded", "Basic !!", "grant_type=password")
	f.Add("application/x-www-form-urlencoded", "", "grant_type=client_credentials&grant_type=client_credentials")
	f.Add("application/x-www-form-urlencoded", "", "a=%zz;b")
	f.Fuzz(func(t *testing.T, contentType, authz, body string) {
		req, err := parseTokenRequest(contentType, authz, []byte(body))
		if err != nil {
			switch err.Code {
			case errInvalidRequest, errInvalidClient, errUnsupportedGrantType:
			default:
				t.Fatalf("error code %q", err.Code)
			}
			if err.Status != http.StatusBadRequest && err.Status != http.StatusUnauthorized {
				t.Fatalf("status %d", err.Status)
			}
			if err.Description == "" {
				t.Fatal("error without a description")
			}
			return
		}
		if req.ClientID == "" || req.ClientSecret == "" || len(req.ClientID) > maxClientID || len(req.ClientSecret) > maxClientSecret {
			t.Fatalf("accepted %+v", req)
		}
		if !strings.Contains(body, "client_credentials") {
			t.Fatalf("accepted a body without grant_type client_credentials: %q", body)
		}
	})
}
