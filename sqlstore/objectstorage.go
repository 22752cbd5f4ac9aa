package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/eimhq/eim"
)

// Projects' object storage settings (eim.ObjectStorageStore): the table
// object_storage, one row per project, scoped to the project like the
// resource tables (row-level security on PostgreSQL). Writes are audited
// (KindObjectStorage, the project's name) with the secret key redacted;
// they put no event in the change feed (the granter reads the setting
// when a device asks).

var _ eim.ObjectStorageStore = (*Store)(nil)

const objStorageCols = "project, endpoint, bucket, key_prefix, region, path_style, access_key_id, secret_key, ca_cert, max_file_size, reachable, created_at, updated_at, bucket_per_device"

func scanObjectStorage(sc interface{ Scan(...any) error }) (*eim.ObjectStorage, error) {
	var (
		o                eim.ObjectStorage
		reach            string
		created, updated int64
	)
	if err := sc.Scan(&o.Project, &o.Endpoint, &o.Bucket, &o.KeyPrefix, &o.Region, &o.PathStyle, &o.AccessKeyID,
		&o.SealedSecretKey, &o.CACert, &o.MaxFileSize, &reach, &created, &updated, &o.BucketPerDevice); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(reach), &o.Reachable); err != nil {
		return nil, fmt.Errorf("object storage of %s: reachable: %w", o.Project, err)
	}
	o.CreatedAt, o.UpdatedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated)
	return &o, nil
}

// getObjectStorage reads the project's setting in t (locked on PostgreSQL
// when lock); nil when there is none.
func (s *Store) getObjectStorage(ctx context.Context, t *tx, project string, lock bool) (*eim.ObjectStorage, error) {
	q := "SELECT " + objStorageCols + " FROM object_storage WHERE project = ?"
	if lock && s.d.pg {
		q += " FOR UPDATE"
	}
	rows, err := t.query(ctx, q, project)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read object storage: %w", err), nil))
	}
	defer rows.Close()
	var o *eim.ObjectStorage
	for rows.Next() {
		if o, err = scanObjectStorage(rows); err != nil {
			return nil, t.fail(err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read object storage: %w", err), nil))
	}
	return o, nil
}

// PutObjectStorage implements eim.ObjectStorageStore.
func (s *Store) PutObjectStorage(ctx context.Context, o *eim.ObjectStorage) error {
	if o.Project == "" {
		return eim.Errorf(eim.EINVALID, "object storage: project required")
	}
	now := eim.NewTime(s.now())
	reach := mustJSON(o.Reachable)
	return s.run(ctx, o.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", o.Project) {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", o.Project)
		}
		old, err := s.getObjectStorage(ctx, t, o.Project, true)
		if err != nil {
			return err
		}
		sealed := o.SealedSecretKey
		if sealed == "" {
			if old == nil {
				return eim.Errorf(eim.EINVALID, "secretAccessKey: required (the project has no object storage yet)")
			}
			sealed = old.SealedSecretKey
		}
		created := now
		if old != nil {
			created = old.CreatedAt
			_, err = t.exec(ctx, "UPDATE object_storage SET endpoint = ?, bucket = ?, key_prefix = ?, region = ?, path_style = ?, access_key_id = ?, secret_key = ?, ca_cert = ?, max_file_size = ?, reachable = ?, updated_at = ?, bucket_per_device = ? WHERE project = ?",
				o.Endpoint, o.Bucket, o.KeyPrefix, o.Region, o.PathStyle, o.AccessKeyID, sealed, o.CACert, o.MaxFileSize, string(reach), now.UnixMilli(), o.BucketPerDevice, o.Project)
		} else {
			// Two first puts of a project race (PostgreSQL: FOR UPDATE above
			// locks no row that does not exist yet): the one that did not
			// insert runs again, and replaces what the other wrote.
			var res sql.Result
			res, err = t.exec(ctx, "INSERT INTO object_storage ("+objStorageCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project) DO NOTHING",
				o.Project, o.Endpoint, o.Bucket, o.KeyPrefix, o.Region, o.PathStyle, o.AccessKeyID, sealed, o.CACert, o.MaxFileSize, string(reach), created.UnixMilli(), now.UnixMilli(), o.BucketPerDevice)
			if err == nil {
				if n, _ := res.RowsAffected(); n == 0 {
					return errRaced
				}
			}
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("put object storage: %w", err), nil))
		}
		op := eim.OpCreated
		if old != nil {
			op = eim.OpUpdated
		}
		t.addAudit(ctx, o.Project, eim.KindObjectStorage, o.Project, op, objectStorageChanges(old, o, sealed))
		o.SealedSecretKey, o.CreatedAt, o.UpdatedAt = sealed, created, now
		return nil
	})
}

// objectStorageChanges are the audit record's fields of a put of o over
// old (nil: none), the secret key redacted.
func objectStorageChanges(old, o *eim.ObjectStorage, sealed string) map[string]eim.Change {
	ch := map[string]eim.Change{}
	var prev eim.ObjectStorage
	if old != nil {
		prev = *old
	}
	field := func(name string, ov, nv any) {
		oj, nj := jsonNull, mustJSON(nv)
		if old != nil {
			oj = mustJSON(ov)
		}
		if string(oj) != string(nj) {
			ch[name] = eim.Change{Old: oj, New: nj}
		}
	}
	field("endpoint", prev.Endpoint, o.Endpoint)
	field("bucket", prev.Bucket, o.Bucket)
	field("keyPrefix", prev.KeyPrefix, o.KeyPrefix)
	field("region", prev.Region, o.Region)
	field("pathStyle", prev.PathStyle, o.PathStyle)
	field("accessKeyId", prev.AccessKeyID, o.AccessKeyID)
	field("caCert", prev.CACert, o.CACert)
	field("maxFileSize", prev.MaxFileSize, o.MaxFileSize)
	field("bucketPerDevice", prev.BucketPerDevice, o.BucketPerDevice)
	switch {
	case old == nil:
		ch["secretAccessKey"] = eim.Change{Old: jsonNull, New: json.RawMessage(eim.Redacted)}
	case old.SealedSecretKey != sealed:
		ch["secretAccessKey"] = eim.Change{Old: json.RawMessage(eim.Redacted), New: json.RawMessage(eim.Redacted)}
	}
	return ch
}

// GetObjectStorage implements eim.ObjectStorageStore.
func (s *Store) GetObjectStorage(ctx context.Context, project string) (*eim.ObjectStorage, error) {
	var o *eim.ObjectStorage
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		o, err = s.getObjectStorage(ctx, etx.(*tx), project, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	if o == nil {
		return nil, eim.Errorf(eim.ENOTFOUND, "project %s has no object storage", project)
	}
	return o, nil
}

// DeleteObjectStorage implements eim.ObjectStorageStore.
func (s *Store) DeleteObjectStorage(ctx context.Context, project string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "DELETE FROM object_storage WHERE project = ?", project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete object storage: %w", err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "project %s has no object storage", project)
		}
		t.addAudit(ctx, project, eim.KindObjectStorage, project, eim.OpDeleted, nil)
		return nil
	})
}
