package inventory

import (
	"context"
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"

	"github.com/eimhq/eim"
)

// reProjectName: a lowercase DNS label (it appears in URL paths and role
// names), at most 63 characters.
var reProjectName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CreateProject creates a tenant. id "" gets a new random (v4) UUID.
func (s *Service) CreateProject(ctx context.Context, name, id string) (*eim.Project, error) {
	if !reProjectName.MatchString(name) {
		return nil, eim.Errorf(eim.EINVALID, "name: %q must be 1 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit", name)
	}
	if id == "" {
		id = newUUID()
	} else if !eim.ValidUUID(id) {
		return nil, eim.Errorf(eim.EINVALID, "id: %q is not a UUID", id)
	}
	p := &eim.Project{Name: name, ID: strings.ToLower(id), CreatedAt: eim.NewTime(s.now())}
	if err := s.store.CreateProject(ctx, p); err != nil {
		return nil, err
	}
	if err := s.syncDefaultProvider(ctx, name, p.Settings); err != nil {
		return nil, fmt.Errorf("default provider: %w", err)
	}
	return p, nil
}

// FindProject returns the project with the name, or ENOTFOUND.
func (s *Service) FindProject(ctx context.Context, name string) (*eim.Project, error) {
	return s.store.FindProject(ctx, name)
}

// FindProjectByID returns the project whose ID is id (a UUID, in any
// letter case), or ENOTFOUND; anything but a UUID is EINVALID.
func (s *Service) FindProjectByID(ctx context.Context, id string) (*eim.Project, error) {
	if !eim.ValidUUID(id) {
		return nil, eim.Errorf(eim.EINVALID, "project id: not a UUID")
	}
	return s.store.FindProjectByID(ctx, id)
}

// ListProjects returns every project.
func (s *Service) ListProjects(ctx context.Context) ([]*eim.Project, error) {
	return s.store.ListProjects(ctx)
}

// DeleteProject deletes a project at once, in one transaction (what a
// deployment without the tenant module does). A project that still holds
// resources is refused (EPRECONDITION listing what it holds) unless force
// is set, in which case everything in it goes too.
func (s *Service) DeleteProject(ctx context.Context, name string, force bool) error {
	if _, err := s.store.FindProject(ctx, name); err != nil {
		return err
	}
	if !force {
		if err := s.checkEmpty(ctx, name); err != nil {
			return err
		}
	}
	return s.store.DeleteProject(ctx, name)
}

// checkEmpty refuses (EPRECONDITION) a project that holds resources other
// than its defaults (the default provider, the OS catalog's profiles, the
// tenant's defaults).
func (s *Service) checkEmpty(ctx context.Context, name string) error {
	_, applied, err := s.store.AppliedDefaults(ctx, name)
	if err != nil {
		return err
	}
	var defaults []string
	for _, a := range applied {
		defaults = append(defaults, a.ResourceID)
	}
	var parts []string
	err = s.store.View(ctx, name, func(tx eim.Tx) error {
		for _, k := range eim.Kinds() {
			n, err := tx.Count(ctx, k, eim.Query{})
			if err != nil || n == 0 {
				if err != nil {
					return err
				}
				continue
			}
			// The defaults are part of every project: the default
			// provider, the OS profiles of the catalog (a profile name
			// set), the tenant's defaults.
			switch k {
			case eim.KindProvider:
				d, err := tx.Count(ctx, k, eim.Query{Where: []eim.Cond{{Field: "name", Value: DefaultProviderName}}})
				if err != nil {
					return err
				}
				n -= d
			case eim.KindOS:
				if n, err = tx.Count(ctx, k, eim.Query{Where: []eim.Cond{{Field: "profileName", Value: ""}}}); err != nil {
					return err
				}
			default:
				if len(defaults) > 0 {
					d, err := tx.Count(ctx, k, eim.Query{Where: []eim.Cond{{Field: "resourceId", Value: defaults}}})
					if err != nil {
						return err
					}
					n -= d
				}
			}
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, eim.SchemaOf(k).Table))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Clusters are not resources; templates are (like the defaults) not
	// counted.
	cs, err := s.store.ListClusters(ctx, name)
	if err != nil {
		return err
	}
	if len(cs) > 0 {
		parts = append(parts, fmt.Sprintf("%d clusters", len(cs)))
	}
	if len(parts) > 0 {
		return eim.Errorf(eim.EPRECONDITION, "project %s is not empty (%s); delete with force to remove it and everything in it",
			name, strings.Join(parts, ", "))
	}
	return nil
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
