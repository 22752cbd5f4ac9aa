package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eimhq/eim"
)

// The clusters module's templates, clusters and nodes (eim.ClusterStore).
// Their statements run in transactions scoped to the project (row-level
// security on PostgreSQL, as for resources); every write records a
// change event of the cluster (KindCluster, its ID) or the template
// (KindClusterTemplate, name:version).

var _ eim.ClusterStore = (*Store)(nil)

// CreateClusterTemplate implements eim.ClusterStore.
func (s *Store) CreateClusterTemplate(ctx context.Context, ct *eim.ClusterTemplate) error {
	body, err := json.Marshal(ct)
	if err != nil {
		return err
	}
	ct.CreatedAt = eim.NewTime(s.now())
	return s.run(ctx, ct.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if t.exists(ctx, "SELECT 1 FROM cluster_templates WHERE project = ? AND name = ? AND version = ?", ct.Project, ct.Name, ct.Version) {
			return eim.Errorf(eim.ECONFLICT, "template %s version %s exists already (a template is never changed: make a new version)", ct.Name, ct.Version)
		}
		if _, err := t.exec(ctx, "INSERT INTO cluster_templates (project, name, version, is_default, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
			ct.Project, ct.Name, ct.Version, false, string(body), ct.CreatedAt.UnixMilli()); err != nil {
			if e := s.d.translate(err, nil); eim.ErrorCode(e) == eim.ECONFLICT {
				return eim.Errorf(eim.ECONFLICT, "template %s version %s exists already", ct.Name, ct.Version)
			}
			return t.fail(s.d.translate(fmt.Errorf("create cluster template: %w", err), nil))
		}
		t.addEvent(ct.Project, eim.KindClusterTemplate, eim.ClusterTemplateKey(ct.Name, ct.Version), eim.OpCreated)
		return nil
	})
}

// ClusterTemplates implements eim.ClusterStore.
func (s *Store) ClusterTemplates(ctx context.Context, project string) ([]*eim.ClusterTemplate, error) {
	var out []*eim.ClusterTemplate
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		t := etx.(*tx)
		out = nil
		rows, err := t.query(ctx, "SELECT project, is_default, body, created_at FROM cluster_templates WHERE project = ? ORDER BY name, version", project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("list cluster templates: %w", err), nil))
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ct      eim.ClusterTemplate
				proj    string
				def     bool
				body    string
				created int64
			)
			if err := rows.Scan(&proj, &def, &body, &created); err != nil {
				return t.fail(err)
			}
			if err := json.Unmarshal([]byte(body), &ct); err != nil {
				return fmt.Errorf("cluster template of %s: %w", proj, err)
			}
			ct.Project, ct.Default, ct.CreatedAt = proj, def, eim.TimeFromUnixMilli(created)
			out = append(out, &ct)
		}
		return rows.Err()
	})
	// Versions in their numeric order (v0.10.0 after v0.9.0).
	slices.SortStableFunc(out, func(a, b *eim.ClusterTemplate) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return eim.CompareTemplateVersions(a.Version, b.Version)
	})
	return out, err
}

// DeleteClusterTemplate implements eim.ClusterStore.
func (s *Store) DeleteClusterTemplate(ctx context.Context, project, name, version string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		var cluster string
		err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT name FROM clusters WHERE project = ? AND template_name = ? AND template_version = ? LIMIT 1"), project, name, version).Scan(&cluster)
		if err == nil {
			return eim.Errorf(eim.ECONFLICT, "clusterTemplate is in use: template %s version %s by cluster %s", name, version, cluster)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return t.fail(s.d.translate(fmt.Errorf("delete cluster template: %w", err), nil))
		}
		err = t.q.QueryRowContext(ctx, s.d.rebind("SELECT c.name FROM cluster_nodes n JOIN clusters c ON c.project = n.project AND c.id = n.cluster_id WHERE n.project = ? AND n.plan_template = ? LIMIT 1"),
			project, eim.ClusterTemplateKey(name, version)).Scan(&cluster)
		if err == nil {
			return eim.Errorf(eim.ECONFLICT, "clusterTemplate is in use: template %s version %s by nodes of cluster %s (an upgrade from it is under way)", name, version, cluster)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return t.fail(s.d.translate(fmt.Errorf("delete cluster template: %w", err), nil))
		}
		res, err := t.exec(ctx, "DELETE FROM cluster_templates WHERE project = ? AND name = ? AND version = ?", project, name, version)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete cluster template: %w", err), nil))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "template %s version %s not found", name, version)
		}
		t.addEvent(project, eim.KindClusterTemplate, eim.ClusterTemplateKey(name, version), eim.OpDeleted)
		return nil
	})
}

