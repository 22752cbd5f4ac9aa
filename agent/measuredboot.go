package agent

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/eimhq/eim/attest/tpmquote"
	"github.com/eimhq/eim/fde/tpmseal"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
)

// maxEventLog bounds the event log the agent sends: real firmware's logs
// are tens of kilobytes.
const maxEventLog = 1 << 20

// ReadMeasuredBoot reads what the TPM measured of this boot below sysRoot
// ("/" on a machine): the SHA-256 bank of PCRs 0–23 (sysfs'
// class/tpm/tpm0/pcr-sha256, Linux 5.12 and later) and the firmware's event
// log (securityfs' tpm0/binary_bios_measurements, which needs securityfs
// mounted on sys/kernel/security). No tpm0 is a machine without a TPM; a
// TPM whose values cannot be read is reported with the reason, which the
// server shows.
func ReadMeasuredBoot(sysRoot string) *provisioningv1.MeasuredBoot {
	tpm := filepath.Join(sysRoot, "sys", "class", "tpm", "tpm0")
	if _, err := os.Stat(tpm); err != nil {
		return &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_ABSENT}
	}
	mb := &provisioningv1.MeasuredBoot{Tpm: provisioningv1.MeasuredBoot_TPM_PRESENT}
	if v, err := readTrimmed(filepath.Join(tpm, "tpm_version_major")); err == nil && v == "1" {
		mb.Error = "the TPM is a TPM 1.2: measured boot needs a TPM 2.0 (its SHA-256 bank)"
		return mb
	}
	pcrs, err := readPCRs(filepath.Join(tpm, "pcr-sha256"))
	if err != nil {
		mb.Error = err.Error()
		return mb
	}
	mb.Pcrs = pcrs
	log, err := readEventLog(filepath.Join(sysRoot, "sys", "kernel", "security", "tpm0", "binary_bios_measurements"))
	if err != nil {
		mb.Error = err.Error()
		return mb
	}
	mb.EventLog = log
	return mb
}

// readPCRs reads the files 0 … 23 of a pcr-<alg> directory: each the value
// in hex.
func readPCRs(dir string) ([]*provisioningv1.Pcr, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read the TPM's SHA-256 PCRs: %w", err)
	}
	var pcrs []*provisioningv1.Pcr
	for _, e := range ents {
		i, err := strconv.ParseUint(e.Name(), 10, 8)
		if err != nil || i > 23 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read PCR %d: %w", i, err)
		}
		v, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(v) != 32 {
			return nil, fmt.Errorf("read PCR %d: not a SHA-256 value: %q", i, strings.TrimSpace(string(b)))
		}
		pcrs = append(pcrs, &provisioningv1.Pcr{Index: uint32(i), Sha256: v})
	}
	if len(pcrs) == 0 {
		return nil, fmt.Errorf("read the TPM's SHA-256 PCRs: none in %s (the TPM has no SHA-256 bank allocated?)", dir)
	}
	return pcrs, nil
}

func readEventLog(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("the firmware's TPM event log is not available (securityfs not mounted, or the firmware passed none)")
	}
	if err != nil {
		return nil, fmt.Errorf("read the TPM event log: %w", err)
	}
	defer f.Close()
	// securityfs gives the log with no size: read to the end.
	b, err := io.ReadAll(io.LimitReader(f, maxEventLog+1))
	if err != nil {
		return nil, fmt.Errorf("read the TPM event log: %w", err)
	}
	if len(b) > maxEventLog {
		return nil, fmt.Errorf("the TPM event log is larger than %d bytes", maxEventLog)
	}
	return b, nil
}

// canQuote reports whether mb is a measured boot the TPM can quote: a TPM
// 2.0 whose SHA-256 PCRs were read.
func canQuote(mb *provisioningv1.MeasuredBoot) bool {
	return mb.GetTpm() == provisioningv1.MeasuredBoot_TPM_PRESENT && mb.GetError() == "" && len(mb.GetPcrs()) > 0
}

// quoter is the agent's side of the quote in one provisioning run: its
// TPM's keys, made once, and the server's latest challenge, unwrapped only
// when a measured boot is to be sent.
type quoter struct {
	p *Provisioner
	// keys are the TPM's EK and AK; nil when the TPM could not make them
	// (err says why, in the quote of every measured boot sent).
	keys      *provisioningv1.TpmKeys
	err       error
	challenge *provisioningv1.AttestationChallenge
}

func (p *Provisioner) newQuoter() *quoter {
	q := &quoter{p: p}
	q.err = q.withTPM(func(tpm io.ReadWriter) error {
		k, err := tpmquote.Identify(tpm)
		if err != nil {
			return err
		}
		q.keys = &provisioningv1.TpmKeys{EkPublic: k.EKPublic, AkPublic: k.AKPublic}
		// The EK's certificate from its maker, which a server that
		// trusts the makers' CAs checks; without one it says why.
		if q.keys.EkCertificate, err = tpmquote.ReadEKCert(tpm); err != nil {
			q.keys.EkCertificateError = err.Error()
			p.log().Info("no EK certificate to send with the TPM's keys", "err", err)
		}
		return nil
	})
	if q.err != nil {
		p.log().Warn("the TPM did not make its attestation keys: the measured boot goes without a quote, which says why", "err", q.err)
	}
	return q
}

// measured returns mb quoted by the TPM over the nonce of the latest
// challenge (attest/tpmquote), mb itself when there is no challenge yet,
// or mb with the reason the TPM gave no quote: the server then does not
// believe the values.
func (q *quoter) measured(mb *provisioningv1.MeasuredBoot) *provisioningv1.MeasuredBoot {
	if q.err == nil && q.challenge == nil {
		return mb
	}
	out := proto.Clone(mb).(*provisioningv1.MeasuredBoot)
	err := q.err
	if err == nil {
		err = q.withTPM(func(tpm io.ReadWriter) error {
			nonce, err := tpmquote.Activate(tpm, q.challenge.GetCredentialBlob(), q.challenge.GetEncryptedSecret())
			if err != nil {
				return err
			}
			idx := make([]int, len(mb.GetPcrs()))
			for i, pcr := range mb.GetPcrs() {
				idx[i] = int(pcr.GetIndex())
			}
			r, err := tpmquote.Make(tpm, nonce, idx)
			if err != nil {
				return err
			}
			out.Quote = &provisioningv1.Quote{Nonce: nonce, AkPublic: r.AKPublic, Attest: r.Attest, Signature: r.Signature}
			return nil
		})
	}
	if err != nil {
		q.p.log().Warn("the TPM did not quote the measured boot", "err", err)
		out.Quote = &provisioningv1.Quote{Error: err.Error()}
	}
	return out
}

// withTPM runs f with the TPM open.
func (q *quoter) withTPM(f func(io.ReadWriter) error) error {
	open := q.p.OpenTPM
	if open == nil {
		open = tpmseal.Open
	}
	tpm, err := open()
	if err != nil {
		return err
	}
	defer tpm.Close()
	return f(tpm)
}
