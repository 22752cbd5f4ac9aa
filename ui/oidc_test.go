package ui_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/ui"
)

// fakeIssuer is an OIDC issuer that approves every sign-in at once, as
// the user's account, and checks the PKCE verifier at its token endpoint.
type fakeIssuer struct {
	srv       *httptest.Server
	mu        sync.Mutex
	challenge map[string]string // code → code_challenge
	token     string            // the access token it gives
	lastAuth  url.Values
}

func newFakeIssuer(t *testing.T, token string) *fakeIssuer {
	fi := &fakeIssuer{challenge: map[string]string{}, token: token}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": fi.srv.URL,
			"authorization_endpoint": fi.srv.URL + "/auth", "token_endpoint": fi.srv.URL + "/token"})
	})
	mux.HandleFunc("GET /auth", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		fi.mu.Lock()
		fi.lastAuth = q
		code := "code-" + q.Get("state")[:6]
		fi.challenge[code] = q.Get("code_challenge")
		fi.mu.Unlock()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "eim-ui" || q.Get("response_type") != "code" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		fi.mu.Lock()
		want := fi.challenge[r.PostFormValue("code")]
		fi.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if want == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != want || r.PostFormValue("grant_type") != "authorization_code" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"access_token": fi.token, "token_type": "Bearer"})
	})
	fi.srv = httptest.NewServer(mux)
	t.Cleanup(fi.srv.Close)
	return fi
}

func TestOIDCSignIn(t *testing.T) {
	e := newEnv(t, proj)
	fi := newFakeIssuer(t, tokRO)
	h, err := ui.New(e.inv, tokens{tokRO: {Subject: "ro", Roles: []string{eim.RoleAdmin}}}, ui.Options{OIDC: &ui.OIDC{Issuer: fi.srv.URL, ClientID: "eim-ui"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}

	res, err := c.Get(srv.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	login, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(login), `id="oidc-signin"`) {
		t.Errorf("the sign-in page offers no sign-in through the issuer")
	}
	res, err = c.Get(srv.URL + "/ui/oidc/start?next=" + url.QueryEscape("/ui/p/acme/hosts"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	body := string(b)
	if res.StatusCode != 200 || !strings.Contains(body, `url=/ui/p/acme/hosts`) {
		t.Fatalf("after the issuer: got %d %s", res.StatusCode, body)
	}
	if got := fi.lastAuth.Get("redirect_uri"); got != srv.URL+"/ui/oidc/callback" {
		t.Errorf("redirect_uri: got %q", got)
	}
	u, _ := url.Parse(srv.URL + "/ui/")
	var session *http.Cookie
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "eim_session" {
			session = ck
		}
	}
	if session == nil || session.Value != tokRO {
		t.Fatalf("no session with the issuer's token: %v", jar.Cookies(u))
	}
	res, err = c.Get(srv.URL + "/ui/p/acme/hosts")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Request.URL.Path != "/ui/p/acme/hosts" {
		t.Errorf("a page after signing in: got %d at %s", res.StatusCode, res.Request.URL)
	}

	// A callback that this browser did not start is refused.
	res, err = http.Get(srv.URL + "/ui/oidc/callback?code=code-xxxxxx&state=forged")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a callback without the flow's cookie: got %d, want 403", res.StatusCode)
	}
	// A verifier the issuer does not accept gives no session.
	jar2, _ := cookiejar.New(nil)
	c2 := &http.Client{Jar: jar2, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/ui/oidc/callback" {
			fi.mu.Lock()
			fi.challenge[req.URL.Query().Get("code")] = "not-the-challenge"
			fi.mu.Unlock()
		}
		return nil
	}}
	res, err = c2.Get(srv.URL + "/ui/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || len(jar2.Cookies(u)) != 0 {
		t.Errorf("a refused code exchange: got %d with cookies %v, want 502 and no session", res.StatusCode, jar2.Cookies(u))
	}
}
