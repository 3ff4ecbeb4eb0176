-- Releases lock.sql's session advisory lock (`$1` its name).
SELECT pg_advisory_unlock(hashtextextended($1, 0))
