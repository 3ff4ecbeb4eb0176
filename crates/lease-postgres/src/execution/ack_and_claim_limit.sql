-- The claim limit of `acknowledge_and_claim`'s claim, replacing the claim's `$3`:
-- `$6 id, $7 lease token, $3 limit` -> `$3` when the acknowledgement was not refused
-- outright, else 0 (the claim then writes nothing). Refused (token 0, an unknown execution,
-- or a token above the execution's latest) is decided on the same row `acknowledge.sql`
-- locked earlier in the transaction (by its update, or `FOR NO KEY UPDATE` when the update
-- did not apply), so it cannot have changed in between and this agrees with the
-- acknowledgement's verdict. An id unknown to the
-- acknowledgement and admitted since has token 0, still below `$7`.
(CASE WHEN EXISTS (
    SELECT 1 FROM {s}.executions g WHERE g.id = $6 AND g.token >= $7 AND $7 > 0
) THEN $3 ELSE 0 END)
