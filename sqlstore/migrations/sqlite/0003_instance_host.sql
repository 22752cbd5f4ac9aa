-- Managers and onboarding find a host's instance in transactions over all
-- projects, where the (project, host_id) index cannot serve "host_id = ?".
CREATE INDEX instances_host_idx ON instances (host_id) WHERE host_id IS NOT NULL;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('instances', 'instances_host_idx', '100000 1');

-- Without a statistic, SQLite may serve "serial_number = ? ORDER BY id" from
-- the (project, id) index, walking every host of the project in id order.
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hosts', 'hosts_serial_number_idx', '100000 2');
