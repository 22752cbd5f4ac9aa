package sqlstore

import (
	"testing"

	"github.com/eimhq/eim/sqlstore/storetest"
)

// Exported to the external tests.
var (
	FreshPostgresURL = postgresURL
	NewPostgresDB    = newPostgresDB
)

// postgresURL returns a URL of a fresh database, dropped at the end of the
// test; the test is skipped when EIM_TEST_POSTGRES_URL is unset.
func postgresURL(t testing.TB) string { return storetest.PostgresURL(t) }

// newPostgresDB creates a database with a random name on the server of
// base and returns its URL and a function that drops it.
func newPostgresDB(base string) (string, func() error, error) {
	return storetest.PostgresDB(base, "eim_test")
}

// Analyze refreshes the planner statistics, as autovacuum (PostgreSQL) or
// PRAGMA optimize (SQLite) do in a long-running database.
func Analyze(s *Store) error {
	_, err := s.db.Exec("ANALYZE")
	return err
}
