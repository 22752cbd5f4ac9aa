package onboarding

import (
	"context"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
	onboardingv1 "github.com/eimhq/eim/proto/eim/onboarding/v1"
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
	host *eim.Host // the one host the device is; nil when unknown
	// mismatch holds the hosts the UUID and the serial point at when they
	// differ (registration error on both).
	mismatch []*eim.Host
}

// lookup finds the host of a device across all projects (tx unscoped):
// by UUID first, then by serial number.
func lookup(ctx context.Context, tx eim.Tx, id identity) (match, error) {
	var byUUID *eim.Host
	if id.uuid != "" {
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "uuid", Value: id.uuid}}, Limit: 2, NoTotal: true})
		if err != nil {
			return match{}, fmt.Errorf("look up uuid: %w", err)
		}
		if len(items) > 1 {
			return match{}, eim.Errorf(eim.EINVALID, "%s matches %d hosts", id, len(items))
		}
		if len(items) == 1 {
			byUUID = items[0].(*eim.Host)
		}
	}
	var bySerial []*eim.Host
	if id.serial != "" {
		items, _, err := tx.List(ctx, eim.KindHost, eim.Query{Where: []eim.Cond{{Field: "serialNumber", Value: id.serial}}, Limit: 16, NoTotal: true})
		if err != nil {
			return match{}, fmt.Errorf("look up serial: %w", err)
		}
		for _, r := range items {
			h := r.(*eim.Host)
			// A host registered with a UUID is that UUID's machine; another
			// board with the same serial is not it.
			if byUUID != nil && h.ResourceID == byUUID.ResourceID {
				continue
			}
			if h.UUID != "" && id.uuid != "" {
				continue
			}
			bySerial = append(bySerial, h)
		}
	}
	switch {
	case byUUID != nil && len(bySerial) > 0:
		return match{mismatch: append([]*eim.Host{byUUID}, bySerial...)}, nil
	case byUUID != nil:
		// A placeholder serial in the registration identifies nothing, so
		// it cannot disagree with the device.
		if id.serial != "" && !eim.PlaceholderSerial(byUUID.SerialNumber) && byUUID.SerialNumber != id.serial {
			return match{mismatch: []*eim.Host{byUUID}}, nil
		}
		return match{host: byUUID}, nil
	case len(bySerial) > 1:
		return match{}, eim.Errorf(eim.EINVALID, "%s matches %d hosts (%s, %s…); give them UUIDs or remove the duplicates", id, len(bySerial), bySerial[0].ResourceID, bySerial[1].ResourceID)
	case len(bySerial) == 1:
		return match{host: bySerial[0]}, nil
	}
	return match{}, nil
}
