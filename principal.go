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
