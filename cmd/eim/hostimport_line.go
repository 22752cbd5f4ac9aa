package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/client"
)

// How a line's host is brought to the state the line describes, from
// whatever state it is in: level-based, so that an import cut off at any
// point (the server killed, the CLI interrupted, a request whose answer was
// lost) is finished by running it again, and a host is never made twice.
//
// A host is made in up to four steps: registered, placed (site and
// metadata, one PATCH), given its instance, then named. Until the last
// step it carries the import's marker as its name ("import:" and a digest
// of its UUID and serial number), so a later run recognises a host an
// earlier run left half made and finishes it. A host without the marker
// (registered by hand, or by an older eim) is taken as it is only when it
// already matches the line in full; a host that lacks something, or has
// something else, is refused with what differs. A line with nothing to add
// after the registration (no site, metadata or OS) is registered under
// its final name at once: it is never half made.

// Line statuses, as printed.
const (
	statusImported  = "imported"  // made by this run
	statusCompleted = "completed" // half made by an earlier run, finished by this one
	statusUnchanged = "unchanged" // already as the line describes
)

// importMarkerPrefix starts the name of a host an import is still making.
const importMarkerPrefix = "import:"

// importMarker is the name an import gives a host until it is complete:
// the prefix and a digest of the line's identity, 20 characters (the most
// a registration's name may have).
func (l *importLine) importMarker() string {
	sum := sha256.Sum256([]byte(strings.ToLower(l.uuid) + "/" + strings.ToLower(l.serial)))
	return importMarkerPrefix + hex.EncodeToString(sum[:])[:20-len(importMarkerPrefix)]
}

// finalName is a complete host's name: its serial number or, without one,
// its UUID (the name registration gives a host it is not told).
func (l *importLine) finalName() string {
	return cmp.Or(l.serial, strings.ToLower(l.uuid))
}

// atOnce reports whether the line's host is complete once registered.
func (l *importLine) atOnce() bool {
	return l.siteID == "" && len(l.md) == 0 && l.osID == "" && l.bmc == nil
}

// hostGap is what an existing host lacks of what its line describes.
type hostGap struct {
	bmc      bool // its BMC
	place    bool // its site and metadata
	instance bool
	rename   bool // it still carries the import's marker
}

func (g hostGap) none() bool { return !g.bmc && !g.place && !g.instance && !g.rename }

// bmcKinds are the hosts' bmcKind of a BMC's protocol (set by the oob
// module when the BMC is put).
var bmcKinds = map[string]eim.BaremetalControllerKind{
	string(eim.BMCIPMI): eim.BaremetalControllerKindIPMI, string(eim.BMCAMT): eim.BaremetalControllerKindVPRO,
	string(eim.BMCRedfish): eim.BaremetalControllerKindRedfish,
}

