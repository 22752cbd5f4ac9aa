package sqlstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFS embed.FS

// migration is one numbered SQL file of a dialect.
type migration struct {
	version int
	name    string
	sql     string
}

func migrations(d *dialect) ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql", e.Name())
		}
		b, err := migrationFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	return out, nil
}

// migrationLock is the PostgreSQL advisory lock key that serializes
// migrations of processes starting at once ("eimmigr").
const migrationLock = 0x65696d6d69677200

// migrate applies the pending migrations in order, all in one transaction,
// and records them in schema_migrations. On PostgreSQL an advisory lock
// makes concurrent starters wait for each other; on SQLite the write
// transaction (BEGIN IMMEDIATE) does.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations(s.d)
	if err != nil {
		return err
	}
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer sqlTx.Rollback()
	if s.d.pg {
		if _, err := sqlTx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
			return err
		}
	}
	if _, err := sqlTx.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := sqlTx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return err
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return err
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if _, err := sqlTx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if _, err := sqlTx.ExecContext(ctx, s.d.rebind("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"), m.version, m.name, s.now().UnixMilli()); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		s.log.Info("applied migration", "dialect", s.d.name, "migration", m.name)
	}
	if err := sqlTx.Commit(); err != nil {
		return err
	}
	if !s.d.pg {
		// SQLite reads its planner statistics (sqlite_stat1, which the
		// migrations seed) only when a connection loads the schema. The
		// writer loaded it before migrating, so without this it would plan
		// every query with no statistics until it reconnects: on a fresh
		// data directory a serial-number lookup walked the whole hosts
		// table in id order instead of using its index.
		if _, err := s.db.ExecContext(ctx, "ANALYZE sqlite_schema"); err != nil {
			return fmt.Errorf("reload planner statistics: %w", err)
		}
	}
	return nil
}
