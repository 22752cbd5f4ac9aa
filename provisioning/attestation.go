package provisioning

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/attest"
	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/inventory"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/southbound"
)

// The instance's trustedAttestationStatus texts (the original's field;
// "Verified" is its text for a boot that checks out).
const (
	AttestationVerified = "Verified"
	// AttestationMismatch precedes what did not verify ("PCR 4: …").
	AttestationMismatch = "Mismatch: "
	// AttestationNoTPM is a node without a TPM 2.0.
	AttestationNoTPM = "No TPM: the node has no TPM 2.0; its boot was not measured"
	// AttestationNotMeasured precedes why a node with a TPM sent no
	// measurements, or why they could not be read.
	AttestationNotMeasured = "Not measured: "
	// AttestationNotVerified precedes why measurements that were sent
	// could not be checked (an event log that does not parse).
	AttestationNotVerified = "Not verified: "
)

// AttestationUnquoted is the text of a measured boot that verifies but
// came without a TPM quote (an agent older than quotes): the values are
// the node's word, not its TPM's.
const AttestationUnquoted = "Verified, not quoted: the event log replays to the PCR values the node read, but no TPM quote signed them (an agent older than quotes)"

// verdict is the attestation result of a node's report: its text, and
// whether it is a failure whatever the instance asks (a mismatch, a log
// that cannot be read) or only when the instance requires a measured boot
// (no TPM).
type verdict struct {
	text     string
	verified bool
	failed   bool
	// compared says what a verified boot's check compared beyond the
	// replay, for the workflow's log ("" nothing more).
	compared string
}

// mismatch is the verdict of a check that failed: "Mismatch: " and why.
func mismatch(why string) verdict {
	return verdict{text: AttestationMismatch + why, failed: true}
}

// attestation checks the measured boot a node sent with GetWorkflow: its
// TPM quote (the signature of the attestation key, the nonce, the quoted
// PCR digest, the key pinned to the host), then the event log against the
// PCR values and the EFI binaries the server serves. ok is false when the
// node sent none (an agent older than the field): nothing is written then.
// reask is true when the node quotes but its report has no quote over a
// good nonce of ours (its first request of a boot, or a nonce too old):
// the server gives it one and asks again before creating the workflow. An
// error is the store's, for the caller to return.
func (s *Service) attestation(ctx context.Context, n southbound.Node, req *provisioningv1.GetWorkflowRequest) (v verdict, ok, reask bool, err error) {
	mb := req.GetMeasuredBoot()
	q := mb.GetQuote()
	switch {
	case mb == nil || mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_UNSPECIFIED:
		return verdict{}, false, false, nil
	case mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_ABSENT:
		v, err := s.unquoted(ctx, n, "the node reported no TPM", verdict{text: AttestationNoTPM})
		return v, true, false, err
	case mb.GetError() != "":
		v, err := s.unquoted(ctx, n, "the node could not read its measurements", verdict{text: AttestationNotMeasured + mb.GetError()})
		return v, true, false, err
	case q.GetError() != "":
		return verdict{text: AttestationNotVerified + "quote: the node's TPM gave no quote: " + q.GetError(), failed: true}, true, false, nil
	case req.GetQuotes() && req.GetTpmKeys() == nil:
		return verdict{text: AttestationNotVerified + "quote: the node quotes but sent no TPM keys to wrap a nonce for", failed: true}, true, false, nil
	case req.GetQuotes():
		if err := tpmquote.CheckKeys(tpmKeys(req)); err != nil {
			return mismatch("quote: the node's TPM keys: " + err.Error()), true, false, nil
		}
		if q == nil {
			return verdict{text: AttestationNotVerified + "quote: the node sent its measurements without a quote"}, true, true, nil
		}
	}
	rep := attest.Report{PCRs: map[int][]byte{}, EventLog: mb.GetEventLog(),
		SecureBoot: req.GetSecureBoot() == provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED}
	for _, p := range mb.GetPcrs() {
		rep.PCRs[int(p.GetIndex())] = p.GetSha256()
	}
	quoted := false
	if q != nil && !req.GetQuotes() {
		return mismatch("quote: a quote from an agent that does not say it quotes, with no TPM keys its nonce was wrapped for"), true, false, nil
	}
	if q != nil {
		keys := tpmKeys(req)
		if !bytes.Equal(q.GetAkPublic(), keys.AKPublic) {
			return mismatch("quote: signed by another attestation key than the one the nonce was wrapped for"), true, false, nil
		}
		at, err := s.nonces.check(n.Project, n.HostID, keysName(keys), q.GetNonce())
		if err != nil {
			return verdict{text: AttestationNotVerified + "quote: " + err.Error(), failed: true}, true, true, nil
		}
		if v, done, err := s.checkQuote(ctx, n, q, req.GetTpmKeys(), at, rep.PCRs); done || err != nil {
			return v, true, false, err
		}
		quoted = true
	}
	served, err := s.served.list()
	if err != nil {
		// The boot cannot be checked now; a mismatch would blame the
		// node for the server's disk.
		s.log.Error("provisioning: read the boot artifacts to attest a boot", "err", err)
		return verdict{text: AttestationNotVerified + "the server could not read the binaries it serves to compare: " + err.Error(), failed: true}, true, false, nil
	}
	var m *attest.Mismatch
	checked, err := attest.Check(rep, served)
	compared := "PCR 4 holds only binaries EIM serves"
	if checked.KernelImage != "" {
		compared += "; PCR 11 is what the sections of the unified kernel image " + checked.KernelImage + " measure"
	}
	switch {
	case err == nil && quoted:
		return verdict{text: AttestationVerified, verified: true, compared: compared}, true, false, nil
	case err == nil:
		// Unquoted: acceptable only while the host has no key pinned.
		v, err := s.unquoted(ctx, n, "this boot's measurements came without a quote", verdict{text: AttestationUnquoted, verified: true, compared: compared})
		return v, true, false, err
	case errors.As(err, &m):
		return mismatch(m.Error()), true, false, nil
	default:
		return verdict{text: AttestationNotVerified + err.Error(), failed: true}, true, false, nil
	}
}

