package tpmseal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// EIM's own blob, version 1: what EIM sealed before it sealed as systemd
// does, kept in the eim-tpm2 tokens of volumes installed then. UnsealV1
// opens it, so that those nodes still boot; SealV1 makes it, for tests of
// that path only. The object is the same as Seal's, under the TCG's ECC
// P-256 SRK template (noDA, zeroed unique) rather than systemd's.
//
// Layout (big-endian):
//
//	"ETS" 0x01
//	u8 n, then n × (u8 PCR, 32-byte SHA-256 value at sealing), PCRs ascending
//	u16 length, TPM2B_PUBLIC of the sealed object
//	u16 length, TPM2B_PRIVATE of the sealed object
var blobMagic = []byte("ETS\x01")

const maxPart = 4096

type blob struct {
	pcrs      []int
	values    [][]byte
	pub, priv []byte
}

// SealV1 seals secret as EIM did before (a v1 blob). Nothing but tests
// uses it: EIM seals with Seal.
func SealV1(rw io.ReadWriter, secret []byte, pcrs []int) ([]byte, error) {
	if len(secret) == 0 || len(secret) > MaxSecret {
		return nil, fmt.Errorf("tpmseal: secret: %d bytes, want 1 to %d", len(secret), MaxSecret)
	}
	if pcrs == nil {
		pcrs = DefaultPCRs
	}
	pcrs, err := checkPCRs(pcrs)
	if err != nil {
		return nil, err
	}
	tpm := newTransport(rw)
	values, err := readPCRs(tpm, tpm2.TPMAlgSHA256, pcrs)
	if err != nil {
		return nil, err
	}
	srk, err := createPrimary(tpm, tpm2.ECCSRKTemplate)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the storage key: %w", err)
	}
	defer srk.flush(tpm)
	create, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{
			Handle: srk.handle, Name: srk.name,
			Auth: tpm2.HMAC(tpm2.TPMAlgSHA256, 16, tpm2.Salted(srk.handle, srk.pub), tpm2.AESEncryption(128, tpm2.EncryptIn)),
		},
		InSensitive: tpm2.TPM2BSensitiveCreate{Sensitive: &tpm2.TPMSSensitiveCreate{
			Data: tpm2.NewTPMUSensitiveCreate(&tpm2.TPM2BSensitiveData{Buffer: secret}),
		}},
		InPublic: tpm2.New2B(tpm2.TPMTPublic{
			Type:             tpm2.TPMAlgKeyedHash,
			NameAlg:          tpm2.TPMAlgSHA256,
			ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, NoDA: true},
			AuthPolicy:       tpm2.TPM2BDigest{Buffer: policyDigest(tpm2.TPMAlgSHA256, pcrs, values)},
			Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgKeyedHash, &tpm2.TPMSKeyedHashParms{
				Scheme: tpm2.TPMTKeyedHashScheme{Scheme: tpm2.TPMAlgNull},
			}),
		}),
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the sealed object: %w", err)
	}
	return encodeBlob(pcrs, values, tpm2.Marshal(create.OutPublic), tpm2.Marshal(create.OutPrivate)), nil
}

// UnsealV1 returns the secret sealed in a v1 blob, if this TPM sealed it
// and its PCRs hold the values they had then. A policy error names the
// PCRs that changed (the blob keeps their values at sealing).
func UnsealV1(rw io.ReadWriter, blob []byte) ([]byte, error) {
	b, err := decodeBlob(blob)
	if err != nil {
		return nil, err
	}
	pub, err := tpm2.Unmarshal[tpm2.TPM2BPublic](b.pub)
	if err != nil {
		return nil, fmt.Errorf("%w: public part: %v", ErrBadBlob, err)
	}
	priv, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](b.priv)
	if err != nil {
		return nil, fmt.Errorf("%w: private part: %v", ErrBadBlob, err)
	}
	tpm := newTransport(rw)
	srk, err := createPrimary(tpm, tpm2.ECCSRKTemplate)
	if err != nil {
		return nil, fmt.Errorf("tpmseal: create the storage key: %w", err)
	}
	defer srk.flush(tpm)
	secret, err := unsealUnder(tpm, srk, *priv, *pub, tpm2.TPMAlgSHA256, b.pcrs)
	var pe *PolicyError
	if errors.As(err, &pe) {
		pe.Changed = changedPCRs(tpm, b)
	}
	return secret, err
}

// V1PCRs returns the PCRs a v1 blob is sealed to.
func V1PCRs(blob []byte) ([]int, error) {
	b, err := decodeBlob(blob)
	if err != nil {
		return nil, err
	}
	return b.pcrs, nil
}

// changedPCRs are the PCRs of b whose value now differs from the
// sealing's (nil when they cannot be read).
func changedPCRs(tpm transport.TPM, b *blob) []int {
	now, err := readPCRs(tpm, tpm2.TPMAlgSHA256, b.pcrs)
	if err != nil {
		return nil
	}
	var changed []int
	for i, p := range b.pcrs {
		if !bytes.Equal(now[i], b.values[i]) {
			changed = append(changed, p)
		}
	}
	return changed
}

func encodeBlob(pcrs []int, values [][]byte, pub, priv []byte) []byte {
	b := append([]byte(nil), blobMagic...)
	b = append(b, byte(len(pcrs)))
	for i, p := range pcrs {
		b = append(b, byte(p))
		b = append(b, values[i]...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(pub)))
	b = append(b, pub...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(priv)))
	return append(b, priv...)
}

func decodeBlob(b []byte) (*blob, error) {
	if len(b) < len(blobMagic)+1 || string(b[:len(blobMagic)]) != string(blobMagic) {
		return nil, fmt.Errorf("%w: no version-1 header", ErrBadBlob)
	}
	b = b[len(blobMagic):]
	n := int(b[0])
	b = b[1:]
	if n == 0 || n > 24 || len(b) < n*(1+sha256.Size) {
		return nil, fmt.Errorf("%w: PCR list of %d cut short or out of range", ErrBadBlob, n)
	}
	out := &blob{}
	for i := 0; i < n; i++ {
		p := int(b[0])
		if p > 23 || i > 0 && p <= out.pcrs[i-1] {
			return nil, fmt.Errorf("%w: PCR %d out of range or order", ErrBadBlob, p)
		}
		out.pcrs = append(out.pcrs, p)
		out.values = append(out.values, b[1:1+sha256.Size])
		b = b[1+sha256.Size:]
	}
	for _, part := range []*[]byte{&out.pub, &out.priv} {
		if len(b) < 2 {
			return nil, fmt.Errorf("%w: cut short", ErrBadBlob)
		}
		l := int(binary.BigEndian.Uint16(b))
		if l == 0 || l > maxPart || len(b) < 2+l {
			return nil, fmt.Errorf("%w: part of %d bytes cut short or out of range", ErrBadBlob, l)
		}
		*part = b[2 : 2+l]
		b = b[2+l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the end", ErrBadBlob, len(b))
	}
	return out, nil
}
