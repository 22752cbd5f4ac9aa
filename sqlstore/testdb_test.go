package sqlstore

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
)

// Exported to the external tests.
var (
	FreshPostgresURL = postgresURL
	NewPostgresDB    = newPostgresDB
)

// postgresURL returns a URL of a fresh database, dropped at the end of the
// test; the test is skipped when EIM_TEST_POSTGRES_URL is unset.
func postgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("EIM_TEST_POSTGRES_URL")
	if base == "" {
		t.Skip("EIM_TEST_POSTGRES_URL is not set")
	}
	u, drop, err := newPostgresDB(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return u
}

// newPostgresDB creates a database with a random name on the server of
// base and returns its URL and a function that drops it.
func newPostgresDB(base string) (string, func() error, error) {
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	var b [6]byte
	rand.Read(b[:])
	name := "eim_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		return "", nil, fmt.Errorf("create test database: %w", err)
	}
	drop := func() error {
		admin, err := sql.Open("pgx", base)
		if err != nil {
			return err
		}
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop test database: %w", err)
		}
		return nil
	}
	u, err := url.Parse(base)
	if err != nil {
		drop()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// Analyze refreshes the planner statistics, as autovacuum (PostgreSQL) or
// PRAGMA optimize (SQLite) do in a long-running database.
func Analyze(s *Store) error {
	_, err := s.db.Exec("ANALYZE")
	return err
}
