-- The enrollment lobby (the onboarding module, docs/enrollment.md): devices
-- that called home with a project's enrollment token and match no host
-- (enrollment_requests, one per device and project: identity_key is
-- "uuid:<uuid>" or "serial:<serial>"), and the project's auto-approval
-- rules (enrollment_rules). Not Store resources (sqlstore/enrollment.go),
-- but scoped to a project like them; they go with the project. Lists and
-- labels are JSON; times are unix milliseconds (decided_at 0: none).
CREATE TABLE enrollment_requests (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    identity_key TEXT NOT NULL,
    uuid TEXT NOT NULL DEFAULT '',
    serial_number TEXT NOT NULL DEFAULT '',
    macs TEXT NOT NULL DEFAULT '[]',
    hostname TEXT NOT NULL DEFAULT '',
    hardware TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '[]',
    installed BOOLEAN NOT NULL DEFAULT FALSE,
    state TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    decided_by TEXT NOT NULL DEFAULT '',
    decided_at BIGINT NOT NULL DEFAULT 0,
    rule_id TEXT NOT NULL DEFAULT '',
    host_id TEXT NOT NULL DEFAULT '',
    approval TEXT NOT NULL DEFAULT '{}',
    attempts BIGINT NOT NULL DEFAULT 0,
    first_seen BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    PRIMARY KEY (project, id),
    CONSTRAINT enrollment_requests_project_fkey FOREIGN KEY (project) REFERENCES projects (name) ON DELETE CASCADE
);
CREATE UNIQUE INDEX enrollment_requests_identity ON enrollment_requests (project, identity_key);
CREATE INDEX enrollment_requests_seen ON enrollment_requests (project, last_seen);
CREATE INDEX enrollment_requests_host ON enrollment_requests (project, host_id);

CREATE TABLE enrollment_rules (
    project TEXT NOT NULL,
    id TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    serial_numbers TEXT NOT NULL DEFAULT '[]',
    match_labels TEXT NOT NULL DEFAULT '[]',
    token_hash TEXT NOT NULL DEFAULT '',
    site_id TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project, id),
    CONSTRAINT enrollment_rules_project_fkey FOREIGN KEY (project) REFERENCES projects (name) ON DELETE CASCADE
);
CREATE UNIQUE INDEX enrollment_rules_name ON enrollment_rules (project, name);
CREATE INDEX enrollment_rules_token ON enrollment_rules (token_hash);

-- Before the lobby, a project's enrollment token enrolled every device at
-- once: such projects keep that behaviour through a rule of kind ANY.
INSERT INTO enrollment_rules (project, id, name, kind, created_at)
SELECT name, 'enrollmentrule-' || lower(hex(randomblob(4))), 'any-device', 'ANY', CAST(strftime('%s', 'now') AS INTEGER) * 1000
FROM projects WHERE COALESCE(json_extract(settings, '$.enrollmentTokenHash'), '') <> '';
