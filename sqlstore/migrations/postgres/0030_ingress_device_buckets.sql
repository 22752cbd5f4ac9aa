-- The ingress data paths' outcome per device and workload, beside the
-- egress paths' (0023): when a file was last downloaded or removed (Unix
-- milliseconds, 0 none) and the last pass's errors (JSON array).
ALTER TABLE edge_workload_status ADD COLUMN last_data_download BIGINT NOT NULL DEFAULT 0;
ALTER TABLE edge_workload_status ADD COLUMN download_errors TEXT NOT NULL DEFAULT '[]';

-- A project's object storage may give each device a bucket of its own: the
-- bucket names' template ('' none: every device under the one bucket).
ALTER TABLE object_storage ADD COLUMN bucket_per_device TEXT NOT NULL DEFAULT '';
