-- A machine's UUID is claimed per project: two projects may each register
-- it (onboarding gives the device to the earliest registration and flags
-- the later ones, see onboarding/identity.go). Within a project it stays
-- unique, without regard to case (0011). Discover looks UUIDs up across
-- projects through hosts_uuid_idx.
DROP INDEX hosts_uuid_key;
CREATE UNIQUE INDEX hosts_uuid_key ON hosts (project, lower(uuid)) WHERE uuid <> '';
CREATE INDEX hosts_uuid_idx ON hosts (lower(uuid)) WHERE uuid <> '';
DELETE FROM sqlite_stat1 WHERE idx IN ('hosts_uuid_key', 'hosts_uuid_idx');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('hosts', 'hosts_uuid_key', '100000 10000 1'),
    ('hosts', 'hosts_uuid_idx', '100000 1');
