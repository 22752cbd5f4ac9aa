// Package tpmquote makes and verifies TPM 2.0 quotes of a node's SHA-256
// PCRs: the node's side (Make, through the TPM, for the agent in the
// micro-OS) and the server's (Verify, in Go alone, no TPM needed).
//
// A quote (TPM2_Quote) is the TPM's signed statement of the digest of the
// PCRs it was asked for, with data of the caller's (the server's nonce) in
// it. It is signed by an attestation key (AK): here an ECC P-256
// restricted signing primary key of the endorsement hierarchy, made from
// one fixed template. A primary key is derived from the hierarchy's seed
// and its template, so the same TPM gives the same AK at every boot and
// nothing is stored in the TPM (no persistent handle, no NV); a restricted
// key signs only what the TPM itself produced (a quote, not a forged
// attestation structure handed to it to sign), which is what makes the
// signature evidence of the PCR values.
//
// Verify checks a quote against the nonce the server gave and the PCR
// values the node reported: that the key is a restricted signing key, the
// signature, the nonce, and that the quoted digest is that of the
// reported values. What it cannot tell from the quote alone is that the
// AK is a TPM's at all (a node could send a software key's public area
// with the right attributes): the credential activation (Challenge,
// Activate) binds the AK to the TPM's endorsement key, the EK's maker's
// certificate (ReadEKCert, VerifyEKCert) shows the EK is a TPM's, and the
// server pins both keys to the host at its first attestation and refuses
// others later (provisioning, docs/security.md).
package tpmquote

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"sort"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/eimhq/eim/fde/tpmseal"
)

// Quote is a TPM's quote, as Make returns it and Verify takes it.
type Quote struct {
	// AKPublic is the attestation key's public area (TPMT_PUBLIC, as the
	// TPM marshals it).
	AKPublic []byte
	// Attest is the attestation structure the TPM signed (TPMS_ATTEST).
	Attest []byte
	// Signature is the AK's signature over Attest (TPMT_SIGNATURE).
	Signature []byte
}

// NonceSize is the largest nonce a quote carries: a TPM's qualifying data
// holds a digest (32 bytes on every TPM 2.0, which all have SHA-256).
const NonceSize = 32

// AKTemplate is the attestation key's template: an ECC P-256 signing key
// (ECDSA with SHA-256) that is restricted (it signs only what the TPM
// produced), fixed to this TPM and generated in it, with an empty
// authorization value and no dictionary-attack lockout. The same template
// under the same endorsement seed gives the same key.
var AKTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM:            true,
		FixedParent:         true,
		SensitiveDataOrigin: true,
		UserWithAuth:        true,
		NoDA:                true,
		Restricted:          true,
		SignEncrypt:         true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
		Scheme: tpm2.TPMTECCScheme{
			Scheme:  tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256}),
		},
		CurveID: tpm2.TPMECCNistP256,
		KDF:     tpm2.TPMTKDFScheme{Scheme: tpm2.TPMAlgNull},
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
		Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
	}),
}

// Make quotes the SHA-256 PCRs pcrs (0 to 23) of the TPM behind rw (the
// file tpmseal.Open returns, or a swtpm socket) over nonce (1 to
// NonceSize bytes), signed by the AK it makes from AKTemplate (and
// flushes after).
func Make(rw io.ReadWriter, nonce []byte, pcrs []int) (*Quote, error) {
	if len(nonce) == 0 || len(nonce) > NonceSize {
		return nil, fmt.Errorf("tpmquote: nonce: %d bytes, want 1 to %d", len(nonce), NonceSize)
	}
	sel, err := selection(pcrs)
	if err != nil {
		return nil, err
	}
	tpm := tpmseal.Transport(rw)
	ak, err := createAK(tpm)
	if err != nil {
		return nil, err
	}
	defer flush(tpm, ak.ObjectHandle)
	q, err := tpm2.Quote{
		SignHandle:     tpm2.AuthHandle{Handle: ak.ObjectHandle, Name: ak.Name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: nonce},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull}, // the key's own: ECDSA, SHA-256
		PCRSelect:      sel,
	}.Execute(tpm)
	if err != nil {
		return nil, fmt.Errorf("tpmquote: quote: %w", err)
	}
	return &Quote{
		AKPublic:  ak.OutPublic.Bytes(),
		Attest:    q.Quoted.Bytes(),
		Signature: tpm2.Marshal(q.Signature),
	}, nil
}

