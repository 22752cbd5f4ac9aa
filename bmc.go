package eim

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// BMCs (the oob module, package oob): the baseboard management controller
// of a host, through which it is powered and booted out of band. A BMC is
// not a Store resource (Kinds does not list it): it has a store of its own
// (BMCStore), one per host, keyed by the host's ID; it goes with its host
// and with its project.

// KindBMC names a host's BMC in the audit log and in the change feed (its
// resource ID is the host's): a BMC put or deleted is an event of this
// kind; a host deleted takes its BMC with it without one.
const KindBMC Kind = "bmc"

// BMCProtocol is how EIM talks to a BMC.
type BMCProtocol string

const (
	BMCRedfish BMCProtocol = "REDFISH"
	BMCIPMI    BMCProtocol = "IPMI"
	BMCAMT     BMCProtocol = "AMT" // Intel AMT / ISM (WS-Management)
)

// BMCProtocols are the protocols, in the API's order.
func BMCProtocols() []string {
	return []string{string(BMCRedfish), string(BMCIPMI), string(BMCAMT)}
}

// Valid reports whether p is one of the protocols.
func (p BMCProtocol) Valid() bool { return p == BMCRedfish || p == BMCIPMI || p == BMCAMT }

// BMC is a host's BMC: how to reach it (set by users) and what EIM found
// there (Capabilities, Reachable: set by the oob module).
type BMC struct {
	Project  string
	HostID   string
	Protocol BMCProtocol
	// Address is host[:port], or a URL (https://host[:port]) for Redfish
	// and AMT.
	Address string
	// SystemID is the Redfish ComputerSystem's ID ("" the only one).
	SystemID string
	Username string
	// SealedPassword is the password as stored: sealed under the
	// deployment's secrets key (seal.Key.SealText, BMCPasswordPurpose).
	// It is never answered by the API.
	SealedPassword string
	// CACert is the PEM bundle the BMC's TLS certificate is checked
	// against ("" the system's roots); Insecure skips the check.
	CACert   string
	Insecure bool
	// PowerPolicy is the host's power policy ("" unset: the site's, else
	// the project's; see EffectivePowerPolicy).
	PowerPolicy PowerPolicy

	Capabilities BMCCapabilities
	Reachable    BMCReachable
	CreatedAt    Time
	UpdatedAt    Time
}

// BMCCapabilities are what the BMC says it can do: read by the oob module
// from the BMC (none until it has).
type BMCCapabilities struct {
	ResetTypes   []string `json:"resetTypes,omitempty"`
	BootTargets  []string `json:"bootTargets,omitempty"`
	VirtualMedia bool     `json:"virtualMedia,omitempty"`
}

// BMCReachable is the BMC's Reachable condition: the outcome of the last
// time EIM talked to it (Status "" when it has not yet).
type BMCReachable struct {
	Status    string `json:"status,omitempty"` // REACHABLE, UNREACHABLE
	LastError string `json:"lastError,omitempty"`
	CheckedAt Time   `json:"checkedAt,omitzero"`
}

// BMCPasswordPurpose binds a BMC's sealed password to its host (the
// associated data of seal.Key.SealText), so that a value copied to
// another row does not open there.
func BMCPasswordPurpose(project, hostID string) string {
	return "bmc-password:" + project + ":" + hostID
}

// BMCStore keeps hosts' BMCs (see sqlstore), project-scoped. PutBMC
// creates or replaces the BMC of an existing host of the project
// (ENOTFOUND otherwise): an empty SealedPassword keeps the stored one (a
// new BMC without one is EINVALID naming password); it resets what the
// module found (Capabilities, Reachable) and sets b's CreatedAt,
// UpdatedAt and SealedPassword as stored. Its audit record shows the
// password as Redacted. GetBMC returns one (ENOTFOUND when the host has
// none); DeleteBMC removes one (ENOTFOUND when there is none); ListBMCs
// returns the project's, by host ID. RecordBMCFound records what the oob
// module found of a BMC (caps nil: kept) without touching its settings,
// unaudited (ENOTFOUND when the host has no BMC).
type BMCStore interface {
	PutBMC(ctx context.Context, b *BMC) error
	GetBMC(ctx context.Context, project, hostID string) (*BMC, error)
	DeleteBMC(ctx context.Context, project, hostID string) error
	ListBMCs(ctx context.Context, project string) ([]*BMC, error)
	RecordBMCFound(ctx context.Context, project, hostID string, caps *BMCCapabilities, reach BMCReachable) error
}

