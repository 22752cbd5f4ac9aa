package ui_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/httpapi"
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
	// refresh is the refresh token it gives with the access token (none
	// when empty); onRefresh answers a refresh_token grant (the access and
	// refresh tokens, or ok false for invalid_grant).
	refresh   string
	onRefresh func(token, clientID string) (access, refresh string, ok bool)
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
		if r.PostFormValue("grant_type") == "refresh_token" && fi.onRefresh != nil {
			access, refresh, ok := fi.onRefresh(r.PostFormValue("refresh_token"), r.PostFormValue("client_id"))
			if !ok {
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"access_token": access, "refresh_token": refresh})
			return
		}
		fi.mu.Lock()
		want := fi.challenge[r.PostFormValue("code")]
		fi.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		if want == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != want || r.PostFormValue("grant_type") != "authorization_code" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
			return
		}
		answer := map[string]string{"access_token": fi.token, "token_type": "Bearer"}
		if fi.refresh != "" {
			answer["refresh_token"] = fi.refresh
		}
		_ = json.NewEncoder(w).Encode(answer)
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

// liveTokens is an Authenticator whose tokens can expire while the test
// runs.
type liveTokens struct {
	mu sync.Mutex
	ok map[string]bool
}

func (lt *liveTokens) set(tok string, valid bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.ok[tok] = valid
}

func (lt *liveTokens) Authenticate(_ context.Context, tok string) (*eim.Principal, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if !lt.ok[tok] {
		return nil, eim.Errorf(eim.EUNAUTHORIZED, "token expired")
	}
	return &eim.Principal{Subject: "oidc-user", Roles: []string{eim.RoleAdmin}}, nil
}

// TestOIDCRefresh: a session signed in through the issuer outlives its
// access token: the server trades the refresh token (once for requests
// that come together, rotated as the issuer rotates it) and the user
// stays on the page; a form made before the refresh is still taken; a
// refresh token the issuer refuses ends the session.
func TestOIDCRefresh(t *testing.T) {
	e := newEnv(t, proj)
	lt := &liveTokens{ok: map[string]bool{"acc-1": true}}
	var mu sync.Mutex
	grants, refuse := 0, false
	next := 1
	fi := newFakeIssuer(t, "acc-1")
	fi.refresh = "ref-1"
	fi.onRefresh = func(token, clientID string) (string, string, bool) {
		mu.Lock()
		defer mu.Unlock()
		grants++
		if refuse || token != fmt.Sprintf("ref-%d", next) || clientID != "eim-ui" {
			return "", "", false
		}
		next++
		acc := fmt.Sprintf("acc-%d", next)
		lt.set(acc, true)
		return acc, fmt.Sprintf("ref-%d", next), true
	}
	iss := fi.srv
	h, err := ui.New(e.inv, lt, ui.Options{OIDC: &ui.OIDC{Issuer: iss.URL, ClientID: "eim-ui"}, API: httpapi.InProcess(httpapi.New(e.inv, lt, httpapi.Options{}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	u, _ := url.Parse(srv.URL + "/ui/")
	cookie := func(name string) string {
		for _, ck := range jar.Cookies(u) {
			if ck.Name == name {
				return ck.Value
			}
		}
		return ""
	}
	get := func(path string) (int, string, string) {
		t.Helper()
		res, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res.StatusCode, res.Request.URL.Path, string(b)
	}
	if code, _, _ := get("/ui/oidc/start"); code != 200 || cookie("eim_session") != "acc-1" || cookie("eim_refresh") != "ref-1" {
		t.Fatalf("sign-in: %d, session %q, refresh %q", code, cookie("eim_session"), cookie("eim_refresh"))
	}

	// The access token expires; three requests come at once (a page, its
	// event stream, another tab): one trade, all served.
	lt.set("acc-1", false)
	var wg sync.WaitGroup
	paths := make([]string, 3)
	for i := range paths {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/p/acme/hosts", nil)
			req.AddCookie(&http.Cookie{Name: "eim_session", Value: "acc-1"})
			req.AddCookie(&http.Cookie{Name: "eim_refresh", Value: "ref-1"})
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			if res.StatusCode == 200 {
				paths[i] = res.Request.URL.Path
			}
		})
	}
	wg.Wait()
	mu.Lock()
	if grants != 1 || !slices.Equal(paths, []string{"/ui/p/acme/hosts", "/ui/p/acme/hosts", "/ui/p/acme/hosts"}) {
		t.Errorf("three requests with an expired token: %d refresh grants, served %q; want one grant, all served", grants, paths)
	}
	mu.Unlock()
	// The browser's own request: refreshed in place, the new tokens kept.
	if code, path, _ := get("/ui/p/acme/hosts"); code != 200 || path != "/ui/p/acme/hosts" || cookie("eim_session") != "acc-2" || cookie("eim_refresh") != "ref-2" {
		t.Fatalf("a page after the access token expired: %d at %s, session %q, refresh %q; want the page, acc-2 and ref-2", code, path, cookie("eim_session"), cookie("eim_refresh"))
	}

	// A form made before the next expiry is taken after the refresh.
	_, _, page := get("/ui/p/acme/locations")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the locations page")
	}
	lt.set("acc-2", false)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/p/acme/regions", strings.NewReader(url.Values{"csrf": {m[1]}, "name": {"after-refresh"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	c.CheckRedirect = nil
	if res.StatusCode != http.StatusSeeOther || cookie("eim_session") != "acc-3" {
		t.Errorf("a form sent after its session's token expired: got %d, session %q; want 303 and acc-3", res.StatusCode, cookie("eim_session"))
	}

	// The issuer ends the session: the next page asks to sign in again.
	lt.set("acc-3", false)
	mu.Lock()
	refuse = true
	mu.Unlock()
	if code, path, _ := get("/ui/p/acme/hosts"); code != 200 || path != "/ui/login" || cookie("eim_refresh") != "" {
		t.Errorf("a refused refresh: %d at %s, refresh cookie %q; want the sign-in page and no refresh cookie", code, path, cookie("eim_refresh"))
	}
}