// checkQuote verifies q, over the nonce issued at nonceAt, against the
// reported PCRs, checks the EK's certificate when the deployment configures
// the TPM makers' CAs, and pins its key to the node's host or checks it
// against the one pinned. done is true with the verdict when it does not
// hold.
func (s *Service) checkQuote(ctx context.Context, n southbound.Node, q *provisioningv1.Quote, tk *provisioningv1.TpmKeys, nonceAt int64, pcrs map[int][]byte) (v verdict, done bool, err error) {
	key, err := tpmquote.Verify(tpmquote.Quote{AKPublic: q.GetAkPublic(), Attest: q.GetAttest(), Signature: q.GetSignature()}, q.GetNonce(), pcrs)
	if err != nil {
		return mismatch("quote: " + err.Error()), true, nil
	}
	ekName, err := tpmquote.NameOf(tk.GetEkPublic())
	if err != nil {
		return mismatch("quote: the node's endorsement key: " + err.Error()), true, nil
	}
	use := &eim.AttestationKey{Project: n.Project, HostID: n.HostID, Public: key.Public, Name: key.Name, EKName: ekName, NonceAt: nonceAt}
	if s.ekRoots != nil {
		// The EK the nonce was wrapped for, and so the AK that unwrapped
		// it, must be a TPM's its maker vouches for: only then is the key
		// pinned (or, pinned already, believed).
		cert, err := tpmquote.VerifyEKCert(tk.GetEkCertificate(), tk.GetEkPublic(), s.ekRoots, s.now())
		if err != nil {
			why := err.Error()
			if len(tk.GetEkCertificate()) == 0 && tk.GetEkCertificateError() != "" {
				why += " (" + tk.GetEkCertificateError() + ")"
			} else if len(tk.GetEkCertificate()) == 0 {
				why += " (an agent older than EK certificates, or a TPM without one)"
			}
			return mismatch("quote: " + why), true, nil
		}
		use.EKCertIssuer, use.EKCertSerial = cert.Issuer, cert.Serial
	}
	pinned, err := s.keys.UseAttestationKey(ctx, use)
	switch {
	case eim.ErrorCode(err) == eim.ECONFLICT:
		return mismatch("quote: " + eim.ErrorMessage(err) + ": a replayed quote"), true, nil
	case err != nil:
		return verdict{}, true, fmt.Errorf("record the attestation key of %s: %w", n.HostID, err)
	case pinned.Name != key.Name:
		return mismatch(fmt.Sprintf("quote: attestation key %s is not the one pinned to host %s at its first attestation (%s, %s): another TPM, or its endorsement seed changed",
			key.Name, n.HostID, pinned.Name, pinned.PinnedAt.Format(time.RFC3339))), true, nil
	case pinned.EKName != ekName:
		return mismatch(fmt.Sprintf("quote: endorsement key %s is not the one pinned to host %s at its first attestation (%s, %s): another TPM",
			ekName, n.HostID, pinned.EKName, pinned.PinnedAt.Format(time.RFC3339))), true, nil
	}
	return verdict{}, false, nil
}

