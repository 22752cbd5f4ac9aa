package tpmquote

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/eimhq/eim/fde/tpmseal"
)

// The EK certificate: a TPM's maker writes, into the TPM's NV memory, a
// certificate of the TPM's endorsement key signed by the maker's CA (TCG
// EK Credential Profile). A server that trusts the makers' CAs then knows
// an EK is a real TPM's, and through the credential activation
// (Challenge, Activate) that the AK lives in that TPM: the pin of the
// host's keys no longer rests on trust on first use.

// NV indices of the EK certificates (TCG EK Credential Profile): the
// certificate of the RSA 2048 EK and that of the ECC NIST P-256 EK, each
// made from the TCG's default template (the low range), and that of the
// ECC NIST P-384 EK of the high range. The agent makes the ECC P-256 EK
// (tpm2.ECCEKTemplate), so its certificate is the one read; the others
// are only named when it is missing.
const (
	RSAEKCertIndex     = 0x01c00002
	ECCEKCertIndex     = 0x01c0000a
	ECCP384EKCertIndex = 0x01c00016
)

// ErrNoEKCert is a TPM without a certificate of its ECC EK in NV.
var ErrNoEKCert = errors.New("tpmquote: the TPM has no EK certificate")

// maxEKCert bounds an EK certificate read from NV (a certificate is some
// 1 KB; NV indices are at most a few KB).
const maxEKCert = 16 << 10

// ReadEKCert reads the certificate of the TPM's ECC EK (DER) from NV index
// ECCEKCertIndex. A TPM without it is ErrNoEKCert, wrapped with what the
// TPM has instead (the certificates of its RSA or P-384 EKs, or none).
func ReadEKCert(rw io.ReadWriter) ([]byte, error) {
	tpm := tpmseal.Transport(rw)
	pub, err := tpm2.NVReadPublic{NVIndex: tpm2.TPMHandle(ECCEKCertIndex)}.Execute(tpm)
	if errors.Is(err, tpm2.TPMRCHandle) {
		why := "none at NV index 0x01c0000a"
		var others []string
		for _, o := range []struct {
			index uint32
			what  string
		}{{RSAEKCertIndex, "the RSA 2048 EK's at 0x01c00002"}, {ECCP384EKCertIndex, "the ECC P-384 EK's at 0x01c00016"}} {
			if _, err := (tpm2.NVReadPublic{NVIndex: tpm2.TPMHandle(o.index)}).Execute(tpm); err == nil {
				others = append(others, o.what)
			}
		}
		if len(others) > 0 {
			why += " (it has " + strings.Join(others, " and ") + ", of keys the agent does not use)"
		}
		return nil, fmt.Errorf("%w of its ECC P-256 endorsement key: %s", ErrNoEKCert, why)
	}
	if err != nil {
		return nil, fmt.Errorf("tpmquote: read the public area of NV index 0x%08x (the EK certificate): %w", ECCEKCertIndex, err)
	}
	nv, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, fmt.Errorf("tpmquote: NV index 0x%08x: %w", ECCEKCertIndex, err)
	}
	if nv.DataSize == 0 || nv.DataSize > maxEKCert {
		return nil, fmt.Errorf("tpmquote: NV index 0x%08x holds %d bytes, not an EK certificate", ECCEKCertIndex, nv.DataSize)
	}
	if !nv.Attributes.Written {
		return nil, fmt.Errorf("%w of its ECC P-256 endorsement key: NV index 0x%08x is defined but was never written", ErrNoEKCert, ECCEKCertIndex)
	}
	index := tpm2.NamedHandle{Handle: tpm2.TPMHandle(ECCEKCertIndex), Name: pub.NVName}
	var auth tpm2.AuthHandle
	switch {
	case nv.Attributes.AuthRead:
		// Its own empty authorization value, as makers define it.
		auth = tpm2.AuthHandle{Handle: index.Handle, Name: index.Name, Auth: tpm2.PasswordAuth(nil)}
	case nv.Attributes.OwnerRead:
		auth = tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}
	default:
		return nil, fmt.Errorf("tpmquote: NV index 0x%08x (the EK certificate) is readable neither with its own authorization nor the owner's", ECCEKCertIndex)
	}
	chunk := nvBufferMax(tpm)
	var out []byte
	for off := 0; off < int(nv.DataSize); off += chunk {
		n := min(chunk, int(nv.DataSize)-off)
		r, err := tpm2.NVRead{AuthHandle: auth, NVIndex: index, Size: uint16(n), Offset: uint16(off)}.Execute(tpm)
		if err != nil {
			return nil, fmt.Errorf("tpmquote: read the EK certificate (NV index 0x%08x, %d bytes at %d): %w", ECCEKCertIndex, n, off, err)
		}
		out = append(out, r.Data.Buffer...)
	}
	return trimDER(out), nil
}

