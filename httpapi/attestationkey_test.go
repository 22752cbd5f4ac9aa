package httpapi_test

import (
	"context"
	"testing"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/httpapi"
	"github.com/eimhq/eim/provisioning"
)

// lateAttestationKeys is set once the env's store exists.
type lateAttestationKeys struct{ svc *provisioning.Service }

func (l *lateAttestationKeys) AttestationKey(ctx context.Context, project, id string) (*eim.AttestationKey, error) {
	return l.svc.AttestationKey(ctx, project, id)
}

func (l *lateAttestationKeys) ResetAttestationKey(ctx context.Context, project, id string) (*eim.AttestationKey, error) {
	return l.svc.ResetAttestationKey(ctx, project, id)
}

func (l *lateAttestationKeys) EKCertificatesChecked() bool { return l.svc.EKCertificatesChecked() }

// A host's pinned TPM keys are shown to the project's readers, with what
// the EK was believed on; only an administrator resets them, and the reset
// is in the audit log, by the administrator.
func TestAttestationKey(t *testing.T) {
	late := &lateAttestationKeys{}
	e, _, _ := provEnvOpts(t, "", httpapi.Options{AttestationKeys: late})
	st := e.inv.Store()
	late.svc = provisioning.New(provisioning.Options{Store: st})
	ctx := context.Background()
	h, err := e.inv.Create(ctx, "p1", &eim.Host{Name: "tpm-host", UUID: "4c4c4544-0000-4000-8000-0000000000a7"})
	if err != nil {
		t.Fatal(err)
	}
	host := h.Base().ResourceID
	path := "~/compute/hosts/" + host + "/attestationkey"

	wantError(t, e.do(t, "GET", path, tokRO, nil), 404, "NotFound", "no attestation key pinned")
	wantError(t, e.do(t, "GET", "~/compute/hosts/inst-12345678/attestationkey", tokRO, nil), 400, "InvalidArgument")
	node := eim.WithActor(ctx, eim.NodeActor(host))
	if _, err := st.UseAttestationKey(node, &eim.AttestationKey{Project: "p1", HostID: host, Public: []byte{1}, Name: "000b01", EKName: "000bee", NonceAt: 1}); err != nil {
		t.Fatal(err)
	}

	// Pinned on first use, no CA configured: the note says so.
	r := e.must(t, 200, "GET", path, tokRO, nil)
	if r.str("akName") != "000b01" || r.str("ekName") != "000bee" || r.str("hostId") != host || r.str("trust") != "FIRST_USE" || r.str("pinnedAt") == "" {
		t.Fatalf("got %s", r.raw)
	}
	if n := r.str("trustNote"); n != "trusted on first use: no TPM maker CA is configured (eim server --tpm-ek-ca-file), so the keys of the host's first quote were pinned as they came" {
		t.Fatalf("trust note %q", n)
	}
	if _, ok := r.obj["ekCertificate"]; ok {
		t.Fatalf("an EK certificate shown for a key trusted on first use: %s", r.raw)
	}
	// Another project's reader sees nothing.
	wantError(t, e.do(t, "GET", path, tokRW2, nil), 403, "PermissionDenied")

	// With CAs configured, the same pin says it awaits the certificate;
	// once a quote brought one, it is shown.
	late.svc = provisioning.New(provisioning.Options{Store: st, EKRoots: &tpmquote.EKRoots{}})
	r = e.must(t, 200, "GET", path, tokRO, nil)
	if r.str("trust") != "FIRST_USE" || r.str("trustNote") != "trusted on first use: pinned before this deployment checked EK certificates; the host's next quote must bring one that chains to a configured TPM maker CA" {
		t.Fatalf("pinned before the CAs: got %s", r.raw)
	}
	if _, err := st.UseAttestationKey(node, &eim.AttestationKey{Project: "p1", HostID: host, Public: []byte{1}, Name: "000b01", EKName: "000bee", NonceAt: 2,
		EKCertIssuer: "CN=Maker EK CA", EKCertSerial: "2a"}); err != nil {
		t.Fatal(err)
	}
	r = e.must(t, 200, "GET", path, tokRO, nil)
	cert, _ := r.obj["ekCertificate"].(map[string]any)
	if r.str("trust") != "EK_CERTIFICATE" || cert["issuer"] != "CN=Maker EK CA" || cert["serial"] != "2a" {
		t.Fatalf("checked: got %s", r.raw)
	}

	// The reset: administrators only.
	for _, tok := range []string{tokRO, tokRW} {
		wantError(t, e.do(t, "DELETE", path, tok, nil), 403, "PermissionDenied")
	}
	e.must(t, 200, "GET", path, tokRO, nil) // still pinned
	e.must(t, 200, "DELETE", path, tokAdmin, nil)
	wantError(t, e.do(t, "GET", path, tokRO, nil), 404, "NotFound")
	wantError(t, e.do(t, "DELETE", path, tokAdmin, nil), 404, "NotFound")
	a := e.must(t, 200, "GET", `~/audit?filter=kind%3D%22attestationkey%22%20AND%20action%3D%22DELETED%22`, tokAdmin, nil)
	recs := a.items("auditRecords")
	if len(recs) != 1 {
		t.Fatalf("audit: got %s, want one reset", a.raw)
	}
	if rec := recs[0].(map[string]any); rec["principal"] != "user:admin" || rec["resourceId"] != host {
		t.Errorf("audit record %v, want DELETED of %s by user:admin", rec, host)
	}
}

func TestAttestationKeyWithoutProvisioning(t *testing.T) {
	e, _, _ := provEnv(t, "")
	wantError(t, e.do(t, "GET", "~/compute/hosts/host-12345678/attestationkey", tokRO, nil), 503, "Unavailable")
	// Non-administrators are refused the reset before that.
	wantError(t, e.do(t, "DELETE", "~/compute/hosts/host-12345678/attestationkey", tokRW, nil), 403, "PermissionDenied")
}
