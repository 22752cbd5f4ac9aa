package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eimhq/eim"
)

// CreateProject stores a new project; ECONFLICT when its name or ID exists.
func (s *Store) CreateProject(ctx context.Context, p *eim.Project) error {
	if p.Name == "" || p.ID == "" {
		return eim.Errorf(eim.EINVALID, "project: name and id are required")
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = eim.NewTime(s.now())
	}
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		settings, err := encodeSettings(p.Settings)
		if err != nil {
			return err
		}
		_, err = t.exec(ctx, "INSERT INTO projects (name, id, created_at, settings) VALUES (?, ?, ?, ?)", p.Name, p.ID, p.CreatedAt.UnixMilli(), settings)
		if err == nil {
			t.addEvent(p.Name, eim.KindProject, p.Name, eim.OpCreated)
			t.addAudit(ctx, p.Name, eim.KindProject, p.Name, eim.OpCreated, settingsChanges("{}", settings))
			return nil
		}
		if e, ok := s.d.classify(err); ok && e.unique {
			if (len(e.columns) > 0 && e.columns[0] == "id") || e.constraint == "projects_id_key" {
				return eim.Errorf(eim.ECONFLICT, "id: a project with id %s already exists", p.ID)
			}
			return eim.Errorf(eim.ECONFLICT, "name: project %s already exists", p.Name)
		}
		return s.d.translate(fmt.Errorf("create project: %w", err), nil)
	})
}

// deletingSQL says whether a project (a row of projects) is being
// deleted (eim.Project.Deleting).
const deletingSQL = "EXISTS (SELECT 1 FROM project_deletions d WHERE d.project = projects.name)"

// FindProject returns the project with the name, or ENOTFOUND. Every API
// request and most node calls ask for their project, so answers are kept
// for projectTTL: a change made through this Store is seen at once, one
// made by another process (several server processes on one PostgreSQL)
// within projectTTL. Misses are not kept: a project just created elsewhere
// is found as soon as it is committed.
func (s *Store) FindProject(ctx context.Context, name string) (*eim.Project, error) {
	if p, ok := s.projects.get(name, s.now()); ok {
		return p, nil
	}
	gen := s.projects.generation()
	var (
		p        eim.Project
		at       int64
		settings []byte
	)
	err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT name, id, created_at, settings, "+deletingSQL+" FROM projects WHERE name = ?"), name).Scan(&p.Name, &p.ID, &at, &settings, &p.Deleting)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "project %s not found", name)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("find project: %w", err), nil)
	}
	p.CreatedAt = eim.TimeFromUnixMilli(at)
	if err := decodeSettings(settings, &p.Settings); err != nil {
		return nil, fmt.Errorf("find project %s: %w", name, err)
	}
	s.projects.put(gen, &p, s.now())
	return &p, nil
}

// FindProjectByID returns the project with the ID (a UUID, compared in
// lowercase as projects' IDs are stored), or ENOTFOUND. The legacy API
// paths name a project this way. Answers are not cached: the API keeps
// its own.
func (s *Store) FindProjectByID(ctx context.Context, id string) (*eim.Project, error) {
	var (
		p        eim.Project
		at       int64
		settings []byte
	)
	err := s.rdb.QueryRowContext(ctx, s.d.rebind("SELECT name, id, created_at, settings, "+deletingSQL+" FROM projects WHERE id = ?"), strings.ToLower(id)).Scan(&p.Name, &p.ID, &at, &settings, &p.Deleting)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, eim.Errorf(eim.ENOTFOUND, "project with id %s not found", id)
	}
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("find project by id: %w", err), nil)
	}
	p.CreatedAt = eim.TimeFromUnixMilli(at)
	if err := decodeSettings(settings, &p.Settings); err != nil {
		return nil, fmt.Errorf("find project %s: %w", p.Name, err)
	}
	return &p, nil
}

// projectTTL is how long FindProject keeps an answer.
const projectTTL = time.Second

// projectCache holds FindProject's recent answers.
type projectCache struct {
	mu  sync.Mutex
	gen uint64 // counts in-process changes of projects
	m   map[string]projectEntry
}

type projectEntry struct {
	p  eim.Project
	at time.Time
}

func newProjectCache() *projectCache {
	return &projectCache{m: map[string]projectEntry{}}
}