// bmcHostOf is the host part of a BMC's address (the host's bmcIp).
func bmcHostOf(addr string) string {
	if strings.Contains(addr, "://") {
		if u, err := url.Parse(addr); err == nil {
			return u.Hostname()
		}
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return strings.Trim(addr, "[]")
}

// compare checks the line's host h (not being deleted) against the line.
// What contradicts the line is an error saying what differs; what is
// missing is the gap, allowed only on a host an import made.
func (l *importLine) compare(h *eim.Host) (hostGap, error) {
	var g hostGap
	var diffs []string
	differ := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	if l.uuid != "" && !strings.EqualFold(h.UUID, l.uuid) {
		differ("UUID %s, not %s", cmp.Or(h.UUID, "none"), l.uuid)
	}
	if l.serial != "" && !strings.EqualFold(h.SerialNumber, l.serial) {
		differ("serial number %s, not %s", cmp.Or(h.SerialNumber, "none"), l.serial)
	}
	if l.lvmGB != 0 && h.UserLvmSize != l.lvmGB {
		differ("LVMSize %d, not %d", h.UserLvmSize, l.lvmGB)
	}
	if l.amtOn && h.DesiredAmtState != eim.AmtStateProvisioned {
		differ("AMT not enabled")
	}
	if l.bmc != nil {
		switch k := h.BmcKind; {
		case k == "" || k == eim.BaremetalControllerKindUnspecified || k == eim.BaremetalControllerKindNone:
			g.bmc = true
		case k != bmcKinds[l.bmc.Protocol] || h.BmcIP != bmcHostOf(l.bmc.Address):
			differ("BMC %s at %s, not %s at %s", k, cmp.Or(h.BmcIP, "none"), l.bmc.Protocol, bmcHostOf(l.bmc.Address))
		}
	}
	switch {
	case h.SiteID == l.siteID:
	case h.SiteID == "":
		g.place = true
	default:
		differ("site %s, not %s", h.SiteID, cmp.Or(l.siteID, "none"))
	}
	switch {
	case sameMetadata(h.Metadata, l.md):
	case len(h.Metadata) == 0:
		g.place = true
	default:
		differ("metadata %s, not %s", formatMetadata(h.Metadata), cmp.Or(formatMetadata(l.md), "none"))
	}
	switch in := h.Instance; {
	case in == nil && l.osID != "":
		g.instance = true
	case in == nil:
	case l.osID == "":
		differ("instance %s, the line names no OSProfile", in.ResourceID)
	default:
		if in.OSID != l.osID {
			differ("instance %s of OS %s, not %s", in.ResourceID, in.OSID, l.osID)
		}
		if in.SecurityFeature != l.secFeature {
			differ("instance %s with %s, not %s", in.ResourceID, in.SecurityFeature, l.secFeature)
		}
		if in.LocalAccountID != l.accountID {
			differ("instance %s with local account %s, not %s", in.ResourceID, cmp.Or(in.LocalAccountID, "none"), cmp.Or(l.accountID, "none"))
		}
		if !sameSet(in.CustomConfigIDs, l.configIDs) {
			differ("instance %s with custom configs %s, not %s", in.ResourceID, cmp.Or(strings.Join(in.CustomConfigIDs, "&"), "none"), cmp.Or(strings.Join(l.configIDs, "&"), "none"))
		}
	}
	if len(diffs) > 0 {
		return g, fmt.Errorf("host %s is already registered with %s", h.ResourceID, strings.Join(diffs, ", "))
	}
	g.rename = h.Name == l.importMarker()
	if (g.bmc || g.place || g.instance) && !g.rename {
		var missing []string
		if g.bmc {
			missing = append(missing, "its BMC")
		}
		if g.place {
			missing = append(missing, "its site and metadata")
		}
		if g.instance {
			missing = append(missing, "its instance")
		}
		return g, fmt.Errorf("host %s is already registered without %s, and not by eim host import (its name is %q): complete it by hand or delete it", h.ResourceID, strings.Join(missing, " and "), h.Name)
	}
	return g, nil
}

func sameMetadata(a, b eim.Metadata) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(m eim.MetadataItem) string { return m.Key + "=" + m.Value }
	return sameSet(mapSlice(a, key), mapSlice(b, key))
}

func formatMetadata(md eim.Metadata) string {
	return strings.Join(mapSlice(md, func(m eim.MetadataItem) string { return m.Key + "=" + m.Value }), "&")
}

func mapSlice[T, U any](s []T, f func(T) U) []U {
	out := make([]U, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Compact(slices.Sorted(slices.Values(a))), slices.Compact(slices.Sorted(slices.Values(b))))
}

// identityFilter finds the hosts a line's UUID or serial number names.
func (l *importLine) identityFilter() string {
	var conds []string
	if l.uuid != "" {
		conds = append(conds, fmt.Sprintf("uuid=%q", strings.ToLower(l.uuid))) // stored lowercase
	}
	if l.serial != "" {
		conds = append(conds, fmt.Sprintf("serialNumber=%q", l.serial))
	}
	return strings.Join(conds, " OR ")
}