// nvBufferMax is the most an NV read returns at once (TPM_PT_NV_BUFFER_MAX),
// 512 when the TPM does not say (what every TPM 2.0 supports).
func nvBufferMax(tpm transport.TPM) int {
	r, err := tpm2.GetCapability{Capability: tpm2.TPMCapTPMProperties, Property: uint32(tpm2.TPMPTNVBufferMax), PropertyCount: 1}.Execute(tpm)
	if err != nil {
		return 512
	}
	props, err := r.CapabilityData.Data.TPMProperties()
	if err != nil || len(props.TPMProperty) == 0 || props.TPMProperty[0].Property != tpm2.TPMPTNVBufferMax {
		return 512
	}
	if v := int(props.TPMProperty[0].Value); v >= 64 && v <= 4096 {
		return v
	}
	return 512
}

// trimDER cuts b to its first DER element: NV indices are often larger
// than the certificate and padded (with zeros or 0xff).
func trimDER(b []byte) []byte {
	var raw asn1.RawValue
	if rest, err := asn1.Unmarshal(b, &raw); err == nil {
		return b[:len(b)-len(rest)]
	}
	return b
}

// EKRoots are the CAs EK certificates are checked against: the TPM makers'
// root or intermediate CAs a deployment configures. Each certificate is a
// trust anchor: a chain ends at any of them.
type EKRoots struct {
	pool  *x509.CertPool
	certs []*x509.Certificate
}

// Len is how many CA certificates r holds.
func (r *EKRoots) Len() int { return len(r.certs) }

// Subjects are r's CAs' subjects, for logs.
func (r *EKRoots) Subjects() []string {
	out := make([]string, len(r.certs))
	for i, c := range r.certs {
		out[i] = c.Subject.String()
	}
	return out
}

// caExts are the file names a directory's CA certificates have.
var caExts = []string{".pem", ".crt", ".cer", ".der"}

// LoadEKRoots reads the CA certificates of files (each a PEM bundle, or one
// DER certificate) and of dirs (their files ending in .pem, .crt, .cer or
// .der, not recursing). A file that holds no certificate, or one that does
// not parse, is an error naming it; so is a directory with none.
func LoadEKRoots(files, dirs []string) (*EKRoots, error) {
	r := &EKRoots{pool: x509.NewCertPool()}
	files = slices.Clone(files)
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("TPM EK CA directory: %w", err)
		}
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") || e.IsDir() || !slices.Contains(caExts, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			files = append(files, filepath.Join(dir, e.Name()))
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("TPM EK CA directory %s: no certificate file (*.pem, *.crt, *.cer, *.der)", dir)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("TPM EK CA file: %w", err)
		}
		certs, err := ParseCACerts(b)
		if err != nil {
			return nil, fmt.Errorf("TPM EK CA file %s: %w", f, err)
		}
		for _, c := range certs {
			r.pool.AddCert(c)
			r.certs = append(r.certs, c)
		}
	}
	if len(r.certs) == 0 {
		return nil, errors.New("TPM EK CAs: no certificate given")
	}
	return r, nil
}

