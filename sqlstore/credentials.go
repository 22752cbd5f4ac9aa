package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/eimhq/eim"
)

// The columns a node's authentication reads (see eim.NodeCredentials).
// SQLite must be told to use the covering index of migration 0006: it
// prefers the unique index on id, which leads to the wide row.
const (
	nodeCredentials             = "SELECT id, project, desired_state, node_secret_hash, node_cred_gen FROM hosts WHERE id = ?"
	nodeCredentialsScoped       = nodeCredentials + " AND project = ?"
	nodeCredentialsSQLite       = "SELECT id, project, desired_state, node_secret_hash, node_cred_gen FROM hosts INDEXED BY hosts_node_credentials_idx WHERE id = ?"
	nodeCredentialsSQLiteScoped = nodeCredentialsSQLite + " AND project = ?"
)

// NodeCredentials implements eim.Store. It is one statement on a reader
// connection, without a transaction (a round trip on PostgreSQL, where a
// scoped transaction takes four); the project condition keeps tenants
// apart as row-level security does for transactions.
func (s *Store) NodeCredentials(ctx context.Context, project, hostID string) (eim.NodeCredentials, error) {
	var c eim.NodeCredentials
	select {
	case <-s.closed:
		return c, eim.Errorf(eim.EUNAVAILABLE, "the store is closed")
	default:
	}
	args := []any{hostID}
	q, scoped := nodeCredentials, nodeCredentialsScoped
	if !s.d.pg {
		q, scoped = nodeCredentialsSQLite, nodeCredentialsSQLiteScoped
	}
	if project != "" {
		q, args = scoped, append(args, project)
	}
	var row *sql.Row
	if st := s.stmtFor(s.rdb, q); st != nil {
		row = st.QueryRowContext(ctx, args...)
	} else {
		row = s.rdb.QueryRowContext(ctx, s.d.rebind(q), args...)
	}
	var state string
	err := row.Scan(&c.HostID, &c.Project, &state, &c.SecretHash, &c.Gen)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return c, eim.Errorf(eim.ENOTFOUND, "host %s not found", hostID)
	case err != nil:
		return c, s.d.translate(fmt.Errorf("get host %s credentials: %w", hostID, err), nil)
	}
	c.DesiredState = eim.HostState(state)
	return c, nil
}

// stmtFor returns the prepared statement for q on db (SQLite), or nil.
func (s *Store) stmtFor(db *sql.DB, q string) *sql.Stmt {
	if s.stmts == nil {
		return nil
	}
	return s.stmts.get(db, q)
}
