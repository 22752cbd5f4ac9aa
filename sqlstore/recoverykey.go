package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/eimhq/eim"
)

// Instances' recovery keys (eim.RecoveryKeyStore): the table
// recovery_keys, scoped to the project like the resource tables (row-level
// security on PostgreSQL). A put is audited with the key redacted, and so
// is every read; neither puts an event in the change feed.

var _ eim.RecoveryKeyStore = (*Store)(nil)

// PutRecoveryKey implements eim.RecoveryKeyStore.
func (s *Store) PutRecoveryKey(ctx context.Context, k *eim.RecoveryKey) error {
	if k.Project == "" || k.InstanceID == "" {
		return eim.Errorf(eim.EINVALID, "recovery key: project and instance required")
	}
	if k.SealedKey == "" {
		return eim.Errorf(eim.EINVALID, "recovery key: sealed key required")
	}
	now := eim.NewTime(s.now())
	return s.run(ctx, k.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM instances WHERE project = ? AND id = ?", k.Project, k.InstanceID) {
			return eim.Errorf(eim.ENOTFOUND, "instance %s not found", k.InstanceID)
		}
		// FOR UPDATE on PostgreSQL: two escrows of one instance at once
		// take their turns, so the rule below sees the other's key.
		q := "SELECT attempt, key_digest, escrowed_at FROM recovery_keys WHERE project = ? AND instance_id = ?"
		if s.d.pg {
			q += " FOR UPDATE"
		}
		var kept *eim.RecoveryKey
		rows, err := t.query(ctx, q, k.Project, k.InstanceID)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("put recovery key: %w", err), nil))
		}
		for rows.Next() {
			var at int64
			r := eim.RecoveryKey{}
			if err := rows.Scan(&r.Attempt, &r.Digest, &at); err != nil {
				rows.Close()
				return t.fail(err)
			}
			r.EscrowedAt = eim.TimeFromUnixMilli(at)
			kept = &r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("put recovery key: %w", err), nil))
		}
		switch {
		case kept == nil:
		case k.Attempt == kept.Attempt && kept.Digest != "" && k.Digest == kept.Digest:
			// The same key again (the node's retry): nothing changes.
			k.EscrowedAt = kept.EscrowedAt
			return nil
		case k.Attempt <= kept.Attempt:
			return eim.Errorf(eim.EPRECONDITION, "instance %s has a recovery key escrowed by attempt %d of its provisioning (at %s); a new key replaces it only when the instance is provisioned again (a new attempt), so the kept key stays",
				k.InstanceID, kept.Attempt, kept.EscrowedAt.UTC().Format(time.RFC3339))
		}
		if kept != nil {
			_, err = t.exec(ctx, "UPDATE recovery_keys SET host_id = ?, volume_uuid = ?, sealed_key = ?, escrowed_at = ?, attempt = ?, key_digest = ? WHERE project = ? AND instance_id = ?",
				k.HostID, k.VolumeUUID, k.SealedKey, now.UnixMilli(), k.Attempt, k.Digest, k.Project, k.InstanceID)
		} else {
			// A first escrow racing another (PostgreSQL locks no row that
			// does not exist yet): the one that did not insert runs again.
			var res sql.Result
			res, err = t.exec(ctx, "INSERT INTO recovery_keys (project, instance_id, host_id, volume_uuid, sealed_key, escrowed_at, attempt, key_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, instance_id) DO NOTHING",
				k.Project, k.InstanceID, k.HostID, k.VolumeUUID, k.SealedKey, now.UnixMilli(), k.Attempt, k.Digest)
			if err == nil {
				if n, _ := res.RowsAffected(); n == 0 {
					return errRaced
				}
			}
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("put recovery key: %w", err), nil))
		}
		op := eim.OpCreated
		changes := map[string]eim.Change{
			"volumeUuid":  {Old: jsonNull, New: jsonString(k.VolumeUUID)},
			"hostId":      {Old: jsonNull, New: jsonString(k.HostID)},
			"recoveryKey": {Old: jsonNull, New: []byte(eim.Redacted)},
			"attempt":     {Old: jsonNull, New: jsonInt(k.Attempt)},
		}
		if kept != nil {
			op = eim.OpUpdated
			changes["attempt"] = eim.Change{Old: jsonInt(kept.Attempt), New: jsonInt(k.Attempt)}
		}
		t.addAudit(ctx, k.Project, eim.KindRecoveryKey, k.InstanceID, op, changes)
		k.EscrowedAt = now
		return nil
	})
}

// ReadRecoveryKey implements eim.RecoveryKeyStore.
func (s *Store) ReadRecoveryKey(ctx context.Context, project, instanceID string) (*eim.RecoveryKey, error) {
	var k *eim.RecoveryKey
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		k = nil
		rows, err := t.query(ctx, "SELECT host_id, volume_uuid, sealed_key, escrowed_at, attempt FROM recovery_keys WHERE project = ? AND instance_id = ?", project, instanceID)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read recovery key: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			var at int64
			r := eim.RecoveryKey{Project: project, InstanceID: instanceID}
			if err := rows.Scan(&r.HostID, &r.VolumeUUID, &r.SealedKey, &at, &r.Attempt); err != nil {
				return t.fail(err)
			}
			r.EscrowedAt = eim.TimeFromUnixMilli(at)
			k = &r
		}
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read recovery key: %w", err), nil))
		}
		if k == nil {
			return eim.Errorf(eim.ENOTFOUND, "instance %s has no recovery key (not found, or its disk is not encrypted)", instanceID)
		}
		t.addAudit(ctx, project, eim.KindRecoveryKey, instanceID, eim.AuditRead, map[string]eim.Change{})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

func jsonInt(v int) json.RawMessage {
	return json.RawMessage(strconv.Itoa(v))
}

func jsonString(v string) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