// unquoted is v, the verdict of a report without a quote, unless the
// host has an attestation key pinned: then a quote was due, and its
// absence (why) is a mismatch: a node that quoted before and now does not
// (a micro-OS that reports made-up values) is not believed.
func (s *Service) unquoted(ctx context.Context, n southbound.Node, why string, v verdict) (verdict, error) {
	k, err := s.keys.AttestationKey(ctx, n.Project, n.HostID)
	switch {
	case eim.ErrorCode(err) == eim.ENOTFOUND:
		return v, nil
	case err != nil:
		return verdict{}, fmt.Errorf("read the attestation key of %s: %w", n.HostID, err)
	}
	return mismatch(fmt.Sprintf("quote: host %s has attestation key %s pinned since %s, and %s, unquoted",
		n.HostID, k.Name, k.PinnedAt.Format(time.RFC3339), why)), nil
}

// status is the verdict as in's trustedAttestationStatus: a failure is an
// error; no measurement is one only for an instance that asks for Secure
// Boot and disk encryption (which needs the TPM), and otherwise just said.
func (v verdict) status(in *eim.Instance, now time.Time) inventory.Status {
	ind := eim.StatusIdle
	if v.failed || (!v.verified && in.SecurityFeature == sbRequired) {
		ind = eim.StatusError
	}
	text := v.text
	if r := []rune(text); len(r) > 1024 {
		text = string(r[:1023]) + "…"
	}
	return inventory.StatusAt(text, ind, now)
}

// servedArtifacts computes the Authenticode digests of the EFI executables
// of the artifacts directory (those starting with "MZ": iPXE's EFI binary,
// the micro-OS kernel), remembered by name, size and modification time (eim
// microos build replaces files atomically), so that a fleet onboarding at
// once does not hash the kernel per node.
type servedArtifacts struct {
	dir   string
	log   *slog.Logger
	mu    sync.Mutex
	known map[string]servedFile
}

type servedFile struct {
	size int64
	mod  time.Time
	art  *attest.Artifact // nil: not an EFI executable
}

// list returns the directory's EFI executables' digests, by name. No
// directory configured is none.
func (a *servedArtifacts) list() ([]attest.Artifact, error) {
	if a.dir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(a.dir)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known == nil {
		a.known = map[string]servedFile{}
	}
	var out []attest.Artifact
	seen := map[string]bool{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // replaced since the listing
		}
		seen[e.Name()] = true
		f, ok := a.known[e.Name()]
		if !ok || f.size != fi.Size() || !f.mod.Equal(fi.ModTime()) {
			f = servedFile{size: fi.Size(), mod: fi.ModTime()}
			if f.art, err = a.digest(e.Name()); err != nil {
				return nil, err
			}
			a.known[e.Name()] = f
		}
		if f.art != nil {
			out = append(out, *f.art)
		}
	}
	for name := range a.known {
		if !seen[name] {
			delete(a.known, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// digest reads one file: nil when it is not an EFI executable.
func (a *servedArtifacts) digest(name string) (*attest.Artifact, error) {
	f, err := os.Open(filepath.Join(a.dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var head [2]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || !bytes.Equal(head[:], []byte("MZ")) {
		return nil, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEFI))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	art, err := attest.ArtifactOf(name, b)
	if err != nil {
		// "MZ" but not a PE image: nothing the firmware would run.
		a.log.Warn("provisioning: a boot artifact starts like an EFI executable but is not one", "name", name, "err", err)
		return nil, nil
	}
	return &art, nil
}

// tpmKeys is the request's TPM keys.
func tpmKeys(req *provisioningv1.GetWorkflowRequest) tpmquote.Keys {
	return tpmquote.Keys{EKPublic: req.GetTpmKeys().GetEkPublic(), AKPublic: req.GetTpmKeys().GetAkPublic()}
}

// keysName names the keys a nonce is wrapped for, to bind it to them: the
// EK's and the AK's TPM names ("" for keys that do not parse, which get
// no nonce).
func keysName(k tpmquote.Keys) string {
	ek, err1 := tpmquote.NameOf(k.EKPublic)
	ak, err2 := tpmquote.NameOf(k.AKPublic)
	if err1 != nil || err2 != nil {
		return ""
	}
	return ek + "/" + ak
}