// SetDefaultClusterTemplate implements eim.ClusterStore.
func (s *Store) SetDefaultClusterTemplate(ctx context.Context, project, name, version string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM cluster_templates WHERE project = ? AND name = ? AND version = ?", project, name, version) {
			return eim.Errorf(eim.ENOTFOUND, "template %s version %s not found", name, version)
		}
		if _, err := t.exec(ctx, "UPDATE cluster_templates SET is_default = (name = ? AND version = ?) WHERE project = ?", name, version, project); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("set default cluster template: %w", err), nil))
		}
		t.addEvent(project, eim.KindClusterTemplate, eim.ClusterTemplateKey(name, version), eim.OpUpdated)
		return nil
	})
}

const clusterCols = "id, project, name, template_name, template_version, template_gen, labels, join_token, connect_token, connect_token_id, deleting, force_delete, status, created_at, updated_at"

func scanCluster(sc interface{ Scan(...any) error }) (*eim.Cluster, error) {
	var (
		c                      eim.Cluster
		labels, join, conn, st string
		created, updated       int64
	)
	if err := sc.Scan(&c.ID, &c.Project, &c.Name, &c.TemplateName, &c.TemplateVersion, &c.TemplateGen, &labels, &join, &conn, &c.ConnectTokenID,
		&c.Deleting, &c.ForceDelete, &st, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(labels), &c.Labels); err != nil {
		return nil, fmt.Errorf("cluster %s: labels: %w", c.ID, err)
	}
	if err := json.Unmarshal([]byte(st), &c.Status); err != nil {
		return nil, fmt.Errorf("cluster %s: status: %w", c.ID, err)
	}
	var err error
	if c.JoinToken, err = base64.StdEncoding.DecodeString(join); err != nil {
		return nil, fmt.Errorf("cluster %s: join token: %w", c.ID, err)
	}
	if c.ConnectToken, err = base64.StdEncoding.DecodeString(conn); err != nil {
		return nil, fmt.Errorf("cluster %s: connect token: %w", c.ID, err)
	}
	c.CreatedAt, c.UpdatedAt = eim.TimeFromUnixMilli(created), eim.TimeFromUnixMilli(updated)
	return &c, nil
}

const nodeCols = "project, host_id, cluster_id, role, seq, removing, force_removal, plan, state, message, reported_version, kubernetes_version, reported_at"

// clusters reads the clusters a statement selects, with their nodes.
func (s *Store) clustersWhere(ctx context.Context, t *tx, where string, args ...any) ([]*eim.Cluster, error) {
	rows, err := t.query(ctx, "SELECT "+clusterCols+" FROM clusters WHERE "+where+" ORDER BY name, id", args...)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read clusters: %w", err), nil))
	}
	var out []*eim.Cluster
	byID := map[string]*eim.Cluster{}
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			rows.Close()
			return nil, t.fail(err)
		}
		out = append(out, c)
		byID[c.Project+"/"+c.ID] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read clusters: %w", err), nil))
	}
	if len(out) == 0 {
		return nil, nil
	}
	// Their nodes: one statement for one cluster, one for a project's.
	q, qargs := "SELECT "+nodeCols+" FROM cluster_nodes WHERE project = ? AND cluster_id = ?", []any{out[0].Project, out[0].ID}
	if len(out) > 1 {
		q, qargs = "SELECT "+nodeCols+" FROM cluster_nodes", nil
		if ps := projectsOf(out); len(ps) == 1 {
			q, qargs = q+" WHERE project = ?", []any{ps[0]}
		}
	}
	nrows, err := t.query(ctx, q+" ORDER BY seq", qargs...)
	if err != nil {
		return nil, t.fail(s.d.translate(fmt.Errorf("read cluster nodes: %w", err), nil))
	}
	defer nrows.Close()
	for nrows.Next() {
		var project string
		cid, n, err := scanNodeWithProject(nrows, &project)
		if err != nil {
			return nil, t.fail(err)
		}
		if c := byID[project+"/"+cid]; c != nil {
			c.Nodes = append(c.Nodes, n)
		}
	}
	return out, nrows.Err()
}

