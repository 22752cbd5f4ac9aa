package secureboot

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"unicode/utf16"
)

// WIN_CERTIFICATE values (PE format specification, "The Attribute
// Certificate Table").
const (
	winCertRevision = 0x0200
	winCertPKCS     = 0x0002 // WIN_CERT_TYPE_PKCS_SIGNED_DATA
)

// ErrUnsigned is returned by Verify for an image without a signature.
var ErrUnsigned = errors.New("the image is not signed")

// Sign returns image signed with key, whose certificate is cert: an
// Authenticode signature (SHA-256, RSA PKCS#1 v1.5) appended as the
// image's only certificate table entry. Signatures the image had (a
// distribution's) are dropped first, so the result boots only where the
// deployment's certificate is enrolled. The image is padded to 8 bytes
// (the certificate table's alignment) and its PE checksum updated.
func Sign(image []byte, cert *x509.Certificate, key crypto.Signer) ([]byte, error) {
	if _, ok := key.Public().(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("secure boot key: want RSA (what UEFI firmware verifies), got %T", key.Public())
	}
	im, err := Parse(image)
	if err != nil {
		return nil, err
	}
	end := len(image)
	if im.Signed() {
		end = im.certOff
	}
	padded := end + (8-end%8)%8
	out := make([]byte, padded, padded+4096)
	copy(out, image[:end])
	binary.LittleEndian.PutUint64(out[im.certDir:], 0)
	unsigned, err := Parse(out)
	if err != nil {
		return nil, err
	}
	sig, err := signedData(unsigned.Digest(crypto.SHA256), cert, key)
	if err != nil {
		return nil, err
	}
	entry := make([]byte, 8, 8+len(sig)+8)
	binary.LittleEndian.PutUint32(entry[0:], uint32(8+len(sig)))
	binary.LittleEndian.PutUint16(entry[4:], winCertRevision)
	binary.LittleEndian.PutUint16(entry[6:], winCertPKCS)
	entry = append(entry, sig...)
	entry = append(entry, make([]byte, (8-len(entry)%8)%8)...)
	binary.LittleEndian.PutUint32(out[im.certDir:], uint32(padded))
	binary.LittleEndian.PutUint32(out[im.certDir+4:], uint32(len(entry)))
	out = append(out, entry...)
	binary.LittleEndian.PutUint32(out[im.checksum:], peChecksum(out, im.checksum))
	return out, nil
}

// spcIndirectData is the SpcIndirectDataContent of a PE image digest.
func spcIndirectData(digest []byte) []byte {
	// SpcPeImageData: no flags, and the file link "<<<Obsolete>>>" as a
	// BMPString ([0] EXPLICIT SpcLink → [2] EXPLICIT SpcString → [0]
	// IMPLICIT BMPString), as Microsoft's signers write it.
	var bmp []byte
	for _, u := range utf16.Encode([]rune("<<<Obsolete>>>")) {
		bmp = append(bmp, byte(u>>8), byte(u))
	}
	peImageData := tlv(tagSequence,
		tlv(tagBitString, []byte{0}),
		tlv(tagContext0, tlv(tagContext2, tlv(tagContext0Pri, bmp))))
	return tlv(tagSequence,
		tlv(tagSequence, oid(oidSPCPEImageData), peImageData),
		tlv(tagSequence, algorithm(oidSHA256), tlv(tagOctetString, digest)))
}

