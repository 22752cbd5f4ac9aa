-- Node authentication reads five columns of one host on every southbound
-- call (Store.NodeCredentials). From the table it walks to a wide row,
-- whose pages a big fleet keeps out of the connections' caches; this
-- covering index holds just those columns, about 150 bytes a host, so the
-- read stays in cache. (PostgreSQL's shared buffers keep its primary key
-- hot; it has no such index.)
CREATE INDEX hosts_node_credentials_idx ON hosts (id, project, desired_state, node_secret_hash, node_cred_gen);
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hosts', 'hosts_node_credentials_idx', '100000 1 1 1 1 1');