func scanNodeWithProject(rows *sql.Rows, project *string) (string, *eim.ClusterNode, error) {
	var (
		cid, role, plan string
		at              int64
	)
	n := &eim.ClusterNode{}
	if err := rows.Scan(project, &n.HostID, &cid, &role, &n.Seq, &n.Removing, &n.Force, &plan,
		&n.Report.State, &n.Report.Message, &n.Report.PlanVersion, &n.Report.KubernetesVersion, &at); err != nil {
		return "", nil, err
	}
	n.Role = eim.ClusterRole(role)
	if err := json.Unmarshal([]byte(plan), &n.Plan); err != nil {
		return "", nil, fmt.Errorf("cluster node %s: plan: %w", n.HostID, err)
	}
	if at != 0 {
		n.Report.At = eim.TimeFromUnixMilli(at)
	}
	return cid, n, nil
}

func projectsOf(cs []*eim.Cluster) []string {
	var out []string
	for _, c := range cs {
		if !slices.Contains(out, c.Project) {
			out = append(out, c.Project)
		}
	}
	return out
}

// CreateCluster implements eim.ClusterStore.
func (s *Store) CreateCluster(ctx context.Context, c *eim.Cluster) error {
	now := eim.NewTime(s.now())
	if c.ID == "" {
		c.ID = eim.NewID(eim.KindCluster)
	}
	c.CreatedAt, c.UpdatedAt = now, now
	return s.run(ctx, c.Project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", c.Project) {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", c.Project)
		}
		if t.exists(ctx, "SELECT 1 FROM clusters WHERE project = ? AND name = ?", c.Project, c.Name) {
			return eim.Errorf(eim.ECONFLICT, "cluster %s exists already", c.Name)
		}
		if err := s.checkFree(ctx, t, c.Project, c.Nodes); err != nil {
			return err
		}
		if err := s.writeCluster(ctx, t, c, true); err != nil {
			return err
		}
		for i, n := range c.Nodes {
			n.Seq = int64(i + 1)
			if err := s.insertNode(ctx, t, c, n); err != nil {
				return err
			}
		}
		t.addEvent(c.Project, eim.KindCluster, c.ID, eim.OpCreated)
		return nil
	})
}

// checkFree refuses hosts that are in a cluster already, naming it.
// (The primary key refuses them too, when two transactions race.)
func (s *Store) checkFree(ctx context.Context, t *tx, project string, nodes []*eim.ClusterNode) error {
	for _, n := range nodes {
		var cluster string
		err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT c.name FROM cluster_nodes n JOIN clusters c ON c.project = n.project AND c.id = n.cluster_id WHERE n.project = ? AND n.host_id = ?"),
			project, n.HostID).Scan(&cluster)
		if err == nil {
			return eim.Errorf(eim.ECONFLICT, "nodes: host %s is a node of cluster %s already", n.HostID, cluster)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return t.fail(s.d.translate(fmt.Errorf("check cluster nodes: %w", err), nil))
		}
	}
	return nil
}

func (s *Store) writeCluster(ctx context.Context, t *tx, c *eim.Cluster, insert bool) error {
	labels, err := json.Marshal(orEmpty(c.Labels))
	if err != nil {
		return err
	}
	st, err := json.Marshal(c.Status)
	if err != nil {
		return err
	}
	join, conn := base64.StdEncoding.EncodeToString(c.JoinToken), base64.StdEncoding.EncodeToString(c.ConnectToken)
	if insert {
		_, err = t.exec(ctx, "INSERT INTO clusters ("+clusterCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			c.ID, c.Project, c.Name, c.TemplateName, c.TemplateVersion, c.TemplateGen, string(labels), join, conn, c.ConnectTokenID,
			c.Deleting, c.ForceDelete, string(st), c.CreatedAt.UnixMilli(), c.UpdatedAt.UnixMilli())
	} else {
		_, err = t.exec(ctx, "UPDATE clusters SET template_name = ?, template_version = ?, template_gen = ?, labels = ?, join_token = ?, connect_token = ?, connect_token_id = ?,"+
			" deleting = ?, force_delete = ?, status = ?, updated_at = ? WHERE project = ? AND id = ?",
			c.TemplateName, c.TemplateVersion, c.TemplateGen, string(labels), join, conn, c.ConnectTokenID,
			c.Deleting, c.ForceDelete, string(st), c.UpdatedAt.UnixMilli(), c.Project, c.ID)
	}
	if err != nil {
		e := s.d.translate(err, nil)
		if eim.ErrorCode(e) == eim.ECONFLICT {
			return eim.Errorf(eim.ECONFLICT, "cluster %s exists already", c.Name)
		}
		return t.fail(fmt.Errorf("write cluster %s: %w", c.Name, e))
	}
	return nil
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func planTemplate(p eim.NodePlan) string {
	if p.TemplateName == "" {
		return ""
	}
	return eim.ClusterTemplateKey(p.TemplateName, p.TemplateVersion)
}

func (s *Store) insertNode(ctx context.Context, t *tx, c *eim.Cluster, n *eim.ClusterNode) error {
	plan, err := json.Marshal(n.Plan)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, "INSERT INTO cluster_nodes (project, host_id, cluster_id, role, seq, removing, force_removal, plan_template, plan) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		c.Project, n.HostID, c.ID, string(n.Role), n.Seq, n.Removing, n.Force, planTemplate(n.Plan), string(plan)); err != nil {
		e := s.d.translate(err, nil)
		if eim.ErrorCode(e) == eim.ECONFLICT {
			return eim.Errorf(eim.ECONFLICT, "nodes: host %s is a node of another cluster already", n.HostID)
		}
		return t.fail(fmt.Errorf("add node %s to cluster %s: %w", n.HostID, c.Name, e))
	}
	return nil
}

