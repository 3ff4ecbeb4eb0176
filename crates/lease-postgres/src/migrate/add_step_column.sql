-- The part of the next migration reached (0: none yet), for migrations applied in several
-- steps (an index built concurrently between transactions): a retry resumes there.
ALTER TABLE {s}.lease_schema ADD COLUMN IF NOT EXISTS step integer NOT NULL DEFAULT 0