// Limits of a BMC's settings.
const (
	MaxBMCAddress  = 255
	MaxBMCUsername = 64
	MaxBMCPassword = 256
	MaxBMCCACert   = 64 << 10
)

var reSystemID = regexp.MustCompile(`^[A-Za-z0-9._~-]*$`)
var reHostname = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)

// Validate checks b's settings (not the password: see CheckBMCPassword).
// The error is EINVALID naming the field by its wire name.
func (b *BMC) Validate() error {
	if !b.Protocol.Valid() {
		return Errorf(EINVALID, "protocol: %q is not one of %s", b.Protocol, strings.Join(BMCProtocols(), ", "))
	}
	if err := checkBMCAddress(b.Protocol, b.Address); err != nil {
		return err
	}
	if b.SystemID != "" && b.Protocol != BMCRedfish {
		return Errorf(EINVALID, "systemId: only a Redfish BMC has systems")
	}
	if len(b.SystemID) > 128 || !reSystemID.MatchString(b.SystemID) {
		return Errorf(EINVALID, "systemId: %q is not a Redfish resource ID (letters, digits, '.', '_', '~', '-'; at most 128)", b.SystemID)
	}
	switch {
	case b.Username == "":
		return Errorf(EINVALID, "username: required")
	case len(b.Username) > MaxBMCUsername || !utf8.ValidString(b.Username) || strings.ContainsFunc(b.Username, isControl):
		return Errorf(EINVALID, "username: at most %d printable characters", MaxBMCUsername)
	case b.Protocol == BMCIPMI && strings.HasPrefix(b.Username, "-"):
		return Errorf(EINVALID, "username: must not start with '-'")
	}
	if b.Protocol == BMCIPMI && (b.CACert != "" || b.Insecure) {
		field := "caCert"
		if b.Insecure {
			field = "insecure"
		}
		return Errorf(EINVALID, "%s: IPMI does not use TLS", field)
	}
	if b.CACert != "" {
		if b.Insecure {
			return Errorf(EINVALID, "insecure: not with caCert (give one or the other)")
		}
		if err := checkCABundle(b.CACert); err != nil {
			return err
		}
	}
	if p, err := ParsePowerPolicy("powerPolicy", string(b.PowerPolicy)); err != nil {
		return err
	} else if p != b.PowerPolicy {
		return Errorf(EINVALID, "powerPolicy: %q: write it as %q", b.PowerPolicy, p)
	}
	return nil
}

