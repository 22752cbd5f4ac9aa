-- The rows that nodes update all through their lives (hosts, instances,
-- workflows) leave a sixth of each page free, so that an update that does
-- not change an indexed column is a heap-only tuple (HOT) update: written
-- in the same page, with no new index entries. Existing pages keep their
-- layout until they are rewritten; new ones follow the setting.
ALTER TABLE hosts SET (fillfactor = 85);
ALTER TABLE instances SET (fillfactor = 85);
ALTER TABLE workflows SET (fillfactor = 85);
