-- A host's UUID is kept as the client wrote it and compared without regard
-- to case (two hosts cannot have the same UUID in different cases): the
-- unique index is on lower(uuid), and the store's lookups by uuid use it.
-- UUIDs stored before were lowercased already.
DROP INDEX hosts_uuid_key;
CREATE UNIQUE INDEX hosts_uuid_key ON hosts (lower(uuid)) WHERE uuid <> '';
