-- A machine's UUID is claimed per project: two projects may each register
-- it (onboarding gives the device to the earliest registration and flags
-- the later ones, see onboarding/identity.go). Within a project it stays
-- unique. Discover looks UUIDs up across projects through hosts_uuid_idx.
DROP INDEX hosts_uuid_key;
CREATE UNIQUE INDEX hosts_uuid_key ON hosts (project, uuid) WHERE uuid <> '';
CREATE INDEX hosts_uuid_idx ON hosts (uuid) WHERE uuid <> '';
