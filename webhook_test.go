package eim_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

func TestCheckWebhookURL(t *testing.T) {
	strict, open := eim.URLPolicy{}, eim.URLPolicy{AllowPrivate: true}
	for _, tc := range []struct {
		url       string
		ok, okAll bool // under the default policy, and with --webhook-allow-private
		words     string
	}{
		{"https://hooks.example.com/eim", true, true, ""},
		{"http://127.0.0.1:8080/in", true, true, ""},
		{"http://[::1]:9/x", true, true, ""},
		{"http://10.1.2.3/x", true, true, ""},
		{"", false, false, "required"},
		{"ftp://example.com/x", false, false, "scheme"},
		{"javascript:alert(1)", false, false, "scheme"},
		{"example.com/x", false, false, "scheme"},
		{"http://user:pw@example.com/", false, false, "user"},
		{"http:///x", false, false, "host"},
		{"http://example.com:99999/", false, false, "port"},
		{"http://169.254.169.254/latest/meta-data/", false, true, "link-local"},
		{"http://[fe80::1%25eth0]/x", false, true, "link-local"},
		{"http://[::ffff:169.254.169.254]/x", false, true, "link-local"},
		{"http://[fd00:ec2::254]/x", false, true, "metadata"},
		{"http://0.0.0.0/x", false, true, "unspecified"},
		{"http://metadata.google.internal/computeMetadata/v1/", false, true, "metadata"},
		{"http://METADATA.google.internal./x", false, true, "metadata"},
		{"http://example.com/" + strings.Repeat("a", eim.MaxWebhookURL), false, false, "longer"},
	} {
		err := eim.CheckWebhookURL(tc.url, strict)
		if (err == nil) != tc.ok {
			t.Errorf("CheckWebhookURL(%q): got %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && (eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), "url:") || !strings.Contains(eim.ErrorMessage(err), tc.words)) {
			t.Errorf("CheckWebhookURL(%q): got %v, want EINVALID naming url and %q", tc.url, err, tc.words)
		}
		if err := eim.CheckWebhookURL(tc.url, open); (err == nil) != tc.okAll {
			t.Errorf("CheckWebhookURL(%q, allow private): got %v, want ok=%v", tc.url, err, tc.okAll)
		}
	}
}

func TestCheckEventTypes(t *testing.T) {
	if err := eim.CheckEventTypes(eim.EventTypes); err != nil {
		t.Errorf("every type: %v", err)
	}
	for _, bad := range [][]string{nil, {}, {"host.exploded"}, {"host.onboarded", "host.onboarded"}, {""}} {
		if err := eim.CheckEventTypes(bad); eim.ErrorCode(err) != eim.EINVALID || !strings.HasPrefix(eim.ErrorMessage(err), "eventTypes:") {
			t.Errorf("CheckEventTypes(%q): got %v, want EINVALID naming eventTypes", bad, err)
		}
	}
}

// TestSignature: the documented scheme, t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">, and its check.
func TestSignature(t *testing.T) {
	at := time.Unix(1_764_000_000, 0)
	body := []byte(`{"id":"evt-1","type":"host.onboarded"}`)
	h := eim.Sign("0123456789abcdef", at, body)
	// Computed independently: printf '1764000000.{"id":"evt-1","type":"host.onboarded"}' |
	// openssl dgst -sha256 -hmac 0123456789abcdef
	const want = "t=1764000000,v1=46a64c1e887739feeedc219b8d9d9a6ddd003d1299582f9813caff07711d4146"
	if h != want {
		t.Fatalf("Sign: got %q, want %q", h, want)
	}
	if err := eim.VerifySignature("0123456789abcdef", h, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("VerifySignature of a fresh signature: %v", err)
	}
	for name, tc := range map[string]struct {
		secret, header string
		body           []byte
		now            time.Time
	}{
		"other secret":    {"0123456789abcdeX", h, body, at},
		"changed body":    {"0123456789abcdef", h, append([]byte(nil), append(body, ' ')...), at},
		"stale":           {"0123456789abcdef", h, body, at.Add(10 * time.Minute)},
		"from the future": {"0123456789abcdef", h, body, at.Add(-10 * time.Minute)},
		"no v1":           {"0123456789abcdef", "t=1764000000", body, at},
		"garbage":         {"0123456789abcdef", "sha256=abc", body, at},
	} {
		if err := eim.VerifySignature(tc.secret, tc.header, tc.body, tc.now, 5*time.Minute); err == nil {
			t.Errorf("%s: VerifySignature accepted it", name)
		}
	}
}

// FuzzCheckWebhookURL: whatever it is given, it does not panic, and what
// it accepts is an http(s) URL with a host and no user information.
func FuzzCheckWebhookURL(f *testing.F) {
	for _, s := range []string{"https://a.example/x", "http://169.254.169.254/", "http://[fe80::1]/", "http://u@h/", "ftp://x", "http://[::ffff:a9fe:a9fe]/", "http://%zz/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if eim.CheckWebhookURL(s, eim.URLPolicy{}) != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil {
			t.Fatalf("accepted %q", s)
		}
	})
}
