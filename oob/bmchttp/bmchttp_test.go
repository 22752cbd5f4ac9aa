package bmchttp_test

import (
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/eimhq/eim/oob/bmchttp"
)

func TestClient(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/away" {
			http.Redirect(w, r, "https://127.0.0.2:1/steal", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	if _, err := bmchttp.Client(bmchttp.Options{CABundle: []byte("junk")}); err == nil {
		t.Error("a CA bundle without a certificate: no error")
	}
	trusted, err := bmchttp.Client(bmchttp.Options{CABundle: ca, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer trusted.CloseIdleConnections()
	resp, err := trusted.Get(srv.URL + "/")
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("with the CA: %v, %v", resp, err)
	}
	resp.Body.Close()
	resp, err = trusted.Get(srv.URL + "/away")
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("a redirect: got %v, %v, want the 302 itself (not followed)", resp, err)
	}
	resp.Body.Close()

	roots, _ := bmchttp.Client(bmchttp.Options{Timeout: 5 * time.Second})
	defer roots.CloseIdleConnections()
	_, err = roots.Get(srv.URL + "/")
	if f, detail := bmchttp.Classify(err); f != bmchttp.BadCertificate || detail == "" {
		t.Errorf("untrusted: got %v %q", f, detail)
	}
	insecure, _ := bmchttp.Client(bmchttp.Options{Insecure: true, CABundle: []byte("ignored when insecure"), Timeout: 5 * time.Second})
	defer insecure.CloseIdleConnections()
	if resp, err := insecure.Get(srv.URL + "/"); err != nil {
		t.Errorf("insecure: %v", err)
	} else {
		resp.Body.Close()
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = trusted.Get("https://" + addr + "/")
	if f, _ := bmchttp.Classify(err); f != bmchttp.Refused {
		t.Errorf("closed port: got %v (%v)", f, err)
	}
	if f, _ := bmchttp.Classify(errors.New("x")); f != bmchttp.Other {
		t.Errorf("other: %v", f)
	}
}
