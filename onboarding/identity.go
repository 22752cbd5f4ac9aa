package onboarding

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eimhq/eim"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
	"github.com/eimhq/eim/southbound"
)

// Limits of a Discover request's free-form fields.
const (
	maxInterfaces   = 64
	maxFieldLen     = 256
	maxAddrsPerNIC  = 32
	maxTokenLen     = 512
	minRetrySeconds = 10
	maxRetrySeconds = 30
)

// identity is a device as Discover sees it: a UUID and a serial number,
// either of which may be absent (placeholders and malformed serials are).
type identity struct {
	uuid, serial string
	// secureBoot is the firmware's Secure Boot state the device reported
	// (UNSPECIFIED: an agent older than the report); installed says the
	// device runs its OS already (it is not provisioned).
	secureBoot eim.SecureBootState
	installed  bool
}

func (id identity) String() string {
	var parts []string
	if id.uuid != "" {
		parts = append(parts, "uuid "+id.uuid)
	}
	if id.serial != "" {
		parts = append(parts, "serial "+id.serial)
	}
	return strings.Join(parts, ", ")
}

// parseIdentity validates a request. A malformed UUID is an error (the
// agent reads it from SMBIOS, so it is a bug or a forgery); a serial that
// does not match ^[A-Za-z0-9]{5,20}$ or is a vendor placeholder (see
// eim.PlaceholderSerial) is treated as absent, as the original did; so is a
// placeholder UUID.
func parseIdentity(req *onboardingv1.DiscoverRequest) (identity, error) {
	var id identity
	u := strings.ToLower(strings.TrimSpace(req.GetUuid()))
	if u != "" && !eim.ValidUUID(u) {
		return id, eim.Errorf(eim.EINVALID, "uuid: %q is not an RFC 4122 UUID", truncate(req.GetUuid(), 64))
	}
	if !eim.PlaceholderUUID(u) {
		id.uuid = u
	}
	s := strings.TrimSpace(req.GetSerial())
	if s != "" && eim.ValidSerial(s) && !eim.PlaceholderSerial(s) {
		id.serial = s
	}
	if id.uuid == "" && id.serial == "" {
		return id, eim.Errorf(eim.EINVALID, "the device reports neither a usable UUID nor a serial number (uuid %q, serial %q)", truncate(req.GetUuid(), 64), truncate(req.GetSerial(), 64))
	}
	if len(req.GetInterfaces()) > maxInterfaces {
		return id, eim.Errorf(eim.EINVALID, "interfaces: at most %d", maxInterfaces)
	}
	for i, nic := range req.GetInterfaces() {
		if len(nic.GetName()) > maxFieldLen || len(nic.GetMac()) > maxFieldLen || len(nic.GetIpAddresses()) > maxAddrsPerNIC {
			return id, eim.Errorf(eim.EINVALID, "interfaces[%d]: too long", i)
		}
		for _, a := range nic.GetIpAddresses() {
			if len(a) > maxFieldLen {
				return id, eim.Errorf(eim.EINVALID, "interfaces[%d]: address too long", i)
			}
		}
	}
	if len(req.GetHostname()) > maxFieldLen || len(req.GetAgentVersion()) > maxFieldLen {
		return id, eim.Errorf(eim.EINVALID, "hostname and agentVersion: at most %d bytes", maxFieldLen)
	}
	if len(req.GetEnrollmentToken()) > maxTokenLen {
		return id, eim.Errorf(eim.EINVALID, "enrollmentToken: at most %d bytes", maxTokenLen)
	}
	id.secureBoot, id.installed = southbound.SecureBootState(req.GetSecureBoot()), req.GetInstalled()
	return id, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// match is the outcome of looking a device up.
type match struct {
	host *eim.DeviceClaim // the one host the device is; nil when unknown
	// mismatch holds the hosts the UUID and the serial point at when they
	// differ (registration error on both).
	mismatch []*eim.DeviceClaim
	// conflict holds the registrations of the device in other projects
	// than the one the device proved it belongs to (see lookup).
	conflict []*eim.DeviceClaim
	// held holds every registration of a device registered in more than
	// one project that proved none of them its own: it is held.
	held []*eim.DeviceClaim
}

// claim is one project's registrations of a device.
type claim struct {
	byUUID   *eim.DeviceClaim
	bySerial []*eim.DeviceClaim
}

// onboardedClaim returns the one claim whose host has been onboarded (the
// device proved its project then, or was registered in it alone), or nil.
func onboardedClaim(claims map[string]*claim) *claim {
	var found *claim
	for _, c := range claims {
		for _, h := range c.hosts() {
			if h.CurrentState == eim.HostStateOnboarded {
				if found != nil && found != c {
					return nil
				}
				found = c
			}
		}
	}
	return found
}

// hosts returns every host of the claim.
func (c *claim) hosts() []*eim.DeviceClaim {
	var out []*eim.DeviceClaim
	if c.byUUID != nil {
		out = append(out, c.byUUID)
	}
	return append(out, c.bySerial...)
}

// lookup finds the host of a device among its registrations across all
// projects (set, as the store read them: eim.DeviceClaims): by UUID
// first, then by serial number.
//
// A machine's identity is claimed per project: each project may register
// a UUID or serial number once, whatever other projects registered. When
// registrations of more than one project match the device, the device
// must prove which project it belongs to: proof is the name of the project
// whose enrollment token it carries (its boot configuration's eim.enroll),
// or "". With proof of one of them, that project's registration is
// matched as if it were alone and the others' hosts are conflicts; so it
// is when one of them is onboarded already (the device proved its project
// then, or was registered there alone: a later registration elsewhere does
// not disturb it). Otherwise every registration is held (the device is
// told to retry). So a project that registers another's machine — before
// or after its owner — never gets it without the owner's token, and
// nothing a project does shows another project's hosts or name to the
// device or to anyone else.
func lookup(set eim.DeviceClaimSet, id identity, proof string) (match, error) {
	claims := map[string]*claim{}
	claimOf := func(h *eim.DeviceClaim) *claim {
		c := claims[h.Project]
		if c == nil {
			c = &claim{}
			claims[h.Project] = c
		}
		return c
	}
	if id.uuid != "" {
		for _, h := range set.ByUUID {
			c := claimOf(h)
			if c.byUUID != nil { // a project holds a UUID once; the store enforces it
				return match{}, fmt.Errorf("uuid %s: two hosts of project %s", id.uuid, h.Project)
			}
			c.byUUID = h
		}
	}
	if id.serial != "" {
		for _, h := range set.BySerial {
			// A host registered with a UUID is that UUID's machine; another
			// board with the same serial is not it (and the device's own
			// UUID host was found above).
			if h.UUID != "" && id.uuid != "" {
				continue
			}
			c := claimOf(h)
			c.bySerial = append(c.bySerial, h)
		}
	}
	var win *claim
	switch len(claims) {
	case 0:
		return match{}, nil
	case 1:
		for _, c := range claims {
			win = c
		}
	default:
		if win = claims[proof]; win == nil {
			win = onboardedClaim(claims)
		}
		if win == nil {
			var m match
			for _, p := range slices.Sorted(maps.Keys(claims)) {
				m.held = append(m.held, claims[p].hosts()...)
			}
			return m, nil
		}
	}
	var m match
	for _, c := range claims {
		if c != win {
			m.conflict = append(m.conflict, c.hosts()...)
		}
	}
	switch byUUID, bySerial := win.byUUID, win.bySerial; {
	case byUUID != nil && len(bySerial) > 0:
		m.mismatch = append([]*eim.DeviceClaim{byUUID}, bySerial...)
	case byUUID != nil:
		// A placeholder serial in the registration identifies nothing, so
		// it cannot disagree with the device.
		if id.serial != "" && !eim.PlaceholderSerial(byUUID.SerialNumber) && byUUID.SerialNumber != id.serial {
			m.mismatch = []*eim.DeviceClaim{byUUID}
		} else {
			m.host = byUUID
		}
	case len(bySerial) > 1:
		// The refusal names no host: the caller is not authenticated.
		return match{}, eim.Errorf(eim.EINVALID, "%s matches %d registrations; give them UUIDs or remove the duplicates", id, len(bySerial))
	default:
		m.host = bySerial[0]
	}
	return m, nil
}
