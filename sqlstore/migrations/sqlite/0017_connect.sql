-- The connect module (package connect): the credentials edge clusters'
-- agents open their tunnels with, and the registry of open tunnels that
-- the gateway replicas share. Not resources: no events, no API of their
-- own; only the store's unscoped connections use them. Times are unix
-- milliseconds.

-- A credential: the hash (SHA-256) of the secret part of a token; the
-- secret itself is never stored.
CREATE TABLE eim_connect_credentials (
    id TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    cluster TEXT NOT NULL,
    hash TEXT NOT NULL,
    created BIGINT NOT NULL,
    expires BIGINT NOT NULL
);
CREATE INDEX eim_connect_credentials_cluster ON eim_connect_credentials (project, cluster);

-- A cluster's open tunnel: the gateway replica that holds it and the
-- address the other replicas forward its requests to.
CREATE TABLE eim_connect_tunnels (
    project TEXT NOT NULL,
    cluster TEXT NOT NULL,
    replica TEXT NOT NULL,
    address TEXT NOT NULL,
    agent_version TEXT NOT NULL,
    connected BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    rtt_us BIGINT NOT NULL,
    PRIMARY KEY (project, cluster)
);
