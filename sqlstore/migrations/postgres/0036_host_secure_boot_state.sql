-- The firmware's Secure Boot state a host's node last reported (its
-- micro-OS reads the EFI variables SecureBoot and SetupMode and sends the
-- state at Discover and with its request for the workflow; the onboarding
-- and provisioning modules write it), and when, unix seconds (0: never).
-- An EIM extension of the original's host (docs/security.md). Hosts from
-- before it show it not reported.
ALTER TABLE hosts ADD COLUMN secure_boot_state TEXT NOT NULL DEFAULT 'SECURE_BOOT_STATE_UNSPECIFIED';
ALTER TABLE hosts ADD COLUMN secure_boot_state_timestamp BIGINT NOT NULL DEFAULT 0;
