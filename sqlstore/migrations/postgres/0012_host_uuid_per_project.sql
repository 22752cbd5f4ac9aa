-- A machine's UUID is claimed per project: two projects may each register
-- it (onboarding gives the device to the earliest registration and flags
-- the later ones, see onboarding/identity.go). Within a project it stays
-- unique, without regard to case (0011). Discover looks UUIDs up across
-- projects through hosts_uuid_idx.
DROP INDEX hosts_uuid_key;
CREATE UNIQUE INDEX hosts_uuid_key ON hosts (project, lower(uuid)) WHERE uuid <> '';
CREATE INDEX hosts_uuid_idx ON hosts (lower(uuid)) WHERE uuid <> '';
