package sqlstore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/eimhq/eim"
)

// The connect module's credentials and tunnel registry (migration 0017):
// one statement per call on the unscoped pool, like the leases.

var _ eim.ConnectStore = (*Store)(nil)

// credentialGone is how long an expired credential's row is kept (so an
// agent presenting it is told it expired rather than that it is unknown).
const credentialGone = 7 * 24 * time.Hour

// CreateConnectCredential implements eim.ConnectStore.
func (s *Store) CreateConnectCredential(ctx context.Context, c *eim.ConnectCredential, others *time.Time) error {
	if c.ID == "" || c.Project == "" || c.Cluster == "" || len(c.Hash) == 0 {
		return eim.Errorf(eim.EINVALID, "connect credential: id, project, cluster and hash are required")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.d.translate(fmt.Errorf("create connect credential: %w", err), nil)
	}
	defer tx.Rollback() //nolint:errcheck // after a commit: nothing to do
	if others != nil {
		if _, err := tx.ExecContext(ctx, s.d.rebind("UPDATE eim_connect_credentials SET expires = ? WHERE project = ? AND cluster = ? AND expires > ?"),
			others.UnixMilli(), c.Project, c.Cluster, others.UnixMilli()); err != nil {
			return s.d.translate(fmt.Errorf("create connect credential: expire the others: %w", err), nil)
		}
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("INSERT INTO eim_connect_credentials (id, project, cluster, hash, created, expires) VALUES (?, ?, ?, ?, ?, ?)"),
		c.ID, c.Project, c.Cluster, hex.EncodeToString(c.Hash), c.Created.UnixMilli(), c.Expires.UnixMilli()); err != nil {
		return s.d.translate(fmt.Errorf("create connect credential: %w", err), nil)
	}
	if _, err := tx.ExecContext(ctx, s.d.rebind("DELETE FROM eim_connect_credentials WHERE expires < ?"), s.now().Add(-credentialGone).UnixMilli()); err != nil {
		return s.d.translate(fmt.Errorf("create connect credential: remove those long expired: %w", err), nil)
	}
	if err := tx.Commit(); err != nil {
		return s.d.translate(fmt.Errorf("create connect credential: %w", err), nil)
	}
	return nil
}

const credentialColumns = "id, project, cluster, hash, created, expires"

func scanCredential(sc interface{ Scan(...any) error }) (*eim.ConnectCredential, error) {
	var c eim.ConnectCredential
	var hash string
	var created, expires int64
	if err := sc.Scan(&c.ID, &c.Project, &c.Cluster, &hash, &created, &expires); err != nil {
		return nil, err
	}
	h, err := hex.DecodeString(hash)
	if err != nil {
		return nil, fmt.Errorf("connect credential %s: hash: %w", c.ID, err)
	}
	c.Hash, c.Created, c.Expires = h, time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
	return &c, nil
}

// FindConnectCredential implements eim.ConnectStore.
func (s *Store) FindConnectCredential(ctx context.Context, id string) (*eim.ConnectCredential, error) {
	c, err := scanCredential(s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT "+credentialColumns+" FROM eim_connect_credentials WHERE id = ?"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "no connect credential %q", id)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read connect credential: %w", err), nil)
	}
	return c, nil
}

// ListConnectCredentials implements eim.ConnectStore.
func (s *Store) ListConnectCredentials(ctx context.Context, project string) ([]*eim.ConnectCredential, error) {
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind("SELECT "+credentialColumns+" FROM eim_connect_credentials WHERE project = ? AND expires > ? ORDER BY cluster, created, id"),
		project, s.now().UnixMilli())
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("list connect credentials: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.ConnectCredential
	for rows.Next() {
		c, err := scanCredential(rows)
		if err != nil {
			return nil, s.d.translate(fmt.Errorf("list connect credentials: %w", err), nil)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("list connect credentials: %w", err), nil)
	}
	return out, nil
}

// ExpireConnectCredentials implements eim.ConnectStore.
func (s *Store) ExpireConnectCredentials(ctx context.Context, project, cluster string, until time.Time) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind("UPDATE eim_connect_credentials SET expires = ? WHERE project = ? AND cluster = ? AND expires > ?"),
		until.UnixMilli(), project, cluster, until.UnixMilli()); err != nil {
		return s.d.translate(fmt.Errorf("expire connect credentials of %s/%s: %w", project, cluster, err), nil)
	}
	return nil
}

