package eim

import "slices"

// Role names. Project roles are "<projectID>_im-r" (read) and
// "<projectID>_im-rw" (read and write), as the original's Keycloak realm
// issues them; the project's name is accepted in place of its ID so that
// tokens minted for a project by name work too.
const (
	RoleAdmin       = "eim-admin" // everything, including project administration
	roleReadSuffix  = "_im-r"
	roleWriteSuffix = "_im-rw"
	// The original's cluster roles: "<project>_cl-r" reads a project's
	// clusters, "_cl-rw" changes them (and reaches them through the
	// connect gateway with a write role).
	roleClusterRead  = "_cl-r"
	roleClusterWrite = "_cl-rw"
	// The original's cluster template roles: "_cl-tpl-r" reads a
	// project's cluster templates, "_cl-tpl-rw" changes them.
	roleTemplateRead  = "_cl-tpl-r"
	roleTemplateWrite = "_cl-tpl-rw"
)

// Principal is an authenticated caller: a user, a tool or a node.
type Principal struct {
	Subject string   // token subject
	Roles   []string // realm roles
}

// IsAdmin reports whether the principal may do everything.
func (p *Principal) IsAdmin() bool { return p != nil && slices.Contains(p.Roles, RoleAdmin) }

// CanRead reports whether the principal may read the project's resources.
func (p *Principal) CanRead(proj *Project) bool {
	return p.CanWrite(proj) || p.has(proj, roleReadSuffix)
}

// CanWrite reports whether the principal may change the project's resources.
func (p *Principal) CanWrite(proj *Project) bool {
	return p.IsAdmin() || p.has(proj, roleWriteSuffix)
}

// CanReadClusters reports whether the principal may read the project's
// clusters: a read role on the project or a cluster role.
func (p *Principal) CanReadClusters(proj *Project) bool {
	return p.CanWriteClusters(proj) || p.CanRead(proj) || p.has(proj, roleClusterRead)
}

// CanWriteClusters reports whether the principal may change the
// project's clusters: a write role on the project or the cluster write
// role.
func (p *Principal) CanWriteClusters(proj *Project) bool {
	return p.CanWrite(proj) || p.has(proj, roleClusterWrite)
}

// CanReadTemplates reports whether the principal may read the project's
// cluster templates: a role that reads its clusters or a template role.
func (p *Principal) CanReadTemplates(proj *Project) bool {
	return p.CanWriteTemplates(proj) || p.CanReadClusters(proj) || p.has(proj, roleTemplateRead)
}

// CanWriteTemplates reports whether the principal may change the
// project's cluster templates: a role that changes its clusters or the
// template write role.
func (p *Principal) CanWriteTemplates(proj *Project) bool {
	return p.CanWriteClusters(proj) || p.has(proj, roleTemplateWrite)
}

// ClusterRoleName returns the cluster role name of a project (ID-keyed, as
// the original's).
func ClusterRoleName(proj *Project, write bool) string {
	key := proj.ID
	if key == "" {
		key = proj.Name
	}
	if write {
		return key + roleClusterWrite
	}
	return key + roleClusterRead
}

func (p *Principal) has(proj *Project, suffix string) bool {
	if p == nil || proj == nil {
		return false
	}
	for _, r := range p.Roles {
		if (proj.ID != "" && r == proj.ID+suffix) || r == proj.Name+suffix {
			return true
		}
	}
	return false
}

// The original's project roles besides EIM's own (its Keycloak tenant
// controller gave each project's groups these, "<projectID>_<suffix>"),
// which its web UI looks for to show a page (a read role) and its write
// controls (a write role): cluster templates, alerts, the application
// catalog, application orchestration and telemetry. EIM serves the
// cluster templates (CanReadTemplates); the others name services EIM
// does not have, and it grants nothing by them.
var (
	uiReadRoles  = []string{roleClusterRead, roleTemplateRead, "_alrt-r", "_cat-r", "_tc-r"}
	uiWriteRoles = []string{roleClusterWrite, roleTemplateWrite, "_alrt-rw", "_cat-rw", "_ao-rw", "_tc-r"}
)

// ProjectRoles returns the roles of a token minted for a project's writer
// (write) or reader: EIM's own role (ProjectRole: _im-rw, _im-r) first,
// then the original's other project roles of the same kind, each keyed by
// the project's ID as the original's are, so that the original's web UI
// shows a writer its write controls and a reader none. A writer's set
// holds _im-r too (the original's managers had it); a reader's holds no
// write role (the original's operator group had _ao-rw, for application
// deployments, which EIM does not have).
func ProjectRoles(proj *Project, write bool) []string {
	key := proj.ID
	if key == "" {
		key = proj.Name
	}
	out := []string{ProjectRole(proj, write)}
	suffixes := uiReadRoles
	if write {
		out = append(out, ProjectRole(proj, false))
		suffixes = uiWriteRoles
	}
	for _, s := range suffixes {
		out = append(out, key+s)
	}
	return out
}

// ProjectRole returns the role name granting access to a project.
func ProjectRole(proj *Project, write bool) string {
	key := proj.ID
	if key == "" {
		key = proj.Name
	}
	if write {
		return key + roleWriteSuffix
	}
	return key + roleReadSuffix
}
