-- The wake-up of a statement, as the head of a `note` CTE over the rows it made claimable
-- (`... FROM <rows> [WHERE ...] HAVING ...`): one `pg_notify` on the schema's channel
-- `{chan}` with the earliest `claimable_at` of those rows, in backend-clock milliseconds.
-- Inside the writing statement, so it is sent at its commit and never if it rolls back.
-- Every statement reads the CTE through a scalar subquery in an output row it returns
-- whenever it wrote something, so the CTE is evaluated.
SELECT pg_notify('{chan}', min(claimable_at)::text)
