package agent_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eimhq/eim/agent"
)

func TestDialPinsCA(t *testing.T) {
	ca := newTestCA(t)
	srv := ca.startTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	get := func(c *http.Client) (string, error) {
		resp, err := c.Get(srv.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	t.Run("fingerprint", func(t *testing.T) {
		c, pin, err := agent.DialPin(srv.URL, "sha256:"+strings.ToUpper(ca.fingerprint))
		if err != nil {
			t.Fatal(err)
		}
		if pin.CACertPEM() != nil {
			t.Error("CA known before any connection")
		}
		proto, err := get(c)
		if err != nil {
			t.Fatal(err)
		}
		if proto != "HTTP/2.0" {
			t.Errorf("protocol = %s, want HTTP/2.0", proto)
		}
		if got := string(pin.CACertPEM()); got != ca.pem {
			t.Errorf("learnt CA = %q, want the server's CA", got)
		}
	})
	t.Run("PEM", func(t *testing.T) {
		c, err := agent.Dial(srv.URL, ca.pem)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(c); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong fingerprint", func(t *testing.T) {
		c, err := agent.Dial(srv.URL, "sha256:"+strings.Repeat("ab", 32))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(c); err == nil || !strings.Contains(err.Error(), "pinned CA fingerprint") {
			t.Errorf("err = %v, want a pin mismatch", err)
		}
	})
	t.Run("other CA", func(t *testing.T) {
		other := newTestCA(t)
		c, err := agent.Dial(srv.URL, other.pem)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(c); err == nil {
			t.Error("a server of another CA was trusted")
		}
		// Pinning the fingerprint of a CA that is not in the chain.
		c, err = agent.Dial(srv.URL, other.fingerprint)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(c); err == nil {
			t.Error("a server of another CA was trusted by fingerprint")
		}
	})
	t.Run("leaf fingerprint", func(t *testing.T) {
		// Pinning the server certificate itself is refused: it is not a CA.
		c, err := agent.Dial(srv.URL, sha256Hex(ca.serverCert.Certificate[0]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(c); err == nil || !strings.Contains(err.Error(), "not a CA") {
			t.Errorf("err = %v, want not a CA", err)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct{ url, ca string }{
			{"http://127.0.0.1:1", ca.fingerprint},
			{srv.URL, "sha256:1234"},
			{srv.URL, "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"},
		} {
			if _, err := agent.Dial(tc.url, tc.ca); err == nil {
				t.Errorf("Dial(%q, %q) succeeded", tc.url, tc.ca)
			}
		}
	})
}