// SaveTunnel implements eim.ConnectStore.
func (s *Store) SaveTunnel(ctx context.Context, t *eim.Tunnel) error {
	if t.Project == "" || t.Cluster == "" || t.Replica == "" {
		return eim.Errorf(eim.EINVALID, "tunnel: project, cluster and replica are required")
	}
	_, err := s.db.ExecContext(ctx, s.d.rebind("INSERT INTO eim_connect_tunnels (project, cluster, replica, address, agent_version, connected, last_seen, rtt_us)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (project, cluster) DO UPDATE SET replica = excluded.replica, address = excluded.address,"+
		" agent_version = excluded.agent_version, connected = excluded.connected, last_seen = excluded.last_seen, rtt_us = excluded.rtt_us"),
		t.Project, t.Cluster, t.Replica, t.Address, t.AgentVersion, t.Connected.UnixMilli(), t.LastSeen.UnixMilli(), t.RTT.Microseconds())
	if err != nil {
		return s.d.translate(fmt.Errorf("save tunnel of %s/%s: %w", t.Project, t.Cluster, err), nil)
	}
	return nil
}

// TouchTunnel implements eim.ConnectStore.
func (s *Store) TouchTunnel(ctx context.Context, project, cluster, replica string, seen time.Time, rtt time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.d.rebind("UPDATE eim_connect_tunnels SET last_seen = ?, rtt_us = ? WHERE project = ? AND cluster = ? AND replica = ?"),
		seen.UnixMilli(), rtt.Microseconds(), project, cluster, replica)
	if err != nil {
		return false, s.d.translate(fmt.Errorf("touch tunnel of %s/%s: %w", project, cluster, err), nil)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.d.translate(fmt.Errorf("touch tunnel of %s/%s: %w", project, cluster, err), nil)
	}
	return n > 0, nil
}

const tunnelColumns = "project, cluster, replica, address, agent_version, connected, last_seen, rtt_us"

func scanTunnel(sc interface{ Scan(...any) error }) (*eim.Tunnel, error) {
	var t eim.Tunnel
	var connected, seen, rtt int64
	if err := sc.Scan(&t.Project, &t.Cluster, &t.Replica, &t.Address, &t.AgentVersion, &connected, &seen, &rtt); err != nil {
		return nil, err
	}
	t.Connected, t.LastSeen, t.RTT = time.UnixMilli(connected).UTC(), time.UnixMilli(seen).UTC(), time.Duration(rtt)*time.Microsecond
	return &t, nil
}

// FindTunnel implements eim.ConnectStore.
func (s *Store) FindTunnel(ctx context.Context, project, cluster string) (*eim.Tunnel, error) {
	t, err := scanTunnel(s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT "+tunnelColumns+" FROM eim_connect_tunnels WHERE project = ? AND cluster = ?"), project, cluster))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "no tunnel of cluster %q in project %q", cluster, project)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("read tunnel of %s/%s: %w", project, cluster, err), nil)
	}
	return t, nil
}

// ListTunnels implements eim.ConnectStore.
func (s *Store) ListTunnels(ctx context.Context, project string) ([]*eim.Tunnel, error) {
	q, args := "SELECT "+tunnelColumns+" FROM eim_connect_tunnels", []any{}
	if project != "" {
		q, args = q+" WHERE project = ?", append(args, project)
	}
	rows, err := s.rdb.QueryContext(ctx, s.d.rebind(q+" ORDER BY project, cluster"), args...)
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("list tunnels: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.Tunnel
	for rows.Next() {
		t, err := scanTunnel(rows)
		if err != nil {
			return nil, s.d.translate(fmt.Errorf("list tunnels: %w", err), nil)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("list tunnels: %w", err), nil)
	}
	return out, nil
}

// DeleteTunnel implements eim.ConnectStore.
func (s *Store) DeleteTunnel(ctx context.Context, project, cluster, replica string) error {
	if _, err := s.db.ExecContext(ctx, s.d.rebind("DELETE FROM eim_connect_tunnels WHERE project = ? AND cluster = ? AND replica = ?"), project, cluster, replica); err != nil {
		return s.d.translate(fmt.Errorf("delete tunnel of %s/%s: %w", project, cluster, err), nil)
	}
	return nil
}

// DeleteConnectOf implements eim.ConnectStore.
func (s *Store) DeleteConnectOf(ctx context.Context, project string) error {
	for _, q := range []string{"DELETE FROM eim_connect_credentials WHERE project = ?", "DELETE FROM eim_connect_tunnels WHERE project = ?"} {
		if _, err := s.db.ExecContext(ctx, s.d.rebind(q), project); err != nil {
			return s.d.translate(fmt.Errorf("delete connect of %s: %w", project, err), nil)
		}
	}
	return nil
}
