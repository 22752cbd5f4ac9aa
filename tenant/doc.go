// Package tenant is the tenant module: what happens to a project as a
// whole.
//
//   - Defaults: every project gets the defaults of one versioned
//     definition (Defaults: the default telemetry groups and the
//     infra_onboarding provider; the OS catalog is the os module's), as
//     the original's tenant controller created them. Unlike the original,
//     which applied them once, a definition with a new version is applied
//     again to every project, creating what it misses and following the
//     definition where the project still has the default as it was
//     written; a default a user changed or deleted is left alone (each
//     project's record of what was applied, eim.TenantStore, tells).
//   - Readiness: each module that initialises projects (this one, os)
//     records its condition on the project (eim.Condition); the API shows
//     the conditions of those that run in the deployment, and a project is
//     ready once they all are. A module not deployed takes no part.
//   - Deletion: a project's deletion is a persisted job
//     (eim.ProjectDeletion) run in the phases of inventory.DeletionPhases
//     (node credentials revoked first, the project itself last), a batch
//     per transaction, by one process of the deployment at a time (a
//     run-once loop): a process killed at any point leaves the job where
//     the next one resumes it.
package tenant