// FindCluster implements eim.ClusterStore.
func (s *Store) FindCluster(ctx context.Context, project, name string) (*eim.Cluster, error) {
	var c *eim.Cluster
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		col := "name"
		if eim.ValidID(eim.KindCluster, name) {
			col = "id"
		}
		cs, err := s.clustersWhere(ctx, etx.(*tx), "project = ? AND "+col+" = ?", project, name)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "cluster %s not found", name)
		}
		c = cs[0]
		return nil
	})
	return c, err
}

// ListClusters implements eim.ClusterStore.
func (s *Store) ListClusters(ctx context.Context, project string) ([]*eim.Cluster, error) {
	var out []*eim.Cluster
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		var err error
		if project == "" {
			out, err = s.clustersWhere(ctx, etx.(*tx), "1 = 1")
		} else {
			out, err = s.clustersWhere(ctx, etx.(*tx), "project = ?", project)
		}
		return err
	})
	return out, err
}

// ClusterOfHost implements eim.ClusterStore.
func (s *Store) ClusterOfHost(ctx context.Context, project, hostID string) (*eim.Cluster, error) {
	var c *eim.Cluster
	err := s.run(ctx, project, false, func(etx eim.Tx) error {
		cs, err := s.clustersWhere(ctx, etx.(*tx), "project = ? AND id = (SELECT cluster_id FROM cluster_nodes WHERE project = ? AND host_id = ?)", project, project, hostID)
		if err != nil {
			return err
		}
		if len(cs) == 0 {
			return eim.Errorf(eim.ENOTFOUND, "host %s is in no cluster", hostID)
		}
		c = cs[0]
		return nil
	})
	return c, err
}

// UpdateCluster implements eim.ClusterStore.
func (s *Store) UpdateCluster(ctx context.Context, project, id string, fn func(*eim.Cluster) error) (*eim.Cluster, error) {
	var out *eim.Cluster
	err := s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		// The cluster's row, locked on PostgreSQL (SQLite has one writer):
		// the API's and the reconciler's writes of a cluster take turns.
		lock := ""
		if s.d.pg {
			lock = " FOR UPDATE"
		}
		row := t.q.QueryRowContext(ctx, s.d.rebind("SELECT "+clusterCols+" FROM clusters WHERE project = ? AND id = ?"+lock), project, id)
		cur, err := scanCluster(row)
		if errors.Is(err, sql.ErrNoRows) {
			return eim.Errorf(eim.ENOTFOUND, "cluster %s not found", id)
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("read cluster: %w", err), nil))
		}
		cs, err := s.clustersWhere(ctx, t, "project = ? AND id = ?", project, id)
		if err != nil {
			return err
		}
		cur.Nodes = cs[0].Nodes
		old := map[string]*eim.ClusterNode{}
		var maxSeq int64
		for _, n := range cur.Nodes {
			cp := *n
			old[n.HostID] = &cp
			maxSeq = max(maxSeq, n.Seq)
		}
		if err := fn(cur); err != nil {
			return err
		}
		cur.UpdatedAt = eim.NewTime(s.now())
		if err := s.writeCluster(ctx, t, cur, false); err != nil {
			return err
		}
		keep := map[string]bool{}
		var added []*eim.ClusterNode
		for _, n := range cur.Nodes {
			keep[n.HostID] = true
			o, ok := old[n.HostID]
			if !ok {
				added = append(added, n)
				continue
			}
			if o.Role == n.Role && o.Removing == n.Removing && o.Force == n.Force && o.Plan == n.Plan {
				continue
			}
			plan, err := json.Marshal(n.Plan)
			if err != nil {
				return err
			}
			if _, err := t.exec(ctx, "UPDATE cluster_nodes SET role = ?, removing = ?, force_removal = ?, plan_template = ?, plan = ? WHERE project = ? AND host_id = ? AND cluster_id = ?",
				string(n.Role), n.Removing, n.Force, planTemplate(n.Plan), string(plan), project, n.HostID, id); err != nil {
				return t.fail(s.d.translate(fmt.Errorf("write cluster node: %w", err), nil))
			}
		}
		for h := range old {
			if !keep[h] {
				if _, err := t.exec(ctx, "DELETE FROM cluster_nodes WHERE project = ? AND host_id = ? AND cluster_id = ?", project, h, id); err != nil {
					return t.fail(s.d.translate(fmt.Errorf("remove cluster node: %w", err), nil))
				}
			}
		}
		if err := s.checkFree(ctx, t, project, added); err != nil {
			return err
		}
		for _, n := range added {
			maxSeq++
			n.Seq = maxSeq
			if err := s.insertNode(ctx, t, cur, n); err != nil {
				return err
			}
		}
		t.addEvent(project, eim.KindCluster, id, eim.OpUpdated)
		out = cur
		return nil
	})
	return out, err
}

