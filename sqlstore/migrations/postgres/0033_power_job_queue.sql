-- A power job waiting for a site's power-on slot (the oob module's
-- siteslot.go): the slot key it waits for ('' none) and since when (unix
-- milliseconds), so that a process's first waiting job counts the jobs
-- of every process that wait for the site before it
-- (CountQueuedPowerJobs), not its own process's only.
ALTER TABLE power_jobs ADD COLUMN queued_for TEXT NOT NULL DEFAULT '';
ALTER TABLE power_jobs ADD COLUMN queued_since BIGINT NOT NULL DEFAULT 0;
CREATE INDEX power_jobs_queued_idx ON power_jobs (project, queued_for, queued_since) WHERE queued_for <> '';
