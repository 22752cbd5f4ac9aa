-- Managers and onboarding find a host's instance in transactions over all
-- projects, where the (project, host_id) index cannot serve "host_id = ?".
CREATE INDEX instances_host_idx ON instances (host_id) WHERE host_id IS NOT NULL;
