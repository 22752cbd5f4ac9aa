package secureboot

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"time"
	"unicode/utf16"
)

// GUID is an EFI GUID in its text form's byte order
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx).
type GUID [16]byte

// ParseGUID reads the text form of a GUID.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	h := strings.ReplaceAll(s, "-", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 16 || len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return g, fmt.Errorf("GUID %q: want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx in hex", s)
	}
	copy(g[:], b)
	return g, nil
}

func mustGUID(s string) GUID {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g
}

func (g GUID) String() string {
	h := hex.EncodeToString(g[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// bytes is the GUID as EFI stores it: the first three fields little-endian.
func (g GUID) bytes() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b[0:], binary.BigEndian.Uint32(g[0:]))
	binary.LittleEndian.PutUint16(b[4:], binary.BigEndian.Uint16(g[4:]))
	binary.LittleEndian.PutUint16(b[6:], binary.BigEndian.Uint16(g[6:]))
	copy(b[8:], g[8:])
	return b
}

// GUIDs of the UEFI specification.
var (
	certX509GUID      = mustGUID("a5c059a1-94e4-4aa7-87b5-ab155c2bf072") // EFI_CERT_X509_GUID
	certPKCS7GUID     = mustGUID("4aafd29d-68df-49ee-8aa9-347d375665a7") // EFI_CERT_TYPE_PKCS7_GUID
	imageSecurityGUID = mustGUID("d719b2cb-3d3a-4596-a3bc-dad00e67656f") // db, dbx
	globalVariable    = mustGUID("8be4df61-93ca-11d2-aa0d-00e098032b8c") // PK, KEK, SecureBoot, SetupMode
)

// GlobalVariableGUID is EFI_GLOBAL_VARIABLE, the vendor of the SecureBoot
// and SetupMode variables.
func GlobalVariableGUID() GUID { return globalVariable }

// SignatureList encodes an EFI_SIGNATURE_LIST holding one X.509
// certificate (DER) owned by owner: the .esl file that efitools'
// cert-to-efi-sig-list writes.
func SignatureList(certDER []byte, owner GUID) []byte {
	b := make([]byte, 28, 28+16+len(certDER))
	copy(b, certX509GUID.bytes())
	binary.LittleEndian.PutUint32(b[16:], uint32(28+16+len(certDER)))
	binary.LittleEndian.PutUint32(b[20:], 0)
	binary.LittleEndian.PutUint32(b[24:], uint32(16+len(certDER)))
	b = append(b, owner.bytes()...)
	return append(b, certDER...)
}

// Attributes of an authenticated Secure Boot variable.
const (
	attrNonVolatile   = 0x01
	attrBootService   = 0x02
	attrRuntime       = 0x04
	attrTimeBasedAuth = 0x20
	attrAppend        = 0x40
)

// AuthVariable returns the signed update of the variable db (or another
// of the image security database's: dbx) with data, an EFI signature list,
// signed by a KEK: the .auth file efitools' sign-efi-sig-list writes,
// which firmware in user mode accepts (UEFI: EFI_VARIABLE_AUTHENTICATION_2,
// a PKCS#7 detached signature over the variable's name, vendor GUID,
// attributes, timestamp and data). With appendWrite the update adds to db
// instead of replacing it (as KeyTool or `efi-updatevar -a` do).
func AuthVariable(name string, data []byte, at time.Time, appendWrite bool, kekCert *x509.Certificate, kekKey crypto.Signer) ([]byte, error) {
	if name != "db" && name != "dbx" {
		return nil, fmt.Errorf("variable %q: only db and dbx are signed here", name)
	}
	if _, ok := kekKey.Public().(*rsa.PublicKey); !ok {
		return nil, fmt.Errorf("KEK: want an RSA key, got %T", kekKey.Public())
	}
	attrs := uint32(attrNonVolatile | attrBootService | attrRuntime | attrTimeBasedAuth)
	if appendWrite {
		attrs |= attrAppend
	}
	ts := efiTime(at.UTC())
	var msg []byte
	for _, u := range utf16.Encode([]rune(name)) {
		msg = binary.LittleEndian.AppendUint16(msg, u)
	}
	msg = append(msg, imageSecurityGUID.bytes()...)
	msg = binary.LittleEndian.AppendUint32(msg, attrs)
	msg = append(msg, ts...)
	msg = append(msg, data...)
	h := sha256.Sum256(msg)
	sig, err := kekKey.Sign(rand.Reader, h[:], crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", name, err)
	}
	serial, err := marshalInt(kekCert.SerialNumber)
	if err != nil {
		return nil, err
	}
	// A SignedData without content and without authenticated
	// attributes (as sign-efi-sig-list makes with OpenSSL's
	// PKCS7_DETACHED|PKCS7_NOATTR): firmware hashes the message itself.
	signer := tlv(tagSequence,
		[]byte{tagInteger, 1, 1},
		tlv(tagSequence, kekCert.RawIssuer, serial),
		algorithm(oidSHA256),
		algorithm(oidRSAEncryption),
		tlv(tagOctetString, sig))
	sd := tlv(tagSequence,
		[]byte{tagInteger, 1, 1},
		tlv(tagSet, algorithm(oidSHA256)),
		tlv(tagSequence, oid(oidData)),
		tlv(tagContext0, kekCert.Raw),
		tlv(tagSet, signer))
	p7 := tlv(tagSequence, oid(oidSignedData), tlv(tagContext0, sd))
	out := append([]byte(nil), ts...)
	// WIN_CERTIFICATE_UEFI_GUID: header, CertType, CertData.
	out = binary.LittleEndian.AppendUint32(out, uint32(8+16+len(p7)))
	out = binary.LittleEndian.AppendUint16(out, winCertRevision)
	out = binary.LittleEndian.AppendUint16(out, 0x0ef1) // WIN_CERT_TYPE_EFI_GUID
	out = append(out, certPKCS7GUID.bytes()...)
	out = append(out, p7...)
	return append(out, data...), nil
}

// efiTime encodes t as an EFI_TIME (16 bytes; nanoseconds, time zone and
// daylight zero, as authenticated variables require).
func efiTime(t time.Time) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint16(b[0:], uint16(t.Year()))
	b[2], b[3], b[4], b[5], b[6] = byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second())
	return b
}

func marshalInt(n *big.Int) ([]byte, error) {
	if n == nil || n.Sign() <= 0 {
		return nil, fmt.Errorf("certificate serial number %v is not positive", n)
	}
	b := n.Bytes()
	if b[0]&0x80 != 0 {
		b = append([]byte{0}, b...)
	}
	return tlv(tagInteger, b), nil
}

// NewKey makes a Secure Boot db signing key (RSA 2048, the size every UEFI
// firmware verifies) and its self-signed certificate, valid from now for
// years, named cn. The certificate may sign code only.
func NewKey(cn string, now time.Time, years int) (*rsa.PrivateKey, *x509.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	serial.Add(serial, big.NewInt(1))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(years, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return key, cert, nil
}
