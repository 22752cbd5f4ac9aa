package sqlstore

import (
	"context"
	"fmt"

	"github.com/eimhq/eim"
)

// The columns a node's authentication reads (see eim.NodeCredentials).
const (
	nodeCredentials       = "SELECT id, project, desired_state, node_secret_hash, node_cred_gen FROM hosts WHERE id = ?"
	nodeCredentialsScoped = nodeCredentials + " AND project = ?"
)

// NodeCredentials implements eim.Tx.
func (t *tx) NodeCredentials(ctx context.Context, hostID string) (eim.NodeCredentials, error) {
	var c eim.NodeCredentials
	if err := t.check(); err != nil {
		return c, err
	}
	args := []any{hostID}
	q := nodeCredentials
	if t.project != "" {
		q, args = nodeCredentialsScoped, append(args, t.project)
	}
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return c, t.fail(t.s.d.translate(fmt.Errorf("get host %s credentials: %w", hostID, err), nil))
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return c, t.fail(t.s.d.translate(fmt.Errorf("get host %s credentials: %w", hostID, err), nil))
		}
		return c, eim.Errorf(eim.ENOTFOUND, "host %s not found", hostID)
	}
	var state string
	if err := rows.Scan(&c.HostID, &c.Project, &state, &c.SecretHash, &c.Gen); err != nil {
		return c, t.fail(fmt.Errorf("scan host %s credentials: %w", hostID, err))
	}
	c.DesiredState = eim.HostState(state)
	return c, rows.Close()
}