// ParseCACerts parses b: PEM CERTIFICATE blocks (other blocks are
// skipped), or one DER certificate.
func ParseCACerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	if bytes.Contains(b, []byte("-----BEGIN")) {
		for i := 1; ; i++ {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("PEM block %d: %w", i, err)
			}
			out = append(out, c)
		}
	} else {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, fmt.Errorf("neither PEM nor a DER certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no CERTIFICATE in it")
	}
	return out, nil
}

// EKCert is an EK certificate that verified.
type EKCert struct {
	// Issuer is its issuer's distinguished name, Serial its serial number
	// in hex: together they name it.
	Issuer string
	Serial string
	// NotAfter is when it expires.
	NotAfter time.Time
	// Manufacturer, Model and Version are the TPM's, from its subject
	// alternative name (TCG attributes; "" when it has none).
	Manufacturer, Model, Version string
}

// EKCertError is why an EK certificate does not hold: Reason completes
// "endorsement key certificate …" ("missing: …", "expired on …").
type EKCertError struct{ Reason string }

func (e *EKCertError) Error() string { return "endorsement key certificate " + e.Reason }

func ekErr(format string, a ...any) error { return &EKCertError{Reason: fmt.Sprintf(format, a...)} }

// OIDs of the TCG EK Credential Profile and X.509 that EK certificates
// carry and Go's x509 does not handle.
var (
	oidSAN                  = asn1.ObjectIdentifier{2, 5, 29, 17}
	oidSubjectDirAttributes = asn1.ObjectIdentifier{2, 5, 29, 9}
	oidTPMManufacturer      = asn1.ObjectIdentifier{2, 23, 133, 2, 1}
	oidTPMModel             = asn1.ObjectIdentifier{2, 23, 133, 2, 2}
	oidTPMVersion           = asn1.ObjectIdentifier{2, 23, 133, 2, 3}
)

// VerifyEKCert checks the EK certificate der against roots at now: that it
// parses, that its critical extensions are ones EK certificates carry (a
// subject alternative name of the TPM's maker, model and version in
// directoryName form, which Go's x509 does not read and so refuses as
// critical; subject directory attributes), that it is valid at now, that
// it chains to one of roots (any extended key usage: an EK certificate's
// is the TCG's own, tcg-kp-EKCertificate), and that its public key is the
// EK ekPublic (TPMT_PUBLIC) — the key the node's credential activation was
// made for. An error is an *EKCertError saying which.
func VerifyEKCert(der, ekPublic []byte, roots *EKRoots, now time.Time) (*EKCert, error) {
	if len(der) == 0 {
		return nil, ekErr("missing: the node sent none")
	}
	if roots == nil || roots.pool == nil || len(roots.certs) == 0 {
		// Never the system's roots: they are not TPM makers'.
		return nil, ekErr("cannot be checked: no TPM maker CA is configured")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, ekErr("does not parse: %v", err)
	}
	info := &EKCert{Issuer: cert.Issuer.String(), Serial: cert.SerialNumber.Text(16), NotAfter: cert.NotAfter}
	if err := handleCritical(cert, info); err != nil {
		return nil, ekErr("(issuer %s, serial %s) %v", info.Issuer, info.Serial, err)
	}
	switch {
	case now.After(cert.NotAfter):
		return nil, ekErr("expired on %s (issuer %s, serial %s)", cert.NotAfter.UTC().Format(time.RFC3339), info.Issuer, info.Serial)
	case now.Before(cert.NotBefore):
		return nil, ekErr("is not valid before %s (issuer %s, serial %s)", cert.NotBefore.UTC().Format(time.RFC3339), info.Issuer, info.Serial)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots.pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, ekErr("does not chain to a configured TPM maker CA (issuer %s, serial %s): %v", info.Issuer, info.Serial, err)
	}
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](ekPublic)
	if err != nil {
		return nil, ekErr("cannot be compared: the endorsement key's public area does not parse: %v", err)
	}
	key, err := tpm2.Pub(*ek)
	if err != nil {
		return nil, ekErr("cannot be compared: the endorsement key: %v", err)
	}
	ekName, _ := NameOf(ekPublic)
	certKey, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || cert.PublicKey == nil {
		return nil, ekErr("is for another key: its public key (%v) is not the endorsement key %s the node used", cert.PublicKeyAlgorithm, ekName)
	}
	if !certKey.Equal(key) {
		return nil, ekErr("is for another key (issuer %s, serial %s): its public key is not the endorsement key %s the node used", info.Issuer, info.Serial, ekName)
	}
	return info, nil
}

