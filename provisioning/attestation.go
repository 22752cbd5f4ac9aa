package provisioning

import (
	"bytes"
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
	"github.com/eimhq/eim/inventory"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
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

// verdict is the attestation result of a node's report: its text, and
// whether it is a failure whatever the instance asks (a mismatch, a log
// that cannot be read) or only when the instance requires a measured boot
// (no TPM).
type verdict struct {
	text     string
	verified bool
	failed   bool
}

// attestation checks the measured boot a node sent with GetWorkflow
// against the EFI binaries the server serves. ok is false when the node
// sent none (an agent older than the field): nothing is written then.
func (s *Service) attestation(mb *provisioningv1.MeasuredBoot, sb provisioningv1.SecureBootState) (verdict, bool) {
	switch {
	case mb == nil || mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_UNSPECIFIED:
		return verdict{}, false
	case mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_ABSENT:
		return verdict{text: AttestationNoTPM}, true
	case mb.GetError() != "":
		return verdict{text: AttestationNotMeasured + mb.GetError()}, true
	}
	rep := attest.Report{PCRs: map[int][]byte{}, EventLog: mb.GetEventLog(),
		SecureBoot: sb == provisioningv1.SecureBootState_SECURE_BOOT_STATE_ENABLED}
	for _, p := range mb.GetPcrs() {
		rep.PCRs[int(p.GetIndex())] = p.GetSha256()
	}
	served, err := s.served.list()
	if err != nil {
		// The boot cannot be checked now; a mismatch would blame the
		// node for the server's disk.
		s.log.Error("provisioning: read the boot artifacts to attest a boot", "err", err)
		return verdict{text: AttestationNotVerified + "the server could not read the binaries it serves to compare: " + err.Error(), failed: true}, true
	}
	var m *attest.Mismatch
	switch err := attest.Verify(rep, served); {
	case err == nil:
		return verdict{text: AttestationVerified, verified: true}, true
	case errors.As(err, &m):
		return verdict{text: AttestationMismatch + m.Error(), failed: true}, true
	default:
		return verdict{text: AttestationNotVerified + err.Error(), failed: true}, true
	}
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