// CheckBMCPassword checks a password given for a BMC of protocol p.
func CheckBMCPassword(p BMCProtocol, password string) error {
	switch {
	case password == "":
		return Errorf(EINVALID, "password: required")
	case len(password) > MaxBMCPassword:
		return Errorf(EINVALID, "password: at most %d bytes", MaxBMCPassword)
	case p == BMCIPMI && len(password) > 20:
		return Errorf(EINVALID, "password: IPMI passwords are at most 20 bytes")
	case strings.ContainsFunc(password, isControl):
		return Errorf(EINVALID, "password: control characters are not allowed")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// checkBMCAddress checks an address: host[:port] for every protocol, or an
// http(s) URL with nothing but a host and port for Redfish and AMT.
func checkBMCAddress(p BMCProtocol, addr string) error {
	if addr == "" {
		return Errorf(EINVALID, "address: required")
	}
	if len(addr) > MaxBMCAddress {
		return Errorf(EINVALID, "address: at most %d characters", MaxBMCAddress)
	}
	host, port := addr, ""
	if strings.Contains(addr, "://") {
		if p == BMCIPMI {
			return Errorf(EINVALID, "address: %q: an IPMI BMC's address is host[:port], not a URL", addr)
		}
		u, err := url.Parse(addr)
		if err != nil {
			return Errorf(EINVALID, "address: %q is not a URL", addr)
		}
		if u.Scheme != "https" && u.Scheme != "http" {
			return Errorf(EINVALID, "address: %q: the scheme must be https or http", addr)
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return Errorf(EINVALID, "address: %q: give only the scheme, host and port", addr)
		}
		host, port = u.Hostname(), u.Port()
		if strings.HasSuffix(u.Host, ":") {
			return Errorf(EINVALID, "address: %q: the port is empty", addr)
		}
	} else if h, pt, err := net.SplitHostPort(addr); err == nil {
		host, port = h, pt
		if port == "" {
			return Errorf(EINVALID, "address: %q: the port is empty", addr)
		}
	} else if strings.Count(addr, ":") > 1 && net.ParseIP(addr) != nil {
		host = addr // a bare IPv6 address
	} else if strings.Contains(addr, ":") || strings.ContainsAny(addr, "[]") {
		return Errorf(EINVALID, "address: %q is not host[:port]", addr)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return Errorf(EINVALID, "address: %q: the port must be 1 to 65535", addr)
		}
	}
	if host == "" {
		return Errorf(EINVALID, "address: %q has no host", addr)
	}
	if net.ParseIP(host) == nil && (len(host) > 253 || !reHostname.MatchString(host)) {
		return Errorf(EINVALID, "address: %q: %q is neither an IP address nor a host name", addr, host)
	}
	return nil
}

// checkCABundle checks a BMC's CA bundle.
func checkCABundle(s string) error { return checkPEMBundle("caCert", s, MaxBMCCACert) }

// checkPEMBundle checks that s, the value of field, is PEM holding only
// certificates, at least one, in at most max bytes.
func checkPEMBundle(field, s string, max int) error {
	if len(s) > max {
		return Errorf(EINVALID, "%s: at most %d bytes", field, max)
	}
	rest, n := []byte(s), 0
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return Errorf(EINVALID, "%s: a %q block is not a certificate", field, blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return Errorf(EINVALID, "%s: certificate %d: %v", field, n+1, err)
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return Errorf(EINVALID, "%s: not a PEM bundle of certificates", field)
	}
	return nil
}

// BMCInput is the body of PUT …/compute/hosts/{hostId}/bmc: the BMC's
// settings, which replace those stored. A nil Password keeps the stored one.
type BMCInput struct {
	Protocol string  `json:"protocol"`
	Address  string  `json:"address"`
	SystemID string  `json:"systemId,omitempty"`
	Username string  `json:"username"`
	Password *string `json:"password,omitempty"`
	CACert   string  `json:"caCert,omitempty"`
	Insecure bool    `json:"insecure,omitempty"`
	// PowerPolicy: ALWAYS_ON, REPORT or "" (unset: the site's or the
	// project's).
	PowerPolicy string `json:"powerPolicy,omitempty"`
}

// BMCView is a BMC as the API answers it: never its password, only
// whether one is set.
type BMCView struct {
	HostID       string          `json:"hostId"`
	Protocol     string          `json:"protocol"`
	Address      string          `json:"address"`
	SystemID     string          `json:"systemId,omitempty"`
	Username     string          `json:"username"`
	PasswordSet  bool            `json:"passwordSet"`
	CACert       string          `json:"caCert,omitempty"`
	Insecure     bool            `json:"insecure"`
	PowerPolicy  string          `json:"powerPolicy"`
	Capabilities BMCCapabilities `json:"capabilities"`
	Reachable    BMCReachable    `json:"reachable"`
	Timestamps   Timestamps      `json:"timestamps"`
}

// View is b as the API answers it.
func (b *BMC) View() *BMCView {
	return &BMCView{HostID: b.HostID, Protocol: string(b.Protocol), Address: b.Address, SystemID: b.SystemID,
		Username: b.Username, PasswordSet: b.SealedPassword != "", CACert: b.CACert, Insecure: b.Insecure,
		PowerPolicy: string(b.PowerPolicy), Capabilities: b.Capabilities, Reachable: b.Reachable,
		Timestamps: Timestamps{CreatedAt: b.CreatedAt, UpdatedAt: b.UpdatedAt}}
}
