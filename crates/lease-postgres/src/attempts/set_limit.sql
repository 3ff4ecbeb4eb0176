-- `$1 workflow (NULL: the namespace default), $2 limit` -> nothing. Upserts the scope's row
-- of `attempt_limits` (schema v15). No wake-up: a limit makes nothing claimable; claims
-- read the table in their own statements and copy the limit onto each row they claim.
INSERT INTO {s}.attempt_limits AS l (workflow, max_attempts) VALUES ($1, $2)
ON CONFLICT (workflow) DO UPDATE SET max_attempts = EXCLUDED.max_attempts
