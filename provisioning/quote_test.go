package provisioning_test

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest"
	"github.com/eimhq/eim/attest/attesttest"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/internal/swtpmtest"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/provisioning"
	"github.com/eimhq/eim/secureboot/petest"
)

// node is a node with a TPM (swtpm) that booted the synthetic boot b: its
// PCRs extended with the log's events, as firmware does.
type node struct {
	t    *testing.T
	tpm  *swtpmtest.TPM
	boot attesttest.Boot
}

func bootedNode(t *testing.T, b attesttest.Boot) *node {
	t.Helper()
	return bootedNodeIn(t, b, t.TempDir())
}

// bootedNodeIn is bootedNode on the TPM whose state is in dir (a new one
// when dir is empty; one swtpmtest.Manufacture made).
func bootedNodeIn(t *testing.T, b attesttest.Boot, dir string) *node {
	t.Helper()
	sw := swtpmtest.Start(t, dir)
	l, err := attest.Parse(b.EventLog)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Events {
		if e.Type != attest.EvNoAction {
			sw.Extend(t, e.PCR, e.Digests[attest.AlgSHA256])
		}
	}
	return &node{t: t, tpm: sw, boot: b}
}

// measured is what the agent reads: the TPM's 24 SHA-256 PCRs and the log.
func (n *node) measured() *provisioningv1.MeasuredBoot {
	n.t.Helper()
	mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT, EventLog: n.boot.EventLog}
	idx := make([]int, 24)
	for i := range idx {
		idx[i] = i
	}
	values := n.tpm.PCRs(n.t, idx)
	for _, i := range idx {
		mb.Pcrs = append(mb.Pcrs, &provisioningv1.Pcr{Index: uint32(i), Sha256: values[i]})
	}
	return mb
}

// keys are the node's TPM's EK and AK, as the agent sends them.
func (n *node) keys() *provisioningv1.TpmKeys {
	n.t.Helper()
	k, err := tpmquote.Identify(n.tpm.Conn)
	if err != nil {
		n.t.Fatal(err)
	}
	return &provisioningv1.TpmKeys{EkPublic: k.EKPublic, AkPublic: k.AKPublic}
}

// keysWithCert are keys with the EK's certificate from the TPM's NV, or
// why there is none, as the agent sends them.
func (n *node) keysWithCert() *provisioningv1.TpmKeys {
	n.t.Helper()
	k := n.keys()
	cert, err := tpmquote.ReadEKCert(n.tpm.Conn)
	if err != nil {
		k.EkCertificateError = err.Error()
	} else {
		k.EkCertificate = cert
	}
	return k
}

// unwrap is the nonce of a challenge for the node's TPM.
func (n *node) unwrap(c *provisioningv1.AttestationChallenge) []byte {
	n.t.Helper()
	if c == nil {
		n.t.Fatal("no attestation challenge in the answer")
	}
	nonce, err := tpmquote.Activate(n.tpm.Conn, c.GetCredentialBlob(), c.GetEncryptedSecret())
	if err != nil {
		n.t.Fatal(err)
	}
	return nonce
}

// quoted is mb with the TPM's quote of its PCRs over nonce.
func (n *node) quoted(mb *provisioningv1.MeasuredBoot, nonce []byte) *provisioningv1.MeasuredBoot {
	n.t.Helper()
	var pcrs []int
	for _, p := range mb.GetPcrs() {
		pcrs = append(pcrs, int(p.GetIndex()))
	}
	q, err := tpmquote.Make(n.tpm.Conn, nonce, pcrs)
	if err != nil {
		n.t.Fatal(err)
	}
	out := proto.Clone(mb).(*provisioningv1.MeasuredBoot)
	out.Quote = &provisioningv1.Quote{Nonce: nonce, AkPublic: q.AKPublic, Attest: q.Attest, Signature: q.Signature}
	return out
}

