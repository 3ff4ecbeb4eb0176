-- `$1 id, $2 at, $3 delays` -> (whether the execution exists, notification count).
-- Unfenced: the wake (`statements/wake.sql`) of `$1` at `$2`.
WITH wake_targets AS (SELECT $1::text AS id, $2::bigint AS at, $3::bigint[] AS delays),
{wake}
SELECT EXISTS (SELECT 1 FROM woken) OR EXISTS (SELECT 1 FROM {s}.executions WHERE id = $1),
    (SELECT count(*) FROM note)
