-- Planner statistics for the edge workloads' tables (0023), as the other
-- tables have theirs: without them SQLite served a device's lookups
-- (project = ? AND host_id = ?: its status rows at each report, its targets
-- at each GetWorkloads) from the primary key's prefix (project), reading
-- every row of the project: a fleet's status fan-in grew with the square of
-- its devices. The figures say a project holds many rows and a device few.
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('edge_workload_targets', 'sqlite_autoindex_edge_workload_targets_1', '100000 100000 10000 1'),
    ('edge_workload_targets', 'edge_workload_targets_host', '100000 100000 3'),
    ('edge_workload_status', 'sqlite_autoindex_edge_workload_status_1', '100000 100000 10000 1'),
    ('edge_workload_status', 'edge_workload_status_host', '100000 100000 3');
