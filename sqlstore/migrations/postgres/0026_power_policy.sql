-- Power policy (the oob module, docs/oob.md "Power policy"): ALWAYS_ON or
-- REPORT, set on a host's BMC, on a site or in the project's settings
-- (JSON, no column); '' is unset (the next level decides; REPORT when none
-- does). A power job's reason says why it was made ("" a user's request).
ALTER TABLE bmcs ADD COLUMN power_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE sites ADD COLUMN power_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE power_jobs ADD COLUMN reason TEXT NOT NULL DEFAULT '';

-- A power request (sqlstore RequestPowerJob) writes the host's
-- desiredPowerState, cancels and adds jobs in one transaction, which runs
-- as the project's tenant: the jobs are the project's, as the resource
-- tables are (the workers' claims run as the store's own role, across
-- projects).
GRANT SELECT, INSERT, UPDATE ON power_jobs TO eim_tenant;
ALTER TABLE power_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY eim_tenant_isolation ON power_jobs TO eim_tenant
    USING (project = current_setting('eim.project', true))
    WITH CHECK (project = current_setting('eim.project', true));
