package storetest

import (
	"bytes"
	"sync"
	"testing"

	"github.com/eimhq/eim"
)

// testAttestationKeys checks eim.AttestationKeyStore: a host's first key
// is pinned, another key later is answered with the pinned one and changes
// nothing, each nonce is used once (also by two quotes at once), the EK
// certificate checked is recorded, a reset removes the key (audited) and
// the next is pinned, per project, gone with the host.
func testAttestationKeys(t *testing.T, s eim.Store) {
	p1, p2 := project(t, s), project(t, s)
	h := create(t, s, p1, &eim.Host{Name: "h"}).(*eim.Host).ResourceID
	c := ctx(t)
	ak := func(name string, nonceAt int64) *eim.AttestationKey {
		return &eim.AttestationKey{Project: p1, HostID: h, Public: []byte("public of " + name), Name: name, EKName: "000bee", NonceAt: nonceAt}
	}

	_, err := s.UseAttestationKey(c, &eim.AttestationKey{Project: p1, HostID: h})
	wantCode(t, err, eim.EINVALID)
	_, err = s.UseAttestationKey(c, &eim.AttestationKey{Project: p2, HostID: h, Public: []byte("x"), Name: "x", NonceAt: 1})
	wantCode(t, err, eim.ENOTFOUND)
	_, err = s.AttestationKey(c, p1, h)
	wantCode(t, err, eim.ENOTFOUND)

	got, err := s.UseAttestationKey(c, ak("000b01", 100))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "000b01" || got.PinnedAt.IsZero() || got.NonceAt != 100 {
		t.Fatalf("first use: got %+v, want 000b01 pinned, nonce at 100", got)
	}
	recs, _ := audit(t, s, p1, eim.AuditQuery{Filter: `kind = "attestationkey"`, Limit: 10})
	if len(recs) != 1 || recs[0].ResourceID != h || recs[0].Action != string(eim.OpCreated) || string(recs[0].Changes["name"].New) != `"000b01"` {
		t.Fatalf("audit records of the pin: got %+v, want one CREATED of %s naming 000b01", recs, h)
	}
	read, err := s.AttestationKey(c, p1, h)
	if err != nil {
		t.Fatal(err)
	}
	if read.Name != "000b01" || read.EKName != "000bee" || !bytes.Equal(read.Public, []byte("public of 000b01")) || read.NonceAt != 100 || read.PinnedAt.IsZero() {
		t.Fatalf("read: got %+v", read)
	}
	_, err = s.AttestationKey(c, p2, h)
	wantCode(t, err, eim.ENOTFOUND)

	// The same nonce again, and an older one: refused.
	for _, at := range []int64{100, 99} {
		_, err = s.UseAttestationKey(c, ak("000b01", at))
		wantCode(t, err, eim.ECONFLICT)
	}
	// A later nonce: accepted.
	if got, err = s.UseAttestationKey(c, ak("000b01", 200)); err != nil || got.NonceAt != 200 {
		t.Fatalf("later nonce: got %+v, %v", got, err)
	}
	// Another key: the pinned one comes back, nothing changes.
	got, err = s.UseAttestationKey(c, ak("000b02", 300))
	if err != nil || got.Name != "000b01" || got.NonceAt != 200 {
		t.Fatalf("another key: got %+v, %v; want the pinned 000b01 at 200", got, err)
	}

	// The same AK name with another EK: the pinned key, nothing changes.
	otherEK := ak("000b01", 300)
	otherEK.EKName = "000bef"
	got, err = s.UseAttestationKey(c, otherEK)
	if err != nil || got.EKName != "000bee" || got.NonceAt != 200 {
		t.Fatalf("another EK: got %+v, %v; want the pinned EK 000bee at 200", got, err)
	}

	// Two quotes over one nonce at once: one is accepted.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.UseAttestationKey(c, ak("000b01", 400))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case eim.ErrorCode(err) != eim.ECONFLICT:
			t.Fatalf("concurrent use: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("concurrent uses of one nonce: %d accepted, want 1", ok)
	}

	// Two first pins of another host at once: one key is pinned, both see it.
	h2 := create(t, s, p1, &eim.Host{Name: "h2"}).(*eim.Host).ResourceID
	names := make([]string, 2)
	errs = make([]error, 2)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := &eim.AttestationKey{Project: p1, HostID: h2, Public: []byte{byte(i)}, Name: []string{"000b0a", "000b0b"}[i], NonceAt: 1}
			got, err := s.UseAttestationKey(c, k)
			if err != nil {
				errs[i] = err
				return
			}
			names[i] = got.Name
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || names[0] != names[1] {
		t.Fatalf("two first pins: got %q, %v %v; want one key for both", names, errs[0], errs[1])
	}

	// A quote whose EK's certificate was checked records it on a key
	// pinned on first use; one without keeps it.
	withCert := ak("000b01", 500)
	withCert.EKCertIssuer, withCert.EKCertSerial = "CN=Maker CA", "2a"
	if got, err = s.UseAttestationKey(c, withCert); err != nil || got.EKCertIssuer != "CN=Maker CA" || got.EKCertSerial != "2a" {
		t.Fatalf("a quote with a checked EK certificate: got %+v, %v", got, err)
	}
	if _, err = s.UseAttestationKey(c, ak("000b01", 600)); err != nil {
		t.Fatal(err)
	}
	if read, err = s.AttestationKey(c, p1, h); err != nil || read.EKCertIssuer != "CN=Maker CA" || read.EKCertSerial != "2a" || read.NonceAt != 600 {
		t.Fatalf("after a quote without a checked certificate: got %+v, %v; want the certificate kept", read, err)
	}

	// Reset (a replaced TPM), by an administrator: audited, and the next
	// key is pinned.
	alice := eim.WithActor(c, eim.UserActor("alice"))
	_, err = s.ResetAttestationKey(alice, p2, h)
	wantCode(t, err, eim.ENOTFOUND)
	reset, err := s.ResetAttestationKey(alice, p1, h)
	if err != nil || reset.Name != "000b01" || reset.EKName != "000bee" {
		t.Fatalf("reset: got %+v, %v; want the pinned 000b01", reset, err)
	}
	_, err = s.AttestationKey(c, p1, h)
	wantCode(t, err, eim.ENOTFOUND)
	_, err = s.ResetAttestationKey(alice, p1, h)
	wantCode(t, err, eim.ENOTFOUND)
	recs, _ = audit(t, s, p1, eim.AuditQuery{Filter: `kind = "attestationkey" AND action = "DELETED"`, Limit: 10})
	if len(recs) != 1 || recs[0].ResourceID != h || recs[0].Principal != "user:alice" || string(recs[0].Changes["name"].Old) != `"000b01"` || string(recs[0].Changes["ekName"].Old) != `"000bee"` {
		t.Fatalf("audit record of the reset: got %+v, want one DELETED of %s by user:alice naming 000b01 and 000bee", recs, h)
	}
	newKey := ak("000b02", 700)
	newKey.EKName = "000bef"
	if got, err = s.UseAttestationKey(c, newKey); err != nil || got.Name != "000b02" || got.EKName != "000bef" || got.EKCertSerial != "" {
		t.Fatalf("after the reset: got %+v, %v; want the new key pinned, no certificate", got, err)
	}

	// The key goes with its host.
	update(t, s, p1, func(tx eim.Tx) error { return tx.Delete(ctx(t), eim.KindHost, h) })
	_, err = s.AttestationKey(c, p1, h)
	wantCode(t, err, eim.ENOTFOUND)
}
