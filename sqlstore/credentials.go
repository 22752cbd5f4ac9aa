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
	nodeCredentialsPage         = "SELECT id, project, desired_state, node_secret_hash, node_cred_gen FROM hosts WHERE id > ? ORDER BY id LIMIT ?"
	nodeCredentialsPageSQLite   = "SELECT id, project, desired_state, node_secret_hash, node_cred_gen FROM hosts INDEXED BY hosts_node_credentials_idx WHERE id > ? ORDER BY id LIMIT ?"
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

// NodeCredentialsAfter implements eim.Store: one statement on a reader
// connection, over the covering index on SQLite and the primary key on
// PostgreSQL.
func (s *Store) NodeCredentialsAfter(ctx context.Context, after string, limit int) ([]eim.NodeCredentials, error) {
	select {
	case <-s.closed:
		return nil, eim.Errorf(eim.EUNAVAILABLE, "the store is closed")
	default:
	}
	if limit <= 0 {
		return nil, eim.Errorf(eim.EINVALID, "limit: %d, want at least 1", limit)
	}
	q := nodeCredentialsPage
	if !s.d.pg {
		q = nodeCredentialsPageSQLite
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind(q), after, limit)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read host credentials: %w", err), nil)
	}
	defer rows.Close()
	out := make([]eim.NodeCredentials, 0, min(limit, 4096))
	for rows.Next() {
		var (
			c     eim.NodeCredentials
			state string
		)
		if err := rows.Scan(&c.HostID, &c.Project, &state, &c.SecretHash, &c.Gen); err != nil {
			return nil, fmt.Errorf("read host credentials: %w", err)
		}
		c.DesiredState = eim.HostState(state)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("read host credentials: %w", err), nil)
	}
	return out, nil
}

// stmtFor returns the prepared statement for q on db (SQLite), or nil.
func (s *Store) stmtFor(db *sql.DB, q string) *sql.Stmt {
	if s.stmts == nil {
		return nil
	}
	return s.stmts.get(db, q)
}