// DeleteCluster implements eim.ClusterStore.
func (s *Store) DeleteCluster(ctx context.Context, project, id string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if _, err := t.exec(ctx, "DELETE FROM cluster_nodes WHERE project = ? AND cluster_id = ?", project, id); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete cluster: %w", err), nil))
		}
		res, err := t.exec(ctx, "DELETE FROM clusters WHERE project = ? AND id = ?", project, id)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete cluster: %w", err), nil))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "cluster %s not found", id)
		}
		t.addEvent(project, eim.KindCluster, id, eim.OpDeleted)
		return nil
	})
}

// ReportClusterNode implements eim.ClusterStore.
func (s *Store) ReportClusterNode(ctx context.Context, project, hostID string, r eim.NodeReport) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		t := etx.(*tx)
		var cid string
		err := t.q.QueryRowContext(ctx, s.d.rebind("SELECT cluster_id FROM cluster_nodes WHERE project = ? AND host_id = ?"), project, hostID).Scan(&cid)
		if errors.Is(err, sql.ErrNoRows) {
			return eim.Errorf(eim.ENOTFOUND, "host %s is in no cluster", hostID)
		}
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("report cluster node: %w", err), nil))
		}
		if _, err := t.exec(ctx, "UPDATE cluster_nodes SET state = ?, message = ?, reported_version = ?, kubernetes_version = ?, reported_at = ? WHERE project = ? AND host_id = ?",
			r.State, r.Message, r.PlanVersion, r.KubernetesVersion, r.At.UnixMilli(), project, hostID); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("report cluster node: %w", err), nil))
		}
		t.addEvent(project, eim.KindCluster, cid, eim.OpUpdated)
		return nil
	})
}

// DeleteClustersOf implements eim.ClusterStore.
func (s *Store) DeleteClustersOf(ctx context.Context, project string) error {
	return s.run(ctx, project, true, func(etx eim.Tx) error {
		return s.deleteClustersOf(ctx, etx.(*tx), project)
	})
}

// deleteClustersOf removes a project's clusters, nodes and templates in
// t, with their events.
func (s *Store) deleteClustersOf(ctx context.Context, t *tx, project string) error {
	if _, err := t.exec(ctx, "DELETE FROM cluster_nodes WHERE project = ?", project); err != nil {
		return t.fail(s.d.translate(fmt.Errorf("delete clusters of %s: %w", project, err), nil))
	}
	for _, q := range []struct {
		sql  string
		kind eim.Kind
	}{
		{"DELETE FROM clusters WHERE project = ? RETURNING id", eim.KindCluster},
		{"DELETE FROM cluster_templates WHERE project = ? RETURNING name || ':' || version", eim.KindClusterTemplate},
	} {
		rows, err := t.query(ctx, q.sql, project)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete clusters of %s: %w", project, err), nil))
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return t.fail(err)
			}
			t.addEvent(project, q.kind, id, eim.OpDeleted)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete clusters of %s: %w", project, err), nil))
		}
	}
	return nil
}
