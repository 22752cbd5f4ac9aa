-- A device's rows of the edge workloads' tables (0023) are read at each of
-- its reports (its status rows' names) and at each GetWorkloads (its
-- targets' names and revisions), by project and host. SQLite served those
-- reads from the primary key's prefix (project), which covered them, over
-- the (project, host_id) index, which did not: every read walked every row
-- of the project, and a fleet's status fan-in grew with the square of its
-- devices. The host indexes now cover the reads, so they win with or
-- without planner statistics (PRAGMA optimize drops statistics of tables
-- that are empty when it runs).
DROP INDEX edge_workload_targets_host;
CREATE INDEX edge_workload_targets_host ON edge_workload_targets (project, host_id, name, revision);
DROP INDEX edge_workload_status_host;
CREATE INDEX edge_workload_status_host ON edge_workload_status (project, host_id, name);
