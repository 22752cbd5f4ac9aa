package inventory

import (
	"context"
	"slices"

	"github.com/eimhq/eim"
)

// A project's deletion runs as a persisted job (eim.ProjectDeletion) in
// phases, in the original's tenant controller's order; the tenant module
// runs it (package tenant), a batch at a time, resumable at any point.

// DeletionPhase is a phase of a project's deletion: the kinds it deletes,
// in their order.
type DeletionPhase struct {
	Name  string
	Kinds []eim.Kind
}

// The phases' names that are not a list of kinds.
const (
	// PhaseDeauthorize revokes every node's credentials first, so that
	// the nodes of the project are no longer served from then on.
	PhaseDeauthorize = "deauthorize"
	// PhaseClusters removes the project's clusters and cluster
	// templates (not resources: the clusters module's store) and the
	// connect module's credentials and tunnels of its clusters. The
	// nodes, their credentials revoked, are not told to uninstall.
	PhaseClusters = "clusters"
	// PhaseProject removes the project itself (with what is left of it,
	// and its records), after which its name is free.
	PhaseProject = "project"
)

// DeletionPhases are the phases of a project's deletion, in order:
// credentials, clusters, telemetry profiles and groups, schedules, workloads,
// instances and hosts (two-phase; their OS update runs and workflows
// first), OS update policies and OS profiles, sites, regions, providers,
// local accounts, custom configs, the project.
var DeletionPhases = []DeletionPhase{
	{PhaseDeauthorize, nil},
	{PhaseClusters, nil},
	{"telemetry", []eim.Kind{eim.KindTelemetryProfile, eim.KindTelemetryGroup}},
	{"schedules", []eim.Kind{eim.KindSingleSchedule, eim.KindRepeatedSchedule}},
	{"workloads", []eim.Kind{eim.KindWorkloadMember, eim.KindWorkload}},
	{"hosts", []eim.Kind{eim.KindOSUpdateRun, eim.KindWorkflow, eim.KindInstance, eim.KindHost}},
	{"os", []eim.Kind{eim.KindOSUpdatePolicy, eim.KindOS}},
	{"sites", []eim.Kind{eim.KindSite}},
	{"regions", []eim.Kind{eim.KindRegion}},
	{"providers", []eim.Kind{eim.KindProvider}},
	{"localaccounts", []eim.Kind{eim.KindLocalAccount}},
	{"customconfigs", []eim.Kind{eim.KindCustomConfig}},
	{PhaseProject, nil},
}

// NextPhase returns the phase after name, or "" after the last (or for
// an unknown name).
func NextPhase(name string) string {
	i := slices.IndexFunc(DeletionPhases, func(p DeletionPhase) bool { return p.Name == name })
	if i < 0 || i+1 == len(DeletionPhases) {
		return ""
	}
	return DeletionPhases[i+1].Name
}

// PhaseOf returns the phase named name, or false.
func PhaseOf(name string) (DeletionPhase, bool) {
	i := slices.IndexFunc(DeletionPhases, func(p DeletionPhase) bool { return p.Name == name })
	if i < 0 {
		return DeletionPhase{}, false
	}
	return DeletionPhases[i], true
}

// StartProjectDeletion starts deleting a project through the tenant
// module's cascade and returns its deletion (the one under way when it was
// started already). Unless force is set a project that holds resources
// other than its defaults is refused (EPRECONDITION), as DeleteProject.
func (s *Service) StartProjectDeletion(ctx context.Context, name string, force bool) (*eim.ProjectDeletion, error) {
	p, err := s.store.FindProject(ctx, name)
	if err != nil {
		return nil, err
	}
	if !force && !p.Deleting {
		if err := s.checkEmpty(ctx, name); err != nil {
			return nil, err
		}
	}
	return s.store.StartProjectDeletion(ctx, name, DeletionPhases[0].Name)
}