func flush(tpm transport.TPM, h tpm2.TPMHandle) {
	_, _ = tpm2.FlushContext{FlushHandle: h}.Execute(tpm)
}

// selection is the SHA-256 bank's selection of pcrs.
func selection(pcrs []int) (tpm2.TPMLPCRSelection, error) {
	if len(pcrs) == 0 {
		return tpm2.TPMLPCRSelection{}, errors.New("tpmquote: no PCR to quote")
	}
	bits := make([]byte, 3)
	for _, p := range pcrs {
		if p < 0 || p > 23 {
			return tpm2.TPMLPCRSelection{}, fmt.Errorf("tpmquote: PCR %d: want 0 to 23", p)
		}
		bits[p/8] |= 1 << (p % 8)
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{Hash: tpm2.TPMAlgSHA256, PCRSelect: bits}}}, nil
}

// Key is an attestation key, as Verify found it.
type Key struct {
	// Public is its public area (TPMT_PUBLIC), what the server pins.
	Public []byte
	// Name is its TPM name in hex (the name algorithm, SHA-256, then the
	// digest of the public area: "000b…"), what messages call it by.
	Name string
}

// NameOf is the TPM name, in hex, of the public area pub (TPMT_PUBLIC).
func NameOf(pub []byte) (string, error) {
	n, err := name(pub)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(n), nil
}

func name(pub []byte) ([]byte, error) {
	p, err := tpm2.Unmarshal[tpm2.TPMTPublic](pub)
	if err != nil {
		return nil, fmt.Errorf("the key's public area does not parse: %w", err)
	}
	n, err := tpm2.ObjectName(p)
	if err != nil {
		return nil, fmt.Errorf("the key's name: %w", err)
	}
	return n.Buffer, nil
}

// checkAK checks that pub is a restricted signing key generated in and
// fixed to a TPM, as an AK must be.
func checkAK(pub []byte) error {
	p, err := tpm2.Unmarshal[tpm2.TPMTPublic](pub)
	if err != nil {
		return fmt.Errorf("the attestation key's public area does not parse: %w", err)
	}
	if a := p.ObjectAttributes; !a.Restricted || !a.SignEncrypt || a.Decrypt || !a.FixedTPM || !a.SensitiveDataOrigin {
		return errors.New("the attestation key is not a restricted signing key generated in and fixed to a TPM")
	}
	return nil
}

