-- Power policy (the oob module, docs/oob.md "Power policy"): ALWAYS_ON or
-- REPORT, set on a host's BMC, on a site or in the project's settings
-- (JSON, no column); '' is unset (the next level decides; REPORT when none
-- does). A power job's reason says why it was made ("" a user's request).
ALTER TABLE bmcs ADD COLUMN power_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE sites ADD COLUMN power_policy TEXT NOT NULL DEFAULT '';
ALTER TABLE power_jobs ADD COLUMN reason TEXT NOT NULL DEFAULT '';