// signedData builds the PKCS#7 ContentInfo of an Authenticode signature.
func signedData(digest []byte, cert *x509.Certificate, key crypto.Signer) ([]byte, error) {
	idc := spcIndirectData(digest)
	// The message digest covers the content's value, without its
	// SEQUENCE tag and length (PKCS#7 hashes the content octets).
	_, inner := splitTLV(idc)
	md := sha256.Sum256(inner)
	attrs := [][]byte{
		attribute(oidContentType, oid(oidSPCIndirectData)),
		attribute(oidSPCSpOpusInfo, tlv(tagSequence)),
		attribute(oidMessageDigest, tlv(tagOctetString, md[:])),
	}
	set := setOf(attrs...)
	h := sha256.Sum256(set)
	sig, err := key.Sign(rand.Reader, h[:], crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	_, setContent := splitTLV(set)
	serial, err := marshalInt(cert.SerialNumber)
	if err != nil {
		return nil, err
	}
	signer := tlv(tagSequence,
		[]byte{tagInteger, 1, 1},
		tlv(tagSequence, cert.RawIssuer, serial),
		algorithm(oidSHA256),
		tlv(tagContext0, setContent),
		algorithm(oidRSAEncryption),
		tlv(tagOctetString, sig))
	sd := tlv(tagSequence,
		[]byte{tagInteger, 1, 1},
		tlv(tagSet, algorithm(oidSHA256)),
		tlv(tagSequence, oid(oidSPCIndirectData), tlv(tagContext0, idc)),
		tlv(tagContext0, cert.Raw),
		tlv(tagSet, signer))
	return tlv(tagSequence, oid(oidSignedData), tlv(tagContext0, sd)), nil
}

// splitTLV returns the header and the content of the DER element b (which
// the functions here built, so well-formed).
func splitTLV(b []byte) (hdr, content []byte) {
	n := 2
	if b[1]&0x80 != 0 {
		n += int(b[1] & 0x7f)
	}
	return b[:n], b[n:]
}

// Parsed PKCS#7 structures (what Verify reads).
type (
	contentInfo struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"explicit,optional,tag:0"`
	}
	algorithmIdentifier struct {
		Algorithm  asn1.ObjectIdentifier
		Parameters asn1.RawValue `asn1:"optional"`
	}
	issuerAndSerial struct {
		Issuer asn1.RawValue
		Serial *big.Int
	}
	signerInfo struct {
		Version   int
		Signer    issuerAndSerial
		Digest    algorithmIdentifier
		AuthAttrs asn1.RawValue `asn1:"optional,tag:0"`
		SigAlg    algorithmIdentifier
		Signature []byte
		Unauth    asn1.RawValue `asn1:"optional,tag:1"`
	}
	pkcs7SignedData struct {
		Version          int
		DigestAlgorithms asn1.RawValue
		ContentInfo      contentInfo
		Certificates     asn1.RawValue `asn1:"optional,tag:0"`
		CRLs             asn1.RawValue `asn1:"optional,tag:1"`
		SignerInfos      []signerInfo  `asn1:"set"`
	}
	pkcs9Attribute struct {
		Type   asn1.ObjectIdentifier
		Values asn1.RawValue
	}
	digestInfo struct {
		Algorithm algorithmIdentifier
		Digest    []byte
	}
	indirectData struct {
		Data          asn1.RawValue
		MessageDigest digestInfo
	}
)

// Verify checks that image carries an Authenticode signature over its
// current bytes made with the key of one of certs (SHA-256, RSA), as
// firmware with those certificates in db would. It returns ErrUnsigned for
// an image without signatures, and an error naming the reason for one
// whose signatures do not verify.
func Verify(image []byte, certs ...*x509.Certificate) error {
	im, err := Parse(image)
	if err != nil {
		return err
	}
	if !im.Signed() {
		return ErrUnsigned
	}
	digest := im.Digest(crypto.SHA256)
	table := image[im.certOff : im.certOff+im.certSize]
	var errs []error
	for len(table) >= 8 {
		n := int(binary.LittleEndian.Uint32(table))
		typ := binary.LittleEndian.Uint16(table[6:])
		if n < 8 || n > len(table) {
			return errors.New("certificate table: entry length out of the table")
		}
		if typ == winCertPKCS {
			err := verifyOne(table[8:n], digest, certs)
			if err == nil {
				return nil
			}
			errs = append(errs, err)
		}
		table = table[min(len(table), n+(8-n%8)%8):]
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: the certificate table has no PKCS#7 signature", ErrUnsigned)
	}
	return fmt.Errorf("no signature verifies: %w", errors.Join(errs...))
}

func verifyOne(der, digest []byte, certs []*x509.Certificate) error {
	var ci contentInfo
	if _, err := asn1.Unmarshal(der, &ci); err != nil {
		return fmt.Errorf("PKCS#7: %w", err)
	}
	if !ci.ContentType.Equal(oidSignedData) {
		return fmt.Errorf("PKCS#7: content type %s, want signedData", ci.ContentType)
	}
	var sd pkcs7SignedData
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil {
		return fmt.Errorf("PKCS#7 SignedData: %w", err)
	}
	if !sd.ContentInfo.ContentType.Equal(oidSPCIndirectData) {
		return fmt.Errorf("PKCS#7: content type %s, want SpcIndirectDataContent", sd.ContentInfo.ContentType)
	}
	// The [0] EXPLICIT wrapper's content is the SpcIndirectDataContent.
	var idc indirectData
	var idcRaw asn1.RawValue
	if _, err := asn1.Unmarshal(sd.ContentInfo.Content.Bytes, &idcRaw); err != nil {
		return fmt.Errorf("SpcIndirectDataContent: %w", err)
	}
	if _, err := asn1.Unmarshal(idcRaw.FullBytes, &idc); err != nil {
		return fmt.Errorf("SpcIndirectDataContent: %w", err)
	}
	if !idc.MessageDigest.Algorithm.Algorithm.Equal(oidSHA256) {
		return fmt.Errorf("image digest algorithm %s: only SHA-256 is checked", idc.MessageDigest.Algorithm.Algorithm)
	}
	if !bytes.Equal(idc.MessageDigest.Digest, digest) {
		return errors.New("the signed digest is not the image's: the image changed after signing")
	}
	contentSum := sha256.Sum256(idcRaw.Bytes)
	for _, si := range sd.SignerInfos {
		cert := signerCert(si, certs)
		if cert == nil {
			continue
		}
		pub, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			continue
		}
		if !si.Digest.Algorithm.Equal(oidSHA256) {
			return fmt.Errorf("signer digest algorithm %s: only SHA-256 is checked", si.Digest.Algorithm)
		}
		signed := contentSum[:]
		if len(si.AuthAttrs.Bytes) > 0 {
			md, err := messageDigest(si.AuthAttrs.Bytes)
			if err != nil {
				return err
			}
			if !bytes.Equal(md, contentSum[:]) {
				return errors.New("PKCS#7: the message digest attribute is not the content's")
			}
			h := sha256.Sum256(tlv(tagSet, si.AuthAttrs.Bytes))
			signed = h[:]
		}
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, signed, si.Signature); err != nil {
			return fmt.Errorf("signature of %s: %w", cert.Subject, err)
		}
		return nil
	}
	return errors.New("signed by a key none of the given certificates holds")
}

// signerCert is the one of certs the signer names by issuer and serial.
func signerCert(si signerInfo, certs []*x509.Certificate) *x509.Certificate {
	for _, c := range certs {
		if bytes.Equal(c.RawIssuer, si.Signer.Issuer.FullBytes) && si.Signer.Serial != nil && c.SerialNumber.Cmp(si.Signer.Serial) == 0 {
			return c
		}
	}
	return nil
}

// messageDigest finds the messageDigest attribute in the content of
// authenticated attributes.
func messageDigest(attrs []byte) ([]byte, error) {
	for len(attrs) > 0 {
		var a pkcs9Attribute
		rest, err := asn1.Unmarshal(attrs, &a)
		if err != nil {
			return nil, fmt.Errorf("PKCS#7 attributes: %w", err)
		}
		attrs = rest
		if !a.Type.Equal(oidMessageDigest) {
			continue
		}
		var md []byte
		if _, err := asn1.Unmarshal(a.Values.Bytes, &md); err != nil {
			return nil, fmt.Errorf("PKCS#7 messageDigest: %w", err)
		}
		return md, nil
	}
	return nil, errors.New("PKCS#7: no messageDigest attribute")
}
