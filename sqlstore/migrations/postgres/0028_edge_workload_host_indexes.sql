-- A device's rows of the edge workloads' tables (0023) are read at each of
-- its reports and at each GetWorkloads, by project and host: the host
-- indexes cover those reads (index-only scans), as on SQLite, where
-- without it the primary key's prefix was chosen and every read walked the
-- whole project.
DROP INDEX edge_workload_targets_host;
CREATE INDEX edge_workload_targets_host ON edge_workload_targets (project, host_id, name, revision);
DROP INDEX edge_workload_status_host;
CREATE INDEX edge_workload_status_host ON edge_workload_status (project, host_id, name);
