-- The boot a host's node last reported in its heartbeats (the agent's
-- /proc/sys/kernel/random/boot_id; the host module writes it when it
-- changes): the oob module confirms a RESET or POWER_CYCLE job by a new
-- one. '' is none reported.
ALTER TABLE hosts ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
