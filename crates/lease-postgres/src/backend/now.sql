-- `()` -> the database clock.
SELECT {now}