// pickHost chooses the line's host among the hosts its identity found: the
// live one; a host being deleted only when there is no live one (the line
// waits for it to go); an error when the UUID and the serial number name
// two live hosts.
func (l *importLine) pickHost(hosts []*eim.Host) (*eim.Host, error) {
	var live, deleting *eim.Host
	for _, h := range hosts {
		named := (l.uuid != "" && strings.EqualFold(h.UUID, l.uuid)) || (l.serial != "" && strings.EqualFold(h.SerialNumber, l.serial))
		switch {
		case !named:
		case h.DesiredState == eim.HostStateDeleted:
			deleting = h
		case live != nil && live.ResourceID != h.ResourceID:
			return nil, fmt.Errorf("UUID %s and serial number %s are registered as two hosts, %s and %s", l.uuid, l.serial, live.ResourceID, h.ResourceID)
		default:
			live = h
		}
	}
	if live != nil {
		return live, nil
	}
	return deleting, nil
}

// importer makes the lines' hosts.
type importer struct {
	cl          *client.Client
	project     string
	autoOnboard bool
	wait        *serverWait
}

// lookup reads the line's host again, after a request whose outcome is
// unknown or that found the host in another state than expected.
func (im *importer) lookup(ctx context.Context, l *importLine) (*eim.Host, error) {
	var hosts []*eim.Host
	err := im.wait.do(ctx, func() error {
		var err error
		hosts, _, err = client.ListOf[eim.Host](context.WithoutCancel(ctx), im.cl, im.project, client.ListOptions{Filter: l.identityFilter(), PageSize: 10})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look the host up: %w", err)
	}
	return l.pickHost(hosts)
}

// maxLineTries bounds the steps of one line that found the host otherwise
// than expected (someone else changing it at the same time).
const maxLineTries = 10

// deletingWait is how long a line waits for a host being deleted to go.
const deletingWait = 30 * time.Second

// importOne brings the host of l to the state the line describes,
// starting from l.found (what the check saw), and sets l's outcome. It
// returns an error only when the whole import must stop: the server did
// not come back within the bound, or ctx ended while waiting for it.
//
// A step once sent runs to its end even when ctx ends (an interrupted
// import): ctx only cuts the waits.
func (im *importer) importOne(ctx context.Context, l *importLine) error {
	rctx := context.WithoutCancel(ctx)
	h := l.found
	registered := h == nil // by this run: undone if a later step is refused
	if h == nil {
		l.status = statusImported
	}
	var deletingSince time.Time
	tries, pauses := 0, 0
	for {
		// failed ends the line on a refused step (undoing the host this run
		// registered) or on an outage that outlasted the wait.
		failed := func(step string, err error) error {
			if errors.Is(err, errServerGone) || errors.Is(err, errWaitInterrupted) {
				// Where the host stands is unknown: nothing to undo, and
				// nothing that a later run cannot finish.
				l.importError = step + ": " + err.Error() + "; importing the line again finishes it"
				return err
			}
			l.importError = step + ": " + eim.ErrorMessage(err)
			switch {
			case h == nil:
			case registered && h.Instance == nil:
				im.undo(ctx, l, h.ResourceID)
			default:
				l.importError += fmt.Sprintf(" (host %s is left half made: importing the line again, once fixed, finishes it)", h.ResourceID)
				l.hostID = ""
			}
			return nil
		}
		// retry decides what follows a failed step: after an outage or a
		// conflict, the host is looked up again and the loop goes on.
		retry := func(step string, err error) (bool, error) {
			switch {
			case unavailable(err):
				if err := im.wait.pause(ctx, err, pauses); err != nil {
					return false, failed(step, err)
				}
				pauses++
			case eim.ErrorCode(err) == eim.ECONFLICT && tries < maxLineTries:
				tries++
			default:
				return false, failed(step, err)
			}
			nh, lerr := im.lookup(ctx, l)
			if lerr != nil {
				return false, failed(step, lerr)
			}
			h = nh
			return true, nil
		}

		if h != nil && h.DesiredState == eim.HostStateDeleted {
			// Being deleted (an earlier run's undo, or a human): its UUID and
			// serial number are free once it is gone.
			if deletingSince.IsZero() {
				deletingSince = time.Now()
			}
			if time.Since(deletingSince) > deletingWait {
				l.importError = fmt.Sprintf("host %s, registered with this identity, is still being deleted; import the line again once it is gone", h.ResourceID)
				return nil
			}
			select {
			case <-ctx.Done():
				l.importError = "interrupted while waiting for host " + h.ResourceID + " to be deleted"
				return nil
			case <-time.After(200 * time.Millisecond):
			}
			nh, err := im.lookup(ctx, l)
			if err != nil {
				return failed("look the host up", err)
			}
			h = nh
			continue
		}
		if h == nil {
			name := l.importMarker()
			if l.atOnce() {
				name = l.finalName()
			}
			nh, err := im.cl.RegisterHost(rctx, im.project, client.HostRegistration{
				Name: name, SerialNumber: l.serial, UUID: l.uuid, AutoOnboard: im.autoOnboard, EnableVpro: l.amtOn, UserLvmSize: l.lvmGB,
			})
			if err != nil {
				if again, err := retry("register", err); !again {
					return err
				}
				continue
			}
			im.wait.ok()
			h = nh
			continue
		}
		g, err := l.compare(h)
		if err != nil {
			l.importError = err.Error()
			return nil
		}
		if l.status == "" {
			l.status = statusUnchanged
			if !g.none() {
				l.status = statusCompleted
			}
		}
		l.hostID = h.ResourceID
		switch {
		case g.bmc:
			// First, so that a BMC the server refuses leaves nothing of
			// the line (the host registered by this run is deleted again).
			if _, err := im.cl.PutBMC(rctx, im.project, h.ResourceID, *l.bmc); err != nil {
				if again, err := retry("put the BMC", err); !again {
					return err
				}
				continue
			}
			im.wait.ok()
			h.BmcKind, h.BmcIP = bmcKinds[l.bmc.Protocol], bmcHostOf(l.bmc.Address)
		case g.place:
			// The name too when nothing follows; otherwise the marker stays
			// until the instance is made.
			patch := map[string]any{}
			if l.siteID != "" {
				patch["siteId"] = l.siteID
			}
			if len(l.md) > 0 {
				patch["metadata"] = l.md
			}
			if !g.instance {
				patch["name"] = l.finalName()
			}
			if err := im.cl.Patch(rctx, im.project, eim.KindHost, h.ResourceID, patch, nil); err != nil {
				if again, err := retry("place the host", err); !again {
					return err
				}
				continue
			}
			im.wait.ok()
			h.SiteID, h.Metadata = l.siteID, l.md
			if !g.instance {
				h.Name = l.finalName()
			}
		case g.instance:
			in := map[string]any{
				"name": l.finalName(), "kind": eim.InstanceKindMetal, "hostID": h.ResourceID, "osID": l.osID, "securityFeature": l.secFeature,
			}
			if l.accountID != "" {
				in["localAccountID"] = l.accountID
			}
			if len(l.configIDs) > 0 {
				in["customConfigID"] = l.configIDs
			}
			var inst eim.Instance
			if err := im.cl.Create(rctx, im.project, eim.KindInstance, in, &inst); err != nil {
				if again, err := retry("create the instance", err); !again {
					return err
				}
				continue
			}
			im.wait.ok()
			h.Instance = &inst
		case g.rename:
			if err := im.cl.Patch(rctx, im.project, eim.KindHost, h.ResourceID, map[string]any{"name": l.finalName()}, nil); err != nil {
				if again, err := retry("name the host", err); !again {
					return err
				}
				continue
			}
			im.wait.ok()
			h.Name = l.finalName()
		default:
			if h.Instance != nil {
				l.instanceID = h.Instance.ResourceID
			}
			return nil
		}
	}
}

// undo deletes again the host this run registered for l, after a later
// step was refused, so that the line is either imported or in the error
// file.
func (im *importer) undo(ctx context.Context, l *importLine, hostID string) {
	err := im.wait.do(ctx, func() error {
		err := im.cl.Delete(context.WithoutCancel(ctx), im.project, eim.KindHost, hostID)
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil
		}
		return err
	})
	if err != nil {
		l.importError += fmt.Sprintf("; and host %s could not be deleted again: %s (importing the line again finishes it)", hostID, eim.ErrorMessage(err))
	} else {
		l.importError += fmt.Sprintf(" (host %s deleted again)", hostID)
	}
	l.hostID = ""
}
