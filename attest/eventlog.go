// Package attest checks a node's measured boot: it parses the firmware's
// TPM 2.0 event log (the TCG PC Client "crypto agile" format Linux exposes
// as binary_bios_measurements), replays it against the PCR values the node
// reported, and checks the boot code measured into PCR 4 against the
// Authenticode digests of the EFI binaries EIM served.
//
// What it proves is bounded by what it is given: the PCR values come from
// the node's own report, not from a TPM quote signed by a key the TPM holds,
// so a node that lies consistently (log and PCRs made up together) is not
// caught (docs/security.md).
package attest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Event types of the TCG PC Client Platform Firmware Profile that the
// checks read or name.
const (
	EvPrebootCert           uint32 = 0x0
	EvPostCode              uint32 = 0x1
	EvNoAction              uint32 = 0x3
	EvSeparator             uint32 = 0x4
	EvAction                uint32 = 0x5
	EvEventTag              uint32 = 0x6
	EvSCRTMContents         uint32 = 0x7
	EvSCRTMVersion          uint32 = 0x8
	EvCPUMicrocode          uint32 = 0x9
	EvPlatformConfigFlags   uint32 = 0xa
	EvTableOfDevices        uint32 = 0xb
	EvCompactHash           uint32 = 0xc
	EvIPL                   uint32 = 0xd
	EvNonhostCode           uint32 = 0xf
	EvNonhostConfig         uint32 = 0x10
	EvNonhostInfo           uint32 = 0x11
	EvOmitBootDeviceEvents  uint32 = 0x12
	EvEFIVariableDriverCfg  uint32 = 0x80000001
	EvEFIVariableBoot       uint32 = 0x80000002
	EvEFIBootServicesApp    uint32 = 0x80000003
	EvEFIBootServicesDriver uint32 = 0x80000004
	EvEFIRuntimeDriver      uint32 = 0x80000005
	EvEFIGPTEvent           uint32 = 0x80000006
	EvEFIAction             uint32 = 0x80000007
	EvEFIPlatformFirmware   uint32 = 0x80000008
	EvEFIHandoffTables      uint32 = 0x80000009
	EvEFIHCRTMEvent         uint32 = 0x80000010
	EvEFIVariableAuthority  uint32 = 0x800000e0
)

// TPM 2.0 hash algorithm identifiers (TPM_ALG_ID).
const (
	AlgSHA1   uint16 = 0x0004
	AlgSHA256 uint16 = 0x000b
	AlgSHA384 uint16 = 0x000c
	AlgSHA512 uint16 = 0x000d
)

// Event is one measurement of the log.
type Event struct {
	Index   int    // position in the log, from 0 (the Spec ID header event)
	PCR     int    // PCR index
	Type    uint32 // event type
	Digests map[uint16][]byte
	Data    []byte // the event's data, as the firmware recorded it
}

// Log is a parsed event log.
type Log struct {
	// Algs are the digest sizes of the algorithms the log carries, by ID
	// (from its Spec ID event).
	Algs map[uint16]int
	// Locality is the TPM locality the firmware started it from (the
	// StartupLocality event; 0 when absent): PCR 0's initial value.
	Locality byte
	Events   []Event
}

// Limits that keep a hostile log from costing much: a real firmware's
// log holds a few hundred events of at most a few kilobytes each.
const (
	maxEvents    = 10000
	maxEventData = 1 << 20
	maxPCR       = 23
)

var specIDSig = []byte("Spec ID Event03\x00")

// Parse reads a TCG PC Client crypto-agile event log: the SHA-1-format
// header event holding the Spec ID Event03 structure, then TCG_PCR_EVENT2
// records. A log in the old SHA-1-only format (TPM 1.2 firmware) is
// refused: there is no SHA-256 bank to check.
func Parse(b []byte) (*Log, error) {
	r := reader{b: b}
	// TCG_PCClientPCREvent: PCRIndex, EventType, SHA-1 digest, size, data.
	pcr, typ := r.u32(), r.u32()
	r.bytes(20)
	hdr := r.bytes(int(r.u32()))
	if r.err != nil {
		return nil, fmt.Errorf("event log: header event: %w", r.err)
	}
	if pcr != 0 || typ != EvNoAction || !bytes.HasPrefix(hdr, specIDSig) {
		return nil, errors.New("event log: not in the TPM 2.0 crypto-agile format (no Spec ID Event03 header): a TPM 1.2 log is not supported")
	}
	l := &Log{Algs: map[uint16]int{}}
	if err := l.parseSpecID(hdr); err != nil {
		return nil, err
	}
	l.Events = append(l.Events, Event{Index: 0, PCR: 0, Type: EvNoAction, Data: hdr})
	for r.left() > 0 {
		if len(l.Events) >= maxEvents {
			return nil, fmt.Errorf("event log: more than %d events", maxEvents)
		}
		i := len(l.Events)
		e := Event{Index: i, PCR: int(r.u32()), Type: r.u32(), Digests: map[uint16][]byte{}}
		n := r.u32()
		if r.err == nil && n > uint32(len(l.Algs)) {
			r.err = fmt.Errorf("%d digests, the header declares %d algorithms", n, len(l.Algs))
		}
		for k := uint32(0); k < n && r.err == nil; k++ {
			alg := r.u16()
			size, ok := l.Algs[alg]
			if !ok && r.err == nil {
				r.err = fmt.Errorf("digest of algorithm 0x%04x, which the header does not declare", alg)
				break
			}
			e.Digests[alg] = r.bytes(size)
		}
		size := r.u32()
		if r.err == nil && size > maxEventData {
			r.err = fmt.Errorf("%d bytes of data, at most %d", size, maxEventData)
		}
		e.Data = r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("event log: event %d: %w", i, r.err)
		}
		if e.PCR < 0 || e.PCR > maxPCR {
			return nil, fmt.Errorf("event log: event %d: PCR %d, not 0–%d", i, e.PCR, maxPCR)
		}
		if e.Type == EvNoAction && e.PCR == 0 && bytes.HasPrefix(e.Data, []byte("StartupLocality\x00")) && len(e.Data) == 17 {
			l.Locality = e.Data[16]
		}
		l.Events = append(l.Events, e)
	}
	return l, nil
}

// parseSpecID reads the algorithms and digest sizes of TCG_EfiSpecIDEvent.
func (l *Log) parseSpecID(b []byte) error {
	r := reader{b: b[len(specIDSig):]}
	r.u32() // platformClass
	r.bytes(4)
	n := r.u32()
	if r.err == nil && (n == 0 || n > 16) {
		return fmt.Errorf("event log: Spec ID event declares %d algorithms", n)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		alg, size := r.u16(), r.u16()
		if r.err == nil && (size == 0 || size > 64) {
			return fmt.Errorf("event log: Spec ID event: algorithm 0x%04x of %d bytes", alg, size)
		}
		l.Algs[alg] = int(size)
	}
	if r.err != nil {
		return fmt.Errorf("event log: Spec ID event: %w", r.err)
	}
	if l.Algs[AlgSHA256] != 32 {
		return errors.New("event log: no SHA-256 digests (the Spec ID event does not declare SHA-256)")
	}
	return nil
}

// reader reads little-endian fields, remembering the first short read.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.err = fmt.Errorf("truncated at byte %d (want %d more, %d left)", r.off, n, r.left())
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