// A node that quotes is given a nonce, its quote is checked (signature,
// nonce used once, quoted digest, the key pinned to its host at the first
// quote), and the status says what failed.
func TestGetWorkflowQuote(t *testing.T) {
	ipxe, kernel := petest.Minimal(1), petest.Minimal(2)
	digest := func(b []byte) []byte {
		a, err := attest.ArtifactOf("x", b)
		if err != nil {
			t.Fatal(err)
		}
		return a.Digest
	}
	boot := attesttest.NewBoot(digest(ipxe), digest(kernel))
	artifacts := func() string {
		dir := t.TempDir()
		for name, b := range map[string][]byte{"ipxe.efi": ipxe, provisioning.KernelName: kernel} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	enabled := provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED
	wait, runD := provisioningv1.GetWorkflowResponse_DISPOSITION_WAIT, provisioningv1.GetWorkflowResponse_DISPOSITION_RUN
	runWith(t, func(o *provisioning.Options) { o.ArtifactsDir = artifacts() }, func(t *testing.T, e *env) {
		osr := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		n := bootedNode(t, boot)
		h := e.host()
		// askAs asks as the agent on node, which quotes (sending its TPM's
		// keys) or not; ask as n.
		askAs := func(by *node, mb *provisioningv1.MeasuredBoot, quotes bool) *provisioningv1.GetWorkflowResponse {
			t.Helper()
			// Nonces are dated by the service's clock: a second apart.
			e.clock.Add(time.Second)
			req := &provisioningv1.GetWorkflowRequest{AgentVersion: "test", SecureBoot: enabled, MeasuredBoot: mb, Quotes: quotes}
			if quotes {
				req.TpmKeys = by.keys()
			}
			resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(req))
			if err != nil {
				t.Fatalf("GetWorkflow: %v", err)
			}
			return resp.Msg
		}
		ask := func(mb *provisioningv1.MeasuredBoot, quotes bool) *provisioningv1.GetWorkflowResponse {
			t.Helper()
			return askAs(n, mb, quotes)
		}
		// next replaces the host's instance by a new one, whose workflow
		// is created (and its boot attested) by the next request.
		var in *eim.Instance
		next := func() {
			if in != nil {
				if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
					if err := tx.Delete(e.ctx, eim.KindWorkflow, "workflow-"+strings.TrimPrefix(in.ResourceID, "inst-")); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
						return err
					}
					return tx.Delete(e.ctx, eim.KindInstance, in.ResourceID)
				}); err != nil {
					t.Fatal(err)
				}
			}
			in = e.instance(h, osr, func(in *eim.Instance) {
				in.SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"
			})
		}
		status := func(step, want string) {
			t.Helper()
			got := e.getInstance(in.ResourceID)
			if !strings.HasPrefix(got.TrustedAttestationStatus, want) {
				t.Fatalf("%s: attestation %q, want %q…", step, got.TrustedAttestationStatus, want)
			}
			ind := eim.StatusError
			if strings.HasPrefix(want, "Verified") {
				ind = eim.StatusIdle
			}
			if got.TrustedAttestationStatusIndicator != ind {
				t.Fatalf("%s: indicator %s, want %s", step, got.TrustedAttestationStatusIndicator, ind)
			}
		}

		// The first request of a boot has no nonce to quote over: the
		// server gives one, and asks again before creating the workflow.
		next()
		mb := n.measured()
		r := ask(mb, true)
		if r.Disposition != wait || r.MeasuredBootLater || r.AttestationChallenge == nil || r.PollAfterSeconds != 1 {
			t.Fatalf("first request: got %v, later %v, challenge %v, poll %d; want WAIT asking for a quote over a nonce", r.Disposition, r.MeasuredBootLater, r.AttestationChallenge, r.PollAfterSeconds)
		}
		if nonce := n.unwrap(r.AttestationChallenge); len(nonce) != 32 {
			t.Fatalf("the challenge's nonce: %d bytes, want 32", len(nonce))
		}
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; s != "" {
			t.Fatalf("before the quote: attestation %q, want none", s)
		}
		first := n.quoted(mb, n.unwrap(r.AttestationChallenge))
		if r = ask(first, true); r.Disposition != runD || r.AttestationChallenge != nil || !r.MeasuredBootLater {
			t.Fatalf("quoted: got %v (%s), challenge %v, later %v; want RUN, measured boot later, no challenge (none is needed)", r.Disposition, r.Message, r.AttestationChallenge, r.MeasuredBootLater)
		}
		status("quoted", "Verified")
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; s != provisioning.AttestationVerified {
			t.Fatalf("quoted: attestation %q, want exactly Verified", s)
		}
		ak, err := e.store.AttestationKey(e.ctx, e.proj, h.ResourceID)
		if err != nil {
			t.Fatalf("the key pinned: %v", err)
		}
		name, _ := tpmquote.NameOf(first.Quote.AkPublic)
		ekName, _ := tpmquote.NameOf(n.keys().EkPublic)
		if ak.Name != name || ak.EKName != ekName {
			t.Fatalf("pinned %s of EK %s, want the quote's key %s of EK %s", ak.Name, ak.EKName, name, ekName)
		}

		// The same quote again (its nonce used): a replay.
		next()
		ask(first, true)
		status("replayed", "Mismatch: quote: the nonce of this quote was used already")

		// A nonce that is not the server's (or too old): asked again with
		// a fresh one, nothing written.
		next()
		r = ask(n.quoted(mb, bytes.Repeat([]byte{7}, 32)), true)
		if r.Disposition != wait || r.AttestationChallenge == nil {
			t.Fatalf("a nonce not ours: got %v; want WAIT with a challenge", r.Disposition)
		}
		stale := n.unwrap(r.AttestationChallenge)
		e.clock.Add(6 * time.Minute)
		if r = ask(n.quoted(mb, stale), true); r.Disposition != wait {
			t.Fatalf("a nonce 6 minutes old: got %v; want WAIT", r.Disposition)
		}
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; s != "" {
			t.Fatalf("stale nonces: attestation %q, want none yet", s)
		}
		// A fresh nonce, the boot quoted again by the same TPM: verified.
		ask(n.quoted(mb, n.unwrap(r.AttestationChallenge)), true)
		status("the same TPM again", "Verified")

		// A forged PCR value: the quote's digest says otherwise.
		next()
		r = ask(mb, true) // no quote yet: WAIT, a nonce
		forged := n.quoted(mb, n.unwrap(r.AttestationChallenge))
		forged.Pcrs[4].Sha256 = bytes.Repeat([]byte{4}, 32)
		ask(forged, true)
		status("forged PCR", "Mismatch: quote: the TPM quoted PCR digest")

		// A signature that does not verify.
		next()
		r = ask(mb, true) // no quote yet: WAIT, a nonce
		bad := n.quoted(mb, n.unwrap(r.AttestationChallenge))
		bad.Quote.Signature[len(bad.Quote.Signature)-1] ^= 1
		ask(bad, true)
		status("bad signature", "Mismatch: quote: the signature by attestation key "+name+": does not verify")

		// Another TPM (the same boot measured), its own keys sent: its
		// key is not the one pinned.
		next()
		other := bootedNode(t, boot)
		omb := other.measured()
		r = askAs(other, omb, true)
		askAs(other, other.quoted(omb, other.unwrap(r.AttestationChallenge)), true)
		status("another TPM", "Mismatch: quote: attestation key ")
		if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; !strings.Contains(s, "is not the one pinned to host "+h.ResourceID+" at its first attestation ("+name) {
			t.Fatalf("another TPM: %q does not name the pinned key", s)
		}

		// Another TPM's quote sent with this TPM's keys: not by the AK the
		// nonce was wrapped for.
		next()
		r = askAs(other, omb, true)
		ask(other.quoted(omb, other.unwrap(r.AttestationChallenge)), true)
		status("another TPM's quote, this TPM's keys", "Mismatch: quote: signed by another attestation key than the one the nonce was wrapped for")

		// Keys that are not an EK and an AK: no challenge, a mismatch.
		next()
		keys := n.keys()
		e.clock.Add(time.Second)
		resp, err := e.svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{
			AgentVersion: "test", SecureBoot: enabled, MeasuredBoot: mb, Quotes: true, TpmKeys: &provisioningv1.TpmKeys{EkPublic: keys.AkPublic, AkPublic: keys.AkPublic}}))
		if err != nil || resp.Msg.AttestationChallenge != nil {
			t.Fatalf("bad TPM keys: got %v, %v; want an answer without a challenge", resp, err)
		}
		status("bad TPM keys", "Mismatch: quote: the node's TPM keys: the endorsement key is not a restricted decryption key")

		// The TPM failed to quote (over the nonce of an answer).
		next()
		ask(mb, true)
		failed := proto.Clone(mb).(*provisioningv1.MeasuredBoot)
		failed.Quote = &provisioningv1.Quote{Error: "TPM_RC_FAILURE"}
		ask(failed, true)
		status("no quote", "Not verified: quote: the node's TPM gave no quote: TPM_RC_FAILURE")

		// A key is pinned: a report without a quote (an agent that says
		// it does not quote, no TPM) is not believed.
		for _, tc := range []struct {
			name string
			mb   *provisioningv1.MeasuredBoot
			why  string
		}{
			{"unquoted", mb, "this boot's measurements came without a quote"},
			{"no TPM", &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}, "the node reported no TPM"},
		} {
			next()
			ask(tc.mb, false)
			status(tc.name, "Mismatch: quote: host "+h.ResourceID+" has attestation key "+name+" pinned since ")
			if s := e.getInstance(in.ResourceID).TrustedAttestationStatus; !strings.Contains(s, tc.why) {
				t.Fatalf("%s: %q does not say %q", tc.name, s, tc.why)
			}
		}

		// Another host, no key pinned, an agent older than quotes: the
		// log is checked as before, and the status says it was not
		// quoted; no nonce is given.
		h = e.host()
		in = nil
		next()
		if r = ask(mb, false); r.Disposition != runD || r.AttestationChallenge != nil {
			t.Fatalf("older agent: got %v, challenge %v; want RUN, no challenge", r.Disposition, r.AttestationChallenge)
		}
		status("older agent", provisioning.AttestationUnquoted)
	})
}