// get returns a copy of the cached project, if it is fresh.
func (c *projectCache) get(name string, now time.Time) (*eim.Project, bool) {
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) >= projectTTL || now.Before(e.at) {
		return nil, false
	}
	p := e.p
	p.Settings.DefaultCustomConfigIDs = slices.Clone(p.Settings.DefaultCustomConfigIDs)
	return &p, true
}

func (c *projectCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put keeps p, read when the generation was gen, unless a project changed
// since: the read may predate that change.
func (c *projectCache) put(gen uint64, p *eim.Project, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	e := projectEntry{p: *p, at: now}
	e.p.Settings.DefaultCustomConfigIDs = slices.Clone(p.Settings.DefaultCustomConfigIDs)
	c.m[p.Name] = e
}

// forget drops the cached projects after a commit that changed a project.
func (c *projectCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}

// ListProjects returns every project, by name.
func (s *Store) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT name, id, created_at, settings, "+deletingSQL+" FROM projects ORDER BY name")
	if err != nil {
		return nil, s.d.translate(fmt.Errorf("list projects: %w", err), nil)
	}
	defer rows.Close()
	var out []*eim.Project
	for rows.Next() {
		var (
			p        eim.Project
			at       int64
			settings []byte
		)
		if err := rows.Scan(&p.Name, &p.ID, &at, &settings, &p.Deleting); err != nil {
			return nil, fmt.Errorf("list projects: %w", err)
		}
		p.CreatedAt = eim.TimeFromUnixMilli(at)
		if err := decodeSettings(settings, &p.Settings); err != nil {
			return nil, fmt.Errorf("list projects: %s: %w", p.Name, err)
		}
		out = append(out, &p)
	}
	if err := rows.Err(); err != nil {
		return nil, s.d.translate(fmt.Errorf("list projects: %w", err), nil)
	}
	return out, nil
}

// UpdateProject stores the settings of the existing project p.Name;
// ENOTFOUND when there is none. Name, ID and CreatedAt do not change.
func (s *Store) UpdateProject(ctx context.Context, p *eim.Project) error {
	settings, err := encodeSettings(p.Settings)
	if err != nil {
		return err
	}
	// Settings changes are not in the change feed: forget the cached
	// projects here, after the commit (and before, so that a read racing
	// with the write cannot keep the old settings).
	s.projects.forget()
	defer s.projects.forget()
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		q := "SELECT settings FROM projects WHERE name = ?"
		if s.d.pg {
			q += " FOR UPDATE"
		}
		var old string
		if err := t.q.QueryRowContext(ctx, s.d.rebind(q), p.Name).Scan(&old); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return t.fail(s.d.translate(fmt.Errorf("update project %s: %w", p.Name, err), nil))
		}
		res, err := t.exec(ctx, "UPDATE projects SET settings = ? WHERE name = ?", settings, p.Name)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update project %s: %w", p.Name, err), nil))
		}
		if n, err := res.RowsAffected(); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("update project %s: %w", p.Name, err), nil))
		} else if n == 0 {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", p.Name)
		}
		t.addAudit(ctx, p.Name, eim.KindProject, p.Name, eim.OpUpdated, settingsChanges(old, settings))
		return nil
	})
}

// settingsChanges are the settings that differ between two encodings, as
// "settings.<name>" (secrets redacted).
func settingsChanges(oldJSON, newJSON string) map[string]eim.Change {
	var o, n map[string]json.RawMessage
	_ = json.Unmarshal([]byte(oldJSON), &o)
	_ = json.Unmarshal([]byte(newJSON), &n)
	out := map[string]eim.Change{}
	add := func(k string) {
		ov, ok1 := o[k]
		nv, ok2 := n[k]
		if ok1 && ok2 && bytes.Equal(ov, nv) {
			return
		}
		ch := eim.Change{Old: jsonNull, New: jsonNull}
		if ok1 {
			ch.Old = ov
		}
		if ok2 {
			ch.New = nv
		}
		if eim.SecretName(k) {
			if ok1 {
				ch.Old = json.RawMessage(eim.Redacted)
			}
			if ok2 {
				ch.New = json.RawMessage(eim.Redacted)
			}
		}
		out["settings."+k] = ch
	}
	for k := range o {
		add(k)
	}
	for k := range n {
		if _, ok := o[k]; !ok {
			add(k)
		}
	}
	return out
}

