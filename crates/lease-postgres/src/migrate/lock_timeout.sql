-- `$1` how long each statement of a migration waits for a lock (`lock_timeout`, e.g.
-- '5000ms'), for this session: an ALTER TABLE or index build waiting behind a long
-- transaction would otherwise hold every later statement on its table behind it; it gives
-- up instead (`LeaseError::Unavailable`), and the migration step it was in changes nothing.
SELECT set_config('lock_timeout', $1, false)
