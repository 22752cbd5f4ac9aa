package storetest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// PostgresEnv names the variable holding the URL of the PostgreSQL server
// that tests use; PostgreSQL tests are skipped when it is unset.
const PostgresEnv = "EIM_TEST_POSTGRES_URL"

// PostgresDB creates a database with a random name (prefix_<hex>) on the
// server of base, a postgres:// URL, and returns its URL and a function
// that drops it. Every test run migrates its own database, so a schema
// left by another run or another version never gets in the way.
func PostgresDB(base, prefix string) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", PostgresEnv, err)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
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
	u.Path = "/" + name
	return u.String(), drop, nil
}

// PostgresURL returns the URL of a fresh database for t, dropped when t
// ends; it skips t when PostgresEnv is unset.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		t.Skipf("%s is not set", PostgresEnv)
	}
	u, drop, err := PostgresDB(base, "eim_test")
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