func encodeSettings(ps eim.ProjectSettings) (string, error) {
	b, err := json.Marshal(ps)
	if err != nil {
		return "", eim.Errorf(eim.EINVALID, "settings: %v", err)
	}
	return string(b), nil
}

func decodeSettings(b []byte, ps *eim.ProjectSettings) error {
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, ps); err != nil {
		return fmt.Errorf("decode settings: %w", err)
	}
	return nil
}

// DeleteProject removes the project and all its resources, referrers
// before what they refer to, with a delete event each.
func (s *Store) DeleteProject(ctx context.Context, name string) error {
	return s.run(ctx, "", true, func(etx eim.Tx) error {
		t := etx.(*tx)
		if !t.exists(ctx, "SELECT 1 FROM projects WHERE name = ?", name) {
			return eim.Errorf(eim.ENOTFOUND, "project %s not found", name)
		}
		return s.deleteProject(ctx, t, name)
	})
}

// deleteProject removes the existing project name and all its resources
// in t.
func (s *Store) deleteProject(ctx context.Context, t *tx, name string) error {
	// Its edge workloads (not resources): their revisions, targets,
	// statuses and log requests go with them.
	if _, err := t.exec(ctx, "DELETE FROM edge_workloads WHERE project = ?", name); err != nil {
		return t.fail(s.d.translate(fmt.Errorf("delete project %s: %w", name, err), nil))
	}
	for _, k := range deletionOrder() {
		c := codecOf(k)
		// References within one table (region → parent region) would
		// make the order of rows matter: cut them first.
		for _, col := range c.cols {
			if col.kind == colEdge && col.field.Edge.Kind == k {
				if _, err := t.exec(ctx, "UPDATE "+c.table+" SET "+col.name+" = NULL WHERE project = ?", name); err != nil {
					return t.fail(s.d.translate(fmt.Errorf("delete project %s: %w", name, err), nil))
				}
			}
		}
		rows, err := t.query(ctx, "DELETE FROM "+c.table+" WHERE project = ? RETURNING id", name)
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete project %s: %s: %w", name, c.table, err), nil))
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return t.fail(err)
			}
			t.addEvent(name, k, id, eim.OpDeleted)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete project %s: %s: %w", name, c.table, err), nil))
		}
	}
	// Its clusters and templates (not resources), and the connect
	// module's credentials and tunnels of its clusters.
	if err := s.deleteClustersOf(ctx, t, name); err != nil {
		return err
	}
	for _, q := range []string{"DELETE FROM eim_connect_credentials WHERE project = ?", "DELETE FROM eim_connect_tunnels WHERE project = ?"} {
		if _, err := t.exec(ctx, q, name); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete project %s: %w", name, err), nil))
		}
	}
	// The project's audit records, its audit numbering and audit cursors
	// go with it: a project created later under the name must not see
	// them, and numbers its records from 1.
	for _, q := range []string{"DELETE FROM audit_log WHERE project = ?", "DELETE FROM audit_seqs WHERE project = ?", "DELETE FROM webhook_cursors WHERE project = ?", "DELETE FROM metadata_pairs WHERE project = ?"} {
		if _, err := t.exec(ctx, q, name); err != nil {
			return t.fail(s.d.translate(fmt.Errorf("delete project %s: %w", name, err), nil))
		}
	}
	if _, err := t.exec(ctx, "DELETE FROM projects WHERE name = ?", name); err != nil {
		return t.fail(s.d.translate(fmt.Errorf("delete project %s: %w", name, err), nil))
	}
	t.addEvent(name, eim.KindProject, name, eim.OpDeleted)
	return nil
}

// deletionOrder returns the kinds so that each comes before every kind it
// references (eim.Kinds() is not in reference order: hosts reference
// providers, instances reference OSes and local accounts).
var deletionOrder = sync.OnceValue(func() []eim.Kind {
	kinds := eim.Kinds()
	done := map[eim.Kind]bool{}
	var out []eim.Kind
	for len(out) < len(kinds) {
		progressed := false
		for _, k := range kinds {
			if done[k] {
				continue
			}
			// k may go when every remaining kind that references it is gone.
			free := true
			for _, ref := range codecOf(k).referrers {
				if ref.kind != k && !done[ref.kind] {
					free = false
				}
			}
			if free {
				done[k] = true
				out = append(out, k)
				progressed = true
			}
		}
		if !progressed {
			panic("sqlstore: reference cycle between kinds")
		}
	}
	return out
})
