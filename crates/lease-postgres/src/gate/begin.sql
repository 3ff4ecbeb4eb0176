-- The message that opens the key gate's transaction (`gate.rs`): both limits set to the
-- gate's stall bound `{ms}` (a number the library computes, never user text), then
-- `BEGIN`, last, so the settings are the transaction's own (see `fenced/begin.sql` for why
-- `BEGIN` comes last). `idle_in_transaction_session_timeout`: a claimer frozen between the
-- gate's statements (SIGSTOP, a VM pause) loses its session after `{ms}`, which rolls the
-- claim back and frees its key locks; `lock_timeout`: a claim waiting longer for a key lock
-- fails (rolled back, nothing claimed) instead of queueing behind the frozen one.
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
SELECT set_config('idle_in_transaction_session_timeout', '{ms}', true),
       set_config('lock_timeout', '{ms}', true);
BEGIN
