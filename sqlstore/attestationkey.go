package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/eimhq/eim"
)

// Hosts' pinned TPM attestation keys (eim.AttestationKeyStore): the table
// attestation_keys, scoped to the project like the resource tables
// (row-level security on PostgreSQL). Not in the change feed; a pin is in
// the audit log.

var _ eim.AttestationKeyStore = (*Store)(nil)

// UseAttestationKey implements eim.AttestationKeyStore.
func (s *Store) UseAttestationKey(ctx context.Context, k *eim.AttestationKey) (*eim.AttestationKey, error) {
	if k.Project == "" || k.HostID == "" {
		return nil, eim.Errorf(eim.EINVALID, "attestation key: project and host required")
	}
	if len(k.Public) == 0 || k.Name == "" {
		return nil, eim.Errorf(eim.EINVALID, "attestation key: public area and name required")
	}
	now := eim.NewTime(s.now())
	var out *eim.AttestationKey
	err := s.run(ctx, k.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		if !t.exists(ctx, "SELECT 1 FROM hosts WHERE project = ? AND id = ?", k.Project, k.HostID) {
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", k.HostID)
		}
		// FOR UPDATE on PostgreSQL: two quotes of one host at once take
		// their turns, so a nonce is used once.
		pinned, err := s.readAttestationKey(ctx, t, k.Project, k.HostID, s.d.pg)
		if err != nil {
			return err
		}
		switch {
		case pinned == nil:
			// A first pin racing another (PostgreSQL locks no row that
			// does not exist yet): the one that did not insert runs again
			// and finds the winner's.
			var res sql.Result
			res, err = t.exec(ctx, "INSERT INTO attestation_keys (project, host_id, public, name, ek_name, ek_cert_issuer, ek_cert_serial, pinned_at, nonce_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, host_id) DO NOTHING",
				k.Project, k.HostID, hex.EncodeToString(k.Public), k.Name, k.EKName, k.EKCertIssuer, k.EKCertSerial, now.UnixMilli(), k.NonceAt)
			if err != nil {
				return t.fail(s.d.translate(fmt.Errorf("pin attestation key: %w", err), nil))
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errRaced
			}
			changes := map[string]eim.Change{
				"name":   {Old: jsonNull, New: jsonString(k.Name)},
				"ekName": {Old: jsonNull, New: jsonString(k.EKName)},
			}
			if k.EKCertSerial != "" {
				changes["ekCertificateIssuer"] = eim.Change{Old: jsonNull, New: jsonString(k.EKCertIssuer)}
				changes["ekCertificateSerial"] = eim.Change{Old: jsonNull, New: jsonString(k.EKCertSerial)}
			}
			t.addAudit(ctx, k.Project, eim.KindAttestationKey, k.HostID, eim.OpCreated, changes)
			p := *k
			p.PinnedAt = now
			out = &p
			return nil
		case pinned.Name != k.Name || pinned.EKName != k.EKName:
			out = pinned
			return nil
		case k.NonceAt <= pinned.NonceAt:
			return eim.Errorf(eim.ECONFLICT, "the nonce of this quote was used already (issued at or before the last one accepted from host %s)", k.HostID)
		}
		// A key pinned on first use whose EK's certificate is now checked
		// (CAs configured since) records it; one checked keeps its own
		// unless a quote names another.
		if k.EKCertSerial != "" {
			pinned.EKCertIssuer, pinned.EKCertSerial = k.EKCertIssuer, k.EKCertSerial
		}
		if _, err := t.exec(ctx, "UPDATE attestation_keys SET nonce_at = ?, ek_cert_issuer = ?, ek_cert_serial = ? WHERE project = ? AND host_id = ?",
			k.NonceAt, pinned.EKCertIssuer, pinned.EKCertSerial, k.Project, k.HostID); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("use attestation key: %w", err), nil))
		}
		pinned.NonceAt = k.NonceAt
		out = pinned
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AttestationKey implements eim.AttestationKeyStore.
func (s *Store) AttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error) {
	var out *eim.AttestationKey
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		out, err = s.readAttestationKey(ctx, etx.(*tx), project, hostID, false)
		if err == nil && out == nil {
			err = eim.Errorf(eim.ENOTFOUND, "host %s has no attestation key pinned", hostID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ResetAttestationKey implements eim.AttestationKeyStore.
func (s *Store) ResetAttestationKey(ctx context.Context, project, hostID string) (*eim.AttestationKey, error) {
	var out *eim.AttestationKey
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		if !t.exists(ctx, "SELECT 1 FROM hosts WHERE project = ? AND id = ?", project, hostID) {
			return eim.Errorf(eim.ENOTFOUND, "host %s not found", hostID)
		}
		k, err := s.readAttestationKey(ctx, t, project, hostID, s.d.pg)
		if err != nil {
			return err
		}
		if k == nil {
			return eim.Errorf(eim.ENOTFOUND, "host %s has no attestation key pinned", hostID)
		}
		if _, err := t.exec(ctx, "DELETE FROM attestation_keys WHERE project = ? AND host_id = ?", project, hostID); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("reset attestation key: %w", err), nil))
		}
		t.addAudit(ctx, project, eim.KindAttestationKey, hostID, eim.OpDeleted, map[string]eim.Change{
			"name":   {Old: jsonString(k.Name), New: jsonNull},
			"ekName": {Old: jsonString(k.EKName), New: jsonNull},
		})
		out = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readAttestationKey reads the key pinned to the host in t, nil when none
// is; forUpdate locks its row (PostgreSQL).
func (s *Store) readAttestationKey(ctx context.Context, t *tx, project, hostID string, forUpdate bool) (*eim.AttestationKey, error) {
	q := "SELECT public, name, ek_name, ek_cert_issuer, ek_cert_serial, pinned_at, nonce_at FROM attestation_keys WHERE project = ? AND host_id = ?"
	if forUpdate {
		q += " FOR UPDATE"
	}
	rows, err := t.query(ctx, q, project, hostID)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read attestation key: %w", err), nil))
	}
	defer rows.Close()
	var k *eim.AttestationKey
	for rows.Next() {
		var pub string
		var at int64
		r := eim.AttestationKey{Project: project, HostID: hostID}
		if err := rows.Scan(&pub, &r.Name, &r.EKName, &r.EKCertIssuer, &r.EKCertSerial, &at, &r.NonceAt); err != nil {
			return nil, t.fail(err)
		}
		if r.Public, err = hex.DecodeString(pub); err != nil {
			return nil, t.fail(fmt.Errorf("read attestation key of %s: %w", hostID, err))
		}
		r.PinnedAt = eim.TimeFromUnixMilli(at)
		k = &r
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read attestation key: %w", err), nil))
	}
	return k, nil
}
