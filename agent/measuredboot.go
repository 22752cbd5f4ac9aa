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

// quote returns mb with the TPM's quote of its PCRs over nonce
// (attest/tpmquote), or with the reason there is none: the server then
// does not believe the values.
func (p *Provisioner) quote(mb *provisioningv1.MeasuredBoot, nonce []byte) *provisioningv1.MeasuredBoot {
	out := proto.Clone(mb).(*provisioningv1.MeasuredBoot)
	q, err := p.makeQuote(out.GetPcrs(), nonce)
	if err != nil {
		p.log().Warn("the TPM did not quote the measured boot", "err", err)
		out.Quote = &provisioningv1.Quote{Error: err.Error()}
		return out
	}
	out.Quote = &provisioningv1.Quote{Nonce: nonce, AkPublic: q.AKPublic, Attest: q.Attest, Signature: q.Signature}
	return out
}

func (p *Provisioner) makeQuote(pcrs []*provisioningv1.Pcr, nonce []byte) (*tpmquote.Quote, error) {
	open := p.OpenTPM
	if open == nil {
		open = tpmseal.Open
	}
	tpm, err := open()
	if err != nil {
		return nil, err
	}
	defer tpm.Close()
	idx := make([]int, len(pcrs))
	for i, pcr := range pcrs {
		idx[i] = int(pcr.GetIndex())
	}
	return tpmquote.Make(tpm, nonce, idx)
}
