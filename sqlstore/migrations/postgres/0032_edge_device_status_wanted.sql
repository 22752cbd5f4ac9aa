-- Whether the server holds the status of what a device runs (the
-- workloads module asks for a full ReportStatus in a heartbeat answer
-- when it does not: docs/workloads.md, *Status*). version_at is when the
-- version last moved (unix milliseconds); status_version is the version
-- the device's last stored report named; status_wanted is set once per
-- need and cleared by the next report. Rows that exist already are taken
-- as reported: their stored statuses were current when this ran.
ALTER TABLE edge_devices ADD COLUMN version_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE edge_devices ADD COLUMN status_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE edge_devices ADD COLUMN status_wanted BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE edge_devices SET status_version = version;