// With the TPM makers' CAs configured, a quote pins (or is held to) its
// keys only when the EK's certificate chains to one of them and is the
// EK's: TPMs manufactured by swtpm_setup with a local CA (valid), with
// another CA, without a certificate, and one sending another TPM's
// certificate. A key pinned on first use before the CAs were configured
// is held to them from then on.
func TestGetWorkflowEKCert(t *testing.T) {
	ipxe, kernel := petest.Minimal(1), petest.Minimal(2)
	digest := func(b []byte) []byte {
		a, err := attest.ArtifactOf("x", b)
		if err != nil {
			t.Fatal(err)
		}
		return a.Digest
	}
	boot := attesttest.NewBoot(digest(ipxe), digest(kernel))
	artifacts := t.TempDir()
	for name, b := range map[string][]byte{"ipxe.efi": ipxe, provisioning.KernelName: kernel} {
		if err := os.WriteFile(filepath.Join(artifacts, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	maker, other := swtpmtest.NewCA(t), swtpmtest.NewCA(t)
	good, foreign, bare := t.TempDir(), t.TempDir(), t.TempDir()
	swtpmtest.Manufacture(t, good, maker)
	swtpmtest.Manufacture(t, foreign, other)
	swtpmtest.ManufactureSwtpm(t, bare, maker) // swtpm's RSA and P-384 EKs' certificates, no P-256 one
	caFile := filepath.Join(t.TempDir(), "makers.pem")
	if err := os.WriteFile(caFile, maker.BundlePEM(t), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := tpmquote.LoadEKRoots([]string{caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enabled := provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED
	runWith(t, func(o *provisioning.Options) { o.ArtifactsDir = artifacts }, func(t *testing.T, e *env) {
		// The certificates are dated by the real clock.
		e.clock.Add(time.Since(e.clock.Now()))
		tofu := e.svc
		withCAs := func() *provisioning.Service {
			o := e.opts
			o.EKRoots = roots
			return provisioning.New(o)
		}()
		osr := e.os("https://images.example/ubuntu.raw.gz", goodSha)
		// attestAs runs the quote protocol of node n, sending keys, for a
		// new instance of host h through svc, and returns its status.
		last := map[string]*eim.Instance{} // by host
		attestAs := func(svc *provisioning.Service, h *eim.Host, n *node, keys *provisioningv1.TpmKeys) string {
			t.Helper()
			if in := last[h.ResourceID]; in != nil {
				if err := e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
					if err := tx.Delete(e.ctx, eim.KindWorkflow, "workflow-"+strings.TrimPrefix(in.ResourceID, "inst-")); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
						return err
					}
					return tx.Delete(e.ctx, eim.KindInstance, in.ResourceID)
				}); err != nil {
					t.Fatal(err)
				}
			}
			in := e.instance(h, osr, func(in *eim.Instance) {
				in.SecurityFeature = "SECURITY_FEATURE_SECURE_BOOT_AND_FULL_DISK_ENCRYPTION"
			})
			ask := func(mb *provisioningv1.MeasuredBoot) *provisioningv1.GetWorkflowResponse {
				t.Helper()
				e.clock.Add(time.Second)
				resp, err := svc.GetWorkflow(asNode(e.ctx, e.proj, h.ResourceID), connect.NewRequest(&provisioningv1.GetWorkflowRequest{
					AgentVersion: "test", SecureBoot: enabled, MeasuredBoot: mb, Quotes: true, TpmKeys: keys}))
				if err != nil {
					t.Fatalf("GetWorkflow: %v", err)
				}
				return resp.Msg
			}
			last[h.ResourceID] = in
			mb := n.measured()
			r := ask(mb)
			ask(n.quoted(mb, n.unwrap(r.AttestationChallenge)))
			return e.getInstance(in.ResourceID).TrustedAttestationStatus
		}
		notPinned := func(step string, h *eim.Host) {
			t.Helper()
			if k, err := e.store.AttestationKey(e.ctx, e.proj, h.ResourceID); eim.ErrorCode(err) != eim.ENOTFOUND {
				t.Fatalf("%s: pinned %+v, %v; want nothing pinned", step, k, err)
			}
		}
		g := bootedNodeIn(t, boot, good)
		gk := g.keysWithCert()
		cert, err := x509.ParseCertificate(gk.EkCertificate)
		if err != nil {
			t.Fatalf("the manufactured TPM's EK certificate: %v (%s)", err, gk.EkCertificateError)
		}

		// A certificate of the configured CA for the EK: verified, pinned
		// with it.
		h := e.host()
		if s := attestAs(withCAs, h, g, gk); s != provisioning.AttestationVerified {
			t.Fatalf("valid certificate: attestation %q, want Verified", s)
		}
		k, err := e.store.AttestationKey(e.ctx, e.proj, h.ResourceID)
		if err != nil || k.EKCertIssuer != cert.Issuer.String() || k.EKCertSerial != cert.SerialNumber.Text(16) {
			t.Fatalf("valid certificate: pinned %+v, %v; want the certificate's issuer %q and serial %x", k, err, cert.Issuer, cert.SerialNumber)
		}

		f, b := bootedNodeIn(t, boot, foreign), bootedNodeIn(t, boot, bare)
		stolen := f.keysWithCert()
		stolen.EkCertificate = gk.EkCertificate
		for _, tc := range []struct {
			name string
			n    *node
			keys *provisioningv1.TpmKeys
			want string
		}{
			{"another CA", f, f.keysWithCert(), "Mismatch: quote: endorsement key certificate does not chain to a configured TPM maker CA"},
			{"no certificate", b, b.keysWithCert(), "Mismatch: quote: endorsement key certificate missing: the node sent none (tpmquote: the TPM has no EK certificate of its ECC P-256 endorsement key"},
			{"an older agent", g, g.keys(), "Mismatch: quote: endorsement key certificate missing: the node sent none (an agent older than EK certificates, or a TPM without one)"},
			{"another TPM's certificate", f, stolen, "Mismatch: quote: endorsement key certificate is for another key"},
		} {
			h := e.host()
			if s := attestAs(withCAs, h, tc.n, tc.keys); !strings.HasPrefix(s, tc.want) {
				t.Fatalf("%s: attestation %q, want %q…", tc.name, s, tc.want)
			}
			notPinned(tc.name, h)
		}

		// Pinned on first use, without CAs; then the CAs configured: a
		// quote without the certificate is refused, one with it verifies
		// and records it.
		h = e.host()
		if s := attestAs(tofu, h, b, b.keysWithCert()); s != provisioning.AttestationVerified {
			t.Fatalf("trust on first use: attestation %q, want Verified", s)
		}
		if k, err := e.store.AttestationKey(e.ctx, e.proj, h.ResourceID); err != nil || k.EKCertSerial != "" {
			t.Fatalf("trust on first use: pinned %+v, %v; want a key without a certificate", k, err)
		}
		if s := attestAs(withCAs, h, b, b.keysWithCert()); !strings.HasPrefix(s, "Mismatch: quote: endorsement key certificate missing") {
			t.Fatalf("pinned on first use, CAs configured since, no certificate: attestation %q", s)
		}
		h2 := e.host()
		if s := attestAs(tofu, h2, g, g.keys()); s != provisioning.AttestationVerified {
			t.Fatalf("trust on first use: attestation %q, want Verified", s)
		}
		if s := attestAs(withCAs, h2, g, gk); s != provisioning.AttestationVerified {
			t.Fatalf("pinned on first use, then a valid certificate: attestation %q, want Verified", s)
		}
		if k, err := e.store.AttestationKey(e.ctx, e.proj, h2.ResourceID); err != nil || k.EKCertSerial != cert.SerialNumber.Text(16) {
			t.Fatalf("pinned on first use, then a valid certificate: pinned %+v, %v; want the certificate recorded", k, err)
		}
	})
}
