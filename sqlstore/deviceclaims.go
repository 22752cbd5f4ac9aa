package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/eimhq/eim"
)

// The onboarding module's typed operations on the hosts a calling device
// may be (eim.DeviceClaims): the registrations of its UUID and serial
// number are read through their indexes as the columns Discover decides
// on (with the ID, current state and security feature of each host's
// instance), never as whole hosts with their hardware; what the decision
// changes is written with Tx.UpdateFields(If), audited and in the feed as
// the inventory's field writes were.

var _ eim.DeviceClaims = deviceClaims{}

// deviceClaims runs its write transactions through run.
type deviceClaims struct {
	s   *Store
	run eim.TxRunner
}

// DeviceClaims implements eim.Store.
func (s *Store) DeviceClaims(run eim.TxRunner) eim.DeviceClaims {
	if run == nil {
		run = storeRunner{s}
	}
	return deviceClaims{s: s, run: run}
}

// claimCols are the columns of a claim, in claimsWhere's order: the
// host's, then its instance's (at most one: instances_host_id_key).
const claimCols = "SELECT h.id, h.project, h.uuid, h.serial_number, h.desired_state, h.current_state, " +
	"h.registration_status, h.registration_status_indicator, h.registration_status_timestamp, h.node_cred_gen, " +
	"h.host_status, h.host_status_indicator, h.host_status_timestamp, " +
	"h.onboarding_status, h.onboarding_status_indicator, h.onboarding_status_timestamp, " +
	"h.secure_boot_state, h.secure_boot_state_timestamp, " +
	"COALESCE(i.id, ''), COALESCE(i.current_state, ''), COALESCE(i.security_feature, '') " +
	"FROM hosts h LEFT JOIN instances i ON i.project = h.project AND i.host_id = h.id WHERE "

// claimsOrder orders a device's claims: the earliest registrations first.
const claimsOrder = " ORDER BY h.created_at, h.id LIMIT ?"

// checkDevice validates a device's identity as the operations take it.
func checkDevice(uuid, serial string) error {
	if uuid == "" && serial == "" {
		return eim.Errorf(eim.EINVALID, "uuid and serialNumber: at least one is required")
	}
	if uuid != "" && !eim.ValidUUID(uuid) {
		return eim.Errorf(eim.EINVALID, "uuid: %q is not a UUID", uuid)
	}
	return nil
}

// Claims implements eim.DeviceClaims.
func (d deviceClaims) Claims(ctx context.Context, uuid, serial string) (eim.DeviceClaimSet, error) {
	if err := checkDevice(uuid, serial); err != nil {
		return eim.DeviceClaimSet{}, err
	}
	var out eim.DeviceClaimSet
	err := d.s.View(ctx, "", func(etx eim.Tx) error {
		var err error
		out, err = etx.(*tx).claims(ctx, uuid, serial)
		return err
	})
	return out, err
}

// RecordDiscover implements eim.DeviceClaims.
func (d deviceClaims) RecordDiscover(ctx context.Context, uuid, serial string, decide func(eim.DeviceClaimSet) ([]eim.ClaimChange, error)) error {
	if err := checkDevice(uuid, serial); err != nil {
		return err
	}
	return d.run.DoIn(ctx, "", func(etx eim.Tx) error {
		t, ok := etx.(*tx)
		if !ok || t.s != d.s {
			return eim.Errorf(eim.EINTERNAL, "device claims: the transaction runner is not over this store")
		}
		set, err := t.claims(ctx, uuid, serial)
		if err != nil {
			return err
		}
		chs, err := decide(set)
		if err != nil {
			return err
		}
		for _, ch := range chs {
			if err := t.writeClaim(ctx, set, ch); err != nil {
				return err
			}
		}
		return nil
	})
}

// claims reads the claims of a device.
func (t *tx) claims(ctx context.Context, uuid, serial string) (eim.DeviceClaimSet, error) {
	var (
		set eim.DeviceClaimSet
		err error
	)
	if uuid != "" {
		// The redundant term lets the planners use the partial index.
		set.ByUUID, err = t.claimsWhere(ctx, "lower(h.uuid) = ? AND h.uuid <> ''", strings.ToLower(uuid))
		if err != nil {
			return set, fmt.Errorf("look up uuid: %w", err)
		}
	}
	if serial != "" {
		set.BySerial, err = t.claimsWhere(ctx, "h.serial_number = ?", serial)
		if err != nil {
			return set, fmt.Errorf("look up serial: %w", err)
		}
	}
	return set, nil
}

func (t *tx) claimsWhere(ctx context.Context, where string, arg string) ([]*eim.DeviceClaim, error) {
	rows, err := t.query(ctx, claimCols+where+claimsOrder, arg, eim.MaxDeviceClaims)
	if err != nil {
		return nil, t.fail(t.s.d.translate(err, nil))
	}
	defer rows.Close()
	var out []*eim.DeviceClaim
	for rows.Next() {
		var (
			c                         eim.DeviceClaim
			desired, current          string
			reg, regInd, hst, hstInd  string
			onb, onbInd, sb           string
			inSt, inFeature           string
			regTS, hstTS, onbTS, sbTS int64
		)
		if err := rows.Scan(&c.ID, &c.Project, &c.UUID, &c.SerialNumber, &desired, &current, &reg, &regInd, &regTS, &c.CredGen,
			&hst, &hstInd, &hstTS, &onb, &onbInd, &onbTS, &sb, &sbTS, &c.InstanceID, &inSt, &inFeature); err != nil {
			return nil, t.fail(err)
		}
		c.DesiredState, c.CurrentState = eim.HostState(desired), eim.HostState(current)
		c.Registration = eim.StatusValue{Text: reg, Indicator: eim.StatusIndication(regInd), Timestamp: uint64(regTS)}
		c.HostStatus = eim.StatusValue{Text: hst, Indicator: eim.StatusIndication(hstInd), Timestamp: uint64(hstTS)}
		c.Onboarding = eim.StatusValue{Text: onb, Indicator: eim.StatusIndication(onbInd), Timestamp: uint64(onbTS)}
		c.SecureBoot, c.SecureBootAt = eim.SecureBootState(sb), uint64(sbTS)
		c.InstanceState, c.SecurityFeature = eim.InstanceState(inSt), eim.SecurityFeature(inFeature)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(t.s.d.translate(err, nil))
	}
	return out, nil
}