// ProjectDeletions returns the deletions under way.
func (s *Service) ProjectDeletions(ctx context.Context) ([]*eim.ProjectDeletion, error) {
	return s.store.ProjectDeletions(ctx)
}

// SaveProjectDeletion records a deletion's progress.
func (s *Service) SaveProjectDeletion(ctx context.Context, d *eim.ProjectDeletion) error {
	return s.store.SaveProjectDeletion(ctx, d)
}

// FinishProjectDeletion removes the project of deletion d and what is left
// in it (its records too): its name is free from then on. A project gone
// already, or one that took the name since, is not an error (and is left
// alone).
func (s *Service) FinishProjectDeletion(ctx context.Context, d *eim.ProjectDeletion) error {
	err := s.store.FinishProjectDeletion(ctx, d.Project, d.Started)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		return nil
	}
	return err
}

// FindProjectDeletion returns the project's deletion, or ENOTFOUND.
func (s *Service) FindProjectDeletion(ctx context.Context, name string) (*eim.ProjectDeletion, error) {
	return s.store.FindProjectDeletion(ctx, name)
}

// ProjectStatus is a project's readiness and, while it is being deleted,
// its deletion's progress.
type ProjectStatus struct {
	Ready      bool
	Conditions []eim.Condition
	Deletion   *eim.ProjectDeletion
}

// ProjectStatus returns the status of the project: its conditions of the
// modules initialising projects that run in the deployment (initialisers;
// one that has not recorded its condition yet shows not ready), ready
// when all are and it is not being deleted. Modules that do not run take
// no part.
func (s *Service) ProjectStatus(ctx context.Context, name string, initialisers []string) (*ProjectStatus, error) {
	p, err := s.store.FindProject(ctx, name)
	if err != nil {
		return nil, err
	}
	stored, err := s.store.Conditions(ctx, name)
	if err != nil {
		return nil, err
	}
	st := &ProjectStatus{Ready: true, Conditions: []eim.Condition{}}
	for _, m := range initialisers {
		i := slices.IndexFunc(stored, func(c eim.Condition) bool { return c.Module == m })
		c := eim.Condition{Module: m, Message: "waiting for module " + m + " to initialise the project", Since: p.CreatedAt}
		if i >= 0 {
			c = stored[i]
		}
		st.Ready = st.Ready && c.Ready
		st.Conditions = append(st.Conditions, c)
	}
	d, err := s.store.FindProjectDeletion(ctx, name)
	switch {
	case err == nil:
		st.Deletion, st.Ready = d, false
	case eim.ErrorCode(err) != eim.ENOTFOUND:
		return nil, err
	}
	return st, nil
}

// Conditions returns the conditions recorded on the project, by module.
func (s *Service) Conditions(ctx context.Context, project string) ([]eim.Condition, error) {
	return s.store.Conditions(ctx, project)
}

// SetCondition records module's readiness for the project.
func (s *Service) SetCondition(ctx context.Context, project string, c eim.Condition) error {
	return s.store.SetCondition(ctx, project, c)
}

// AppliedDefaults returns the version of the defaults the project has and
// the defaults applied (see eim.TenantStore).
func (s *Service) AppliedDefaults(ctx context.Context, project string) (int, []eim.AppliedDefault, error) {
	return s.store.AppliedDefaults(ctx, project)
}

// SaveAppliedDefaults records the defaults applied to the project.
func (s *Service) SaveAppliedDefaults(ctx context.Context, project string, version int, applied []eim.AppliedDefault) error {
	return s.store.SaveAppliedDefaults(ctx, project, version, applied)
}

// DeleteClustersOf removes a project's clusters, cluster templates and
// connect credentials and tunnels (a phase of its deletion).
func (s *Service) DeleteClustersOf(ctx context.Context, project string) error {
	if err := s.store.DeleteClustersOf(ctx, project); err != nil {
		return err
	}
	return s.store.DeleteConnectOf(ctx, project)
}
