-- Rollouts of edge workloads (the workloads module's rollout engine,
-- docs/workloads.md "Rollouts"): each workload's latest rollout, and each
-- device's place in it (its batch and state). Stored so that a restart or
-- another process continues a rollout where it was. generation grows with
-- every write (writes name the generation they read). Times are unix
-- milliseconds.
CREATE TABLE edge_workload_rollouts (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    id BIGINT NOT NULL,
    from_revision BIGINT NOT NULL,
    to_revision BIGINT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    since BIGINT NOT NULL,
    batch BIGINT NOT NULL DEFAULT 0,
    total BIGINT NOT NULL DEFAULT 0,
    batch_started_at BIGINT NOT NULL DEFAULT 0,
    progress_at BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    generation BIGINT NOT NULL,
    PRIMARY KEY (project, name),
    CONSTRAINT edge_workload_rollouts_fkey FOREIGN KEY (project, name) REFERENCES edge_workloads (project, name) ON DELETE CASCADE
);

CREATE TABLE edge_workload_rollout_devices (
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    host_id TEXT NOT NULL,
    batch BIGINT NOT NULL,
    state TEXT NOT NULL,
    since BIGINT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (project, name, host_id),
    CONSTRAINT edge_workload_rollout_devices_fkey FOREIGN KEY (project, name) REFERENCES edge_workload_rollouts (project, name) ON DELETE CASCADE,
    CONSTRAINT edge_workload_rollout_devices_host_fkey FOREIGN KEY (project, host_id) REFERENCES hosts (project, id) ON DELETE CASCADE
);
CREATE INDEX edge_workload_rollout_devices_host ON edge_workload_rollout_devices (project, host_id);
