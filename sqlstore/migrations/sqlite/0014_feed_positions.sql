-- Where each named consumer of the change feed stopped (Store.FeedPosition):
-- a consumer that runs once per deployment resumes there when another
-- process takes it over, or after a restart. Not a resource: no events,
-- no API, no project.
CREATE TABLE feed_positions (
    consumer TEXT PRIMARY KEY,
    revision BIGINT NOT NULL,
    saved_at BIGINT NOT NULL
);