// Verify checks q against nonce (the one the server gave for it) and the
// PCR values the node reported (SHA-256, by index): the AK is a restricted
// signing key, its signature over the attestation structure holds, the
// structure is a quote made by a TPM with nonce as its qualifying data,
// it selects exactly the SHA-256 bank's reported PCRs, and its PCR digest
// is that of their values. It returns the AK; an error says what does not
// hold.
func Verify(q Quote, nonce []byte, pcrs map[int][]byte) (*Key, error) {
	if err := checkAK(q.AKPublic); err != nil {
		return nil, err
	}
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](q.AKPublic)
	if err != nil {
		return nil, err
	}
	name, err := NameOf(q.AKPublic)
	if err != nil {
		return nil, err
	}
	key := &Key{Public: bytes.Clone(q.AKPublic), Name: name}
	if err := verifySignature(pub, q.Attest, q.Signature); err != nil {
		return nil, fmt.Errorf("the signature by attestation key %s: %w", name, err)
	}
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](q.Attest)
	if err != nil {
		// The magic value is checked here too: a structure the TPM did
		// not make (TPM_GENERATED_VALUE) does not parse.
		return nil, fmt.Errorf("the signed attestation structure does not parse: %w", err)
	}
	if att.Type != tpm2.TPMSTAttestQuote {
		return nil, fmt.Errorf("the signed attestation structure is not a quote (type 0x%x)", uint16(att.Type))
	}
	if !bytes.Equal(att.ExtraData.Buffer, nonce) {
		return nil, fmt.Errorf("the quote is over nonce %x, not the server's %x", att.ExtraData.Buffer, nonce)
	}
	info, err := att.Attested.Quote()
	if err != nil {
		return nil, fmt.Errorf("the quote's information: %w", err)
	}
	quoted, err := selected(info.PCRSelect)
	if err != nil {
		return nil, err
	}
	var want []int
	for i := range pcrs {
		want = append(want, i)
	}
	sort.Ints(want)
	if !slices.Equal(quoted, want) {
		return nil, fmt.Errorf("the quote covers PCRs %v, not the reported %v", quoted, want)
	}
	h := sha256.New()
	for _, i := range want {
		h.Write(pcrs[i])
	}
	if d := h.Sum(nil); !bytes.Equal(d, info.PCRDigest.Buffer) {
		return nil, fmt.Errorf("the TPM quoted PCR digest %x, not the digest of the reported PCR values (%x): a reported value is not the TPM's", info.PCRDigest.Buffer, d)
	}
	return key, nil
}

// verifySignature checks sig (TPMT_SIGNATURE) over msg with the key pub:
// ECDSA or RSASSA-PKCS1-v1_5, SHA-256.
func verifySignature(pub *tpm2.TPMTPublic, msg, sig []byte) error {
	s, err := tpm2.Unmarshal[tpm2.TPMTSignature](sig)
	if err != nil {
		return fmt.Errorf("does not parse: %w", err)
	}
	k, err := tpm2.Pub(*pub)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(msg)
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		e, err := s.Signature.ECDSA()
		if err != nil {
			return fmt.Errorf("not an ECDSA signature, as the key's type asks: %w", err)
		}
		if e.Hash != tpm2.TPMAlgSHA256 {
			return fmt.Errorf("hash algorithm 0x%x, want SHA-256", uint16(e.Hash))
		}
		r, ss := new(big.Int).SetBytes(e.SignatureR.Buffer), new(big.Int).SetBytes(e.SignatureS.Buffer)
		if !ecdsa.Verify(k, digest[:], r, ss) {
			return errors.New("does not verify")
		}
	case *rsa.PublicKey:
		r, err := s.Signature.RSASSA()
		if err != nil {
			return fmt.Errorf("not an RSASSA signature, as the key's type asks: %w", err)
		}
		if r.Hash != tpm2.TPMAlgSHA256 {
			return fmt.Errorf("hash algorithm 0x%x, want SHA-256", uint16(r.Hash))
		}
		if err := rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], r.Sig.Buffer); err != nil {
			return errors.New("does not verify")
		}
	default:
		return fmt.Errorf("key type %T", k)
	}
	return nil
}

// selected is the PCRs sel selects, in order: the SHA-256 bank's only.
func selected(sel tpm2.TPMLPCRSelection) ([]int, error) {
	var out []int
	for _, s := range sel.PCRSelections {
		if s.Hash != tpm2.TPMAlgSHA256 {
			return nil, fmt.Errorf("the quote selects PCRs of hash algorithm 0x%x, not only SHA-256", uint16(s.Hash))
		}
		if out != nil {
			return nil, errors.New("the quote selects the SHA-256 bank twice")
		}
		out = []int{}
		for i, b := range s.PCRSelect {
			for bit := 0; bit < 8; bit++ {
				if b&(1<<bit) != 0 {
					out = append(out, i*8+bit)
				}
			}
		}
	}
	return out, nil
}