// handleCritical takes from cert's unhandled critical extensions those an
// EK certificate carries, after checking they are well formed, and fills
// info's TPM attributes; any other is an error.
func handleCritical(cert *x509.Certificate, info *EKCert) error {
	// The TPM's attributes are read from any subject alternative name; one
	// Go's x509 left unhandled (critical, of directoryName form only) must
	// hold them.
	var sanErr error
	for _, e := range cert.Extensions {
		if e.Id.Equal(oidSAN) {
			sanErr = tpmSAN(e.Value, info)
		}
	}
	var left []asn1.ObjectIdentifier
	for _, oid := range cert.UnhandledCriticalExtensions {
		switch {
		case oid.Equal(oidSAN):
			if sanErr != nil {
				return sanErr
			}
		case oid.Equal(oidSubjectDirAttributes):
			if err := dirAttributes(cert); err != nil {
				return err
			}
		default:
			left = append(left, oid)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("has a critical extension EIM does not know (%v)", left[0])
	}
	cert.UnhandledCriticalExtensions = nil
	return nil
}

// tpmSAN reads the TPM's maker, model and version from a subject
// alternative name of directoryName form (TCG EK Credential Profile).
func tpmSAN(v []byte, info *EKCert) error {
	var names []asn1.RawValue
	if rest, err := asn1.Unmarshal(v, &names); err != nil || len(rest) > 0 {
		return fmt.Errorf("has a critical subject alternative name that does not parse: %v", err)
	}
	for _, n := range names {
		if n.Class != asn1.ClassContextSpecific || n.Tag != 4 {
			continue // another form: Go's x509 reads those
		}
		var rdns pkix.RDNSequence
		if rest, err := asn1.Unmarshal(n.Bytes, &rdns); err != nil || len(rest) > 0 {
			return fmt.Errorf("has a critical subject alternative name whose directoryName does not parse: %v", err)
		}
		for _, set := range rdns {
			for _, a := range set {
				s, _ := a.Value.(string)
				switch {
				case a.Type.Equal(oidTPMManufacturer):
					info.Manufacturer = s
				case a.Type.Equal(oidTPMModel):
					info.Model = s
				case a.Type.Equal(oidTPMVersion):
					info.Version = s
				}
			}
		}
	}
	if info.Manufacturer == "" {
		return errors.New("has a critical subject alternative name without the TPM's manufacturer (TCG attribute 2.23.133.2.1)")
	}
	return nil
}

// dirAttributes checks that cert's subject directory attributes (the TPM
// specification it implements) parse: a sequence of attributes.
func dirAttributes(cert *x509.Certificate) error {
	for _, e := range cert.Extensions {
		if !e.Id.Equal(oidSubjectDirAttributes) {
			continue
		}
		var attrs []struct {
			Type   asn1.ObjectIdentifier
			Values asn1.RawValue `asn1:"set"`
		}
		if rest, err := asn1.Unmarshal(e.Value, &attrs); err != nil || len(rest) > 0 {
			return fmt.Errorf("has critical subject directory attributes that do not parse: %v", err)
		}
	}
	return nil
}
