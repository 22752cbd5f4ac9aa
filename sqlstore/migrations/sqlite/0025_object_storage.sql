-- Object storage (package objstore): a project's S3-compatible bucket for
-- its devices' uploads, at most one per project, gone with its project.
-- secret_key is sealed (AES-GCM under the server's secrets key, package
-- seal): never in the clear here. reachable is the check made when it was
-- saved (JSON). Times are unix milliseconds.
CREATE TABLE object_storage (
    project TEXT PRIMARY KEY REFERENCES projects (name) ON DELETE CASCADE,
    endpoint TEXT NOT NULL,
    bucket TEXT NOT NULL,
    key_prefix TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL,
    path_style BOOLEAN NOT NULL DEFAULT FALSE,
    access_key_id TEXT NOT NULL,
    secret_key TEXT NOT NULL,
    ca_cert TEXT NOT NULL DEFAULT '',
    max_file_size BIGINT NOT NULL DEFAULT 0,
    reachable TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
