package eim_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/eimhq/eim"
)

// testCA is a self-signed certificate in PEM.
func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestBMCValidate(t *testing.T) {
	ca := testCA(t)
	ok := func(p eim.BMCProtocol, addr string) eim.BMC {
		return eim.BMC{Protocol: p, Address: addr, Username: "admin"}
	}
	with := func(b eim.BMC, f func(*eim.BMC)) eim.BMC { f(&b); return b }
	for _, c := range []struct {
		name string
		b    eim.BMC
		want string // "" valid, else a part of the error
	}{
		{"redfish url", ok(eim.BMCRedfish, "https://bmc.example:8443"), ""},
		{"redfish url slash", ok(eim.BMCRedfish, "https://10.0.0.1/"), ""},
		{"redfish host", ok(eim.BMCRedfish, "10.0.0.1"), ""},
		{"ipv6 port", ok(eim.BMCIPMI, "[fd00::1]:623"), ""},
		{"ipv6 bare", ok(eim.BMCIPMI, "fd00::1"), ""},
		{"ipmi host port", ok(eim.BMCIPMI, "bmc-1.lab:623"), ""},
		{"amt url", ok(eim.BMCAMT, "http://10.0.0.9:16992"), ""},
		{"system id", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.SystemID = "System.Embedded.1" }), ""},
		{"ca", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert = ca + ca }), ""},
		{"insecure", with(ok(eim.BMCAMT, "h"), func(b *eim.BMC) { b.Insecure = true }), ""},

		{"protocol", ok("SNMP", "h"), `protocol: "SNMP" is not one of REDFISH, IPMI, AMT`},
		{"protocol empty", ok("", "h"), "protocol:"},
		{"no address", ok(eim.BMCIPMI, ""), "address: required"},
		{"ipmi url", ok(eim.BMCIPMI, "https://h"), "address:"},
		{"ftp", ok(eim.BMCRedfish, "ftp://h"), "address:"},
		{"path", ok(eim.BMCRedfish, "https://h/redfish/v1"), "address:"},
		{"userinfo", ok(eim.BMCRedfish, "https://u:p@h"), "address:"},
		{"port 0", ok(eim.BMCIPMI, "h:0"), "address:"},
		{"port big", ok(eim.BMCRedfish, "https://h:70000"), "address:"},
		{"empty port", ok(eim.BMCIPMI, "h:"), "address:"},
		{"bad host", ok(eim.BMCIPMI, "-h"), "address:"},
		{"spaces", ok(eim.BMCIPMI, "a b"), "address:"},
		{"system id ipmi", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.SystemID = "1" }), "systemId:"},
		{"system id chars", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.SystemID = "a/b" }), "systemId:"},
		{"no username", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.Username = "" }), "username: required"},
		{"username option", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.Username = "-U" }), "username:"},
		{"username long", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.Username = strings.Repeat("u", 65) }), "username:"},
		{"ipmi tls", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.CACert = ca }), "caCert: IPMI does not use TLS"},
		{"ipmi insecure", with(ok(eim.BMCIPMI, "h"), func(b *eim.BMC) { b.Insecure = true }), "insecure: IPMI"},
		{"ca and insecure", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert, b.Insecure = ca, true }), "insecure:"},
		{"ca not pem", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert = "hello" }), "caCert: not a PEM bundle"},
		{"ca key", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }), "caCert:"},
		{"ca garbage der", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n" }), "caCert: certificate 1"},
		{"ca trailing", with(ok(eim.BMCRedfish, "h"), func(b *eim.BMC) { b.CACert = ca + "junk" }), "caCert:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.b.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("got %v, want valid", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || eim.ErrorCode(err) != eim.EINVALID):
				t.Fatalf("got %v, want EINVALID with %q", err, c.want)
			}
		})
	}
}

func TestCheckBMCPassword(t *testing.T) {
	for _, c := range []struct {
		p    eim.BMCProtocol
		pw   string
		want string
	}{
		{eim.BMCRedfish, "s3cret", ""},
		{eim.BMCRedfish, "", "password: required"},
		{eim.BMCIPMI, strings.Repeat("x", 21), "password: IPMI"},
		{eim.BMCRedfish, strings.Repeat("x", 257), "password: at most"},
		{eim.BMCAMT, "a\nb", "password: control"},
	} {
		err := eim.CheckBMCPassword(c.p, c.pw)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckBMCPassword(%s, %q) = %v, want %q", c.p, c.pw, err, c.want)
		}
	}
}
