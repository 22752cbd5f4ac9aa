package sqlstore

import (
	"context"
	"fmt"

	"github.com/eimhq/eim"
)

// The metadata pairs posted for a project's label suggestions
// (eim.Store). The table is the store's own role's (no tenant grant on
// PostgreSQL): every statement names the project.

// MetadataPairs implements eim.Store.
func (s *Store) MetadataPairs(ctx context.Context, project string) ([]eim.MetadataItem, error) {
	var out []eim.MetadataItem
	err := s.run(ctx, "", false, func(etx eim.Tx) error {
		t := etx.(*tx)
		rows, err := t.query(ctx, "SELECT label_key, label_value FROM metadata_pairs WHERE project = ? ORDER BY label_key, label_value", project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("metadata pairs: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			var it eim.MetadataItem
			if err := rows.Scan(&it.Key, &it.Value); err != nil {
				return t.fail(err)
			}
			out = append(out, it)
		}
		if err := rows.Err(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("metadata pairs: %w", err), nil))
		}
		return nil
	})
	return out, err
}

// RecordMetadataPairs implements eim.Store.
func (s *Store) RecordMetadataPairs(ctx context.Context, project string, pairs []eim.MetadataItem) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", project) {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", project)
		}
		for _, it := range pairs {
			if _, err := t.exec(ctx, "INSERT INTO metadata_pairs (project, label_key, label_value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
				project, it.Key, it.Value); err != nil {
				return t.fail(s.d.translate(fmt.Errorf("record metadata pairs: %w", err), nil))
			}
		}
		return nil
	})
}

// ForgetMetadataPair implements eim.Store.
func (s *Store) ForgetMetadataPair(ctx context.Context, project string, pair eim.MetadataItem) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		res, err := t.exec(ctx, "DELETE FROM metadata_pairs WHERE project = ? AND label_key = ? AND label_value = ?", project, pair.Key, pair.Value)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("forget metadata pair: %w", err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(err)
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "metadata %s=%s is not recorded", pair.Key, pair.Value)
		}
		return nil
	})
}