// writeClaim writes ch, a change of one of set's hosts, as the
// inventory's field writes of it did: the registration status, the
// Secure Boot state, the host status over the one read, the onboarding
// status of a refusal, then the credentials over the generation read
// while the host is still to be onboarded (the UUID and serial number only
// where the host has none).
func (t *tx) writeClaim(ctx context.Context, set eim.DeviceClaimSet, ch eim.ClaimChange) error {
	var claim *eim.DeviceClaim
	for _, c := range append(append([]*eim.DeviceClaim(nil), set.ByUUID...), set.BySerial...) {
		if c.ID == ch.ID && c.Project == ch.Project {
			claim = c
			break
		}
	}
	if claim == nil {
		return eim.Errorf(eim.EINVALID, "hostId: host %s of project %s is not one of the device's claims", ch.ID, ch.Project)
	}
	if err := ch.Check(claim); err != nil {
		return err
	}
	if s := ch.Registration; s != nil {
		v := unspecifiedStatus(*s)
		w := &eim.Host{Meta: eim.Meta{ResourceID: claim.ID}, RegistrationStatus: v.Text,
			RegistrationStatusIndicator: v.Indicator, RegistrationStatusTimestamp: v.Timestamp}
		if err := t.UpdateFields(ctx, w, "registrationStatus", "registrationStatusIndicator", "registrationStatusTimestamp"); err != nil {
			return err
		}
		claim.Registration = v
	}
	if sb := ch.SecureBoot; sb != nil {
		w := &eim.Host{Meta: eim.Meta{ResourceID: claim.ID}, SecureBootState: sb.State, SecureBootStateTimestamp: sb.At}
		if err := t.UpdateFields(ctx, w, "secureBootState", "secureBootStateTimestamp"); err != nil {
			return err
		}
		claim.SecureBoot, claim.SecureBootAt = sb.State, sb.At
	}
	if s := ch.HostStatus; s != nil {
		v := unspecifiedStatus(*s)
		w := &eim.Host{Meta: eim.Meta{ResourceID: claim.ID}, HostStatus: v.Text, HostStatusIndicator: v.Indicator, HostStatusTimestamp: v.Timestamp}
		when := []eim.Cond{{Field: "hostStatus", Value: claim.HostStatus.Text}, {Field: "hostStatusIndicator", Value: claim.HostStatus.Indicator}}
		if err := t.UpdateFieldsIf(ctx, w, when, "hostStatus", "hostStatusIndicator", "hostStatusTimestamp"); err != nil {
			return err
		}
		claim.HostStatus = v
	}
	if s := ch.Onboarding; s != nil {
		v := unspecifiedStatus(*s)
		w := &eim.Host{Meta: eim.Meta{ResourceID: claim.ID}, OnboardingStatus: v.Text,
			OnboardingStatusIndicator: v.Indicator, OnboardingStatusTimestamp: v.Timestamp}
		if err := t.UpdateFields(ctx, w, "onboardingStatus", "onboardingStatusIndicator", "onboardingStatusTimestamp"); err != nil {
			return err
		}
		claim.Onboarding = v
	}
	if o := ch.Credentials; o != nil {
		st := unspecifiedStatus(o.Status)
		w := &eim.Host{Meta: eim.Meta{ResourceID: claim.ID}, NodeSecretHash: o.SecretHash, NodeCredGen: claim.CredGen + 1,
			CurrentState: eim.HostStateOnboarded, OnboardingStatus: st.Text, OnboardingStatusIndicator: st.Indicator,
			OnboardingStatusTimestamp: st.Timestamp}
		fields := []string{"node_secret_hash", "node_cred_gen", "currentState", "onboardingStatus", "onboardingStatusIndicator", "onboardingStatusTimestamp"}
		when := []eim.Cond{{Field: "desiredState", Value: eim.HostStateOnboarded}, {Field: "node_cred_gen", Value: claim.CredGen}}
		if claim.UUID == "" && o.UUID != "" {
			w.UUID = o.UUID
			fields = append(fields, "uuid")
			when = append(when, eim.Cond{Field: "uuid", Value: ""})
		}
		if claim.SerialNumber == "" && o.SerialNumber != "" {
			w.SerialNumber = o.SerialNumber
			fields = append(fields, "serialNumber")
			when = append(when, eim.Cond{Field: "serialNumber", Value: ""})
		}
		if err := t.UpdateFieldsIf(ctx, w, when, fields...); err != nil {
			return err
		}
		claim.CredGen, claim.CurrentState, claim.Onboarding = w.NodeCredGen, eim.HostStateOnboarded, st
		if w.UUID != "" {
			claim.UUID = w.UUID
		}
		if w.SerialNumber != "" {
			claim.SerialNumber = w.SerialNumber
		}
	}
	return nil
}
