package eim

import "context"

// The tenant module's records of a project (see package tenant): which
// version of the defaults it has, each module's readiness, and its
// deletion while the cascade runs. They are not resources: no events, no
// generic API; they go with the project.

// Condition is a module's readiness for a project: whether the module has
// initialised it (the tenant its defaults, os its OS catalog), and since
// when that has been so.
type Condition struct {
	Module  string `json:"module"`
	Ready   bool   `json:"ready"`
	Message string `json:"message"`
	Since   Time   `json:"since"`
}

// AppliedDefault is a default the tenant module applied to a project: its
// key in the definition, the resource that holds it, and the digest of
// what was written ("" for a resource of the project's own that it
// adopted by its name, which is never changed).
type AppliedDefault struct {
	Key        string
	ResourceID string
	Digest     string
}

// ProjectDeletion is a project being deleted: the cascade's phase, what
// is left of it, and the last error met (retried).
type ProjectDeletion struct {
	Project   string
	Phase     string
	Remaining int
	Started   Time
	Updated   Time
	Error     string
}

// TenantStore is what the tenant module keeps per project; the Store
// implements it (ENOTFOUND for a project that does not exist).
type TenantStore interface {
	// AppliedDefaults returns the version of the defaults the project was
	// last brought to (0: never) and the defaults applied.
	AppliedDefaults(ctx context.Context, project string) (version int, applied []AppliedDefault, err error)
	// SaveAppliedDefaults records version and replaces the project's
	// applied defaults with applied.
	SaveAppliedDefaults(ctx context.Context, project string, version int, applied []AppliedDefault) error

	// SetCondition records module c.Module's readiness for the project;
	// c.Since is ignored: it becomes now when Ready changes (or is first
	// recorded) and stays otherwise.
	SetCondition(ctx context.Context, project string, c Condition) error
	// Conditions returns the project's conditions, by module.
	Conditions(ctx context.Context, project string) ([]Condition, error)

	// StartProjectDeletion records that the project is to be deleted
	// (phase first), unless it is already, and returns its deletion.
	StartProjectDeletion(ctx context.Context, project, first string) (*ProjectDeletion, error)
	// FindProjectDeletion returns the project's deletion, or ENOTFOUND
	// when it is not being deleted.
	FindProjectDeletion(ctx context.Context, project string) (*ProjectDeletion, error)
	// ProjectDeletions returns every deletion under way, oldest first.
	ProjectDeletions(ctx context.Context) ([]*ProjectDeletion, error)
	// SaveProjectDeletion records d's phase, remaining and error.
	SaveProjectDeletion(ctx context.Context, d *ProjectDeletion) error
	// FinishProjectDeletion removes the project with every resource in it
	// and its records (as DeleteProject) if it is being deleted by the
	// deletion that started at started; ENOTFOUND otherwise (it is gone,
	// or a project that took its name since is not this deletion's).
	FinishProjectDeletion(ctx context.Context, project string, started Time) error
}
