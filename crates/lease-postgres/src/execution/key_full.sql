-- Whether the row `e`'s key is at its limit (issue 21 item 4), spliced as `{key_full}`:
-- its live leases plus `{taken}` (the leases the statement itself is issuing for the key)
-- reach its limit. False for an unkeyed row and for a key without a limit.
(e.concurrency_key IS NOT NULL AND {key_cap} IS NOT NULL
    AND {key_live} + {taken} >= {key_cap})
