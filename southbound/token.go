package southbound

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
)

// OAuth2 error codes of the token endpoint (RFC 6749 §5.2).
const (
	errInvalidRequest       = "invalid_request"
	errInvalidClient        = "invalid_client"
	errUnsupportedGrantType = "unsupported_grant_type"
	errUnavailable          = "temporarily_unavailable"
)

// Bounds of the credentials accepted; ours are far shorter.
const (
	maxClientID     = 64
	maxClientSecret = 128
)

// tokenRequest is a parsed client-credentials token request.
type tokenRequest struct {
	ClientID, ClientSecret string
}

// oauthError is an RFC 6749 error answer.
type oauthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description"`
	// reason is what the log says when Description is kept vague.
	reason string
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func badRequest(code, desc string) *oauthError {
	return &oauthError{Status: http.StatusBadRequest, Code: code, Description: desc}
}

func badClient(desc string) *oauthError {
	return &oauthError{Status: http.StatusUnauthorized, Code: errInvalidClient, Description: desc}
}

// badCredentials refuses a client the same way whether it is unknown, its
// secret wrong or its credentials revoked, so that the endpoint, which
// takes no other authentication, cannot be used to probe for host IDs.
// The log gets the reason.
func badCredentials(reason string) *oauthError {
	e := badClient("invalid client credentials")
	e.reason = reason
	return e
}

type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

// token is the handler of POST /oauth2/token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeOAuthError(w, &oauthError{Status: http.StatusMethodNotAllowed, Code: errInvalidRequest, Description: "use POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTokenRequest))
	if err != nil {
		writeOAuthError(w, badRequest(errInvalidRequest, "request body unreadable or larger than 8 KiB"))
		return
	}
	req, oerr := parseTokenRequest(r.Header.Get("Content-Type"), r.Header.Get("Authorization"), body)
	if oerr == nil {
		if ok, retry := s.admission.admit(s.now()); !ok {
			// Not logged: a restart's storm refuses thousands a second;
			// eim_node_token_requests_total{result="deferred"} counts them.
			s.deferred.Inc()
			secs := int64((retry + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeOAuthError(w, &oauthError{Status: http.StatusServiceUnavailable, Code: errUnavailable,
				Description: fmt.Sprintf("too many token requests at once: retry after %d s", secs)})
			return
		}
		var resp tokenResponse
		resp, oerr = s.issue(r, req)
		if oerr == nil {
			s.issued.Inc()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Pragma", "no-cache")
			json.NewEncoder(w).Encode(resp)
			return
		}
	}
	reason := oerr.reason
	if reason == "" {
		reason = oerr.Description
	}
	s.tokens.WithLabelValues(oerr.Code).Inc()
	s.log.Info("token request refused", "client_id", truncate(req.ClientID, maxClientID), "remote", r.RemoteAddr, "error", oerr.Code, "reason", reason)
	writeOAuthError(w, oerr)
}

// issue authenticates the client against its host and mints a node token.
func (s *Server) issue(r *http.Request, req tokenRequest) (tokenResponse, *oauthError) {
	hostID, ok := HostIDOfClient(req.ClientID)
	if !ok {
		CheckSecret("", req.ClientSecret)
		return tokenResponse{}, badCredentials("unknown client")
	}
	cred, err := s.nodeCredentials(r.Context(), "", hostID)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		CheckSecret("", req.ClientSecret) // spend the same time as for a known client
		return tokenResponse{}, badCredentials("unknown client")
	case err != nil:
		s.storeWarn("token request: read host", hostID, err)
		return tokenResponse{}, &oauthError{Status: http.StatusServiceUnavailable, Code: errUnavailable, Description: "try again later"}
	}
	if !CheckSecret(cred.SecretHash, req.ClientSecret) {
		return tokenResponse{}, badCredentials("wrong client secret, or credentials revoked")
	}
	if cred.Revoked() {
		return tokenResponse{}, badCredentials("credentials revoked")
	}
	// The claims outlive the request (the verifier remembers them): the
	// client ID is copied out of the form body, which holds the secret
	// too and would otherwise stay in memory with it.
	claims := auth.NodeClaims{Subject: strings.Clone(req.ClientID), HostID: cred.HostID, Project: cred.Project, Gen: cred.Gen}
	tok, exp, err := s.issuer.MintNode(claims, s.ttl)
	if err != nil {
		s.log.Error("token request: mint", "host", hostID, "error", err)
		return tokenResponse{}, &oauthError{Status: http.StatusInternalServerError, Code: "server_error", Description: "could not issue a token"}
	}
	claims.Expiry = exp
	s.verifier.Remember(tok, claims) // its calls to this process need no signature check
	return tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(s.ttl / time.Second)}, nil
}

// parseTokenRequest parses a client-credentials token request (RFC 6749
// §4.4, client authentication per §2.3.1: HTTP Basic or the form fields).
func parseTokenRequest(contentType, authorization string, body []byte) (tokenRequest, *oauthError) {
	var req tokenRequest
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return req, badRequest(errInvalidRequest, "want Content-Type application/x-www-form-urlencoded")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return req, badRequest(errInvalidRequest, "malformed form body")
	}
	for k, v := range form {
		if len(v) > 1 {
			return req, badRequest(errInvalidRequest, "parameter "+truncate(k, 32)+" given more than once")
		}
	}
	switch gt := form.Get("grant_type"); gt {
	case "client_credentials":
	case "":
		return req, badRequest(errInvalidRequest, "grant_type is required")
	default:
		return req, badRequest(errUnsupportedGrantType, "only grant_type client_credentials is supported")
	}

	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if authorization != "" {
		id, secret, err := parseBasic(authorization)
		if err != nil {
			return req, badClient(err.Error())
		}
		if formSecret != "" {
			return req, badRequest(errInvalidRequest, "client authenticated twice (HTTP Basic and client_secret)")
		}
		if formID != "" && formID != id {
			return req, badRequest(errInvalidRequest, "client_id differs from the HTTP Basic user")
		}
		req.ClientID, req.ClientSecret = id, secret
	} else {
		req.ClientID, req.ClientSecret = formID, formSecret
	}
	switch {
	case req.ClientID == "" || req.ClientSecret == "":
		return req, badClient("client_id and client_secret are required")
	case len(req.ClientID) > maxClientID || len(req.ClientSecret) > maxClientSecret:
		return req, badCredentials("client_id or client_secret too long")
	}
	return req, nil
}

// parseBasic parses "Basic base64(urlencode(id):urlencode(secret))".
func parseBasic(h string) (id, secret string, err error) {
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", errors.New("want HTTP Basic client authentication")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", errors.New("malformed HTTP Basic credentials")
	}
	id, secret, ok = strings.Cut(string(raw), ":")
	if !ok {
		return "", "", errors.New("malformed HTTP Basic credentials")
	}
	// RFC 6749 §2.3.1 form-encodes both before Base64; clients that do not
	// send them verbatim, which is the same for our IDs and secrets.
	if u, err := url.QueryUnescape(id); err == nil {
		id = u
	}
	if u, err := url.QueryUnescape(secret); err == nil {
		secret = u
	}
	return id, secret, nil
}

func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="eim"`)
	}
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(e)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
