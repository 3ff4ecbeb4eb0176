-- Serialises migrations of one schema across processes: `$1` the lock's name, hashed into a
-- session advisory lock key; true when taken. Tried, not waited for: a session blocked here
-- would hold a snapshot that the holder's concurrent index build waits out.
SELECT pg_try_advisory_lock(hashtextextended($1, 0))
