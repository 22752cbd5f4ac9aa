-- The metadata pairs posted to POST /v1/projects/{name}/metadata (the
-- original's metadata broker, which the web UI sends the labels of what it
-- saves to): remembered per project, lower-cased as the broker stored them,
-- for the label suggestions of GET …/metadata (with the labels the
-- project's resources carry). Not resources: no events; only the store's
-- unscoped connections use them, every statement naming the project; they
-- go with their project.
CREATE TABLE metadata_pairs (
    project TEXT NOT NULL,
    label_key TEXT NOT NULL,
    label_value TEXT NOT NULL,
    PRIMARY KEY (project, label_key, label_value)
);
