-- drop_schema: the objects the migrations create (migrate.rs's lease_schema, migrate/v1.sql
-- to v22.sql: keep this list in step with them), each with RESTRICT, then the schema with
-- RESTRICT. Anything else in the schema (an application table), or depending on these
-- objects from elsewhere (a view, a foreign key, a default), makes a statement fail with
-- 2BP01 and PostgreSQL's DETAIL names it; the batch is one implicit transaction (simple
-- query protocol), so then nothing is dropped. Indexes, constraints and row types go with
-- their tables.
DROP TABLE IF EXISTS {s}.takeovers, {s}.redelivery_policies, {s}.key_starts, {s}.key_policies, {s}.attempt_limits, {s}.concurrency_limits, {s}.paused_scopes, {s}.store_waiters, {s}.effects, {s}.start_requests, {s}.store_receipts,
    {s}.store_entries, {s}.stores, {s}.steps, {s}.executions, {s}.lease_schema RESTRICT;
DROP SEQUENCE IF EXISTS {s}.fencing_tokens, {s}.admission_order RESTRICT;
DROP FUNCTION IF EXISTS {s}.history_fold, {s}.history_claim, {s}.history_end, {s}.claimable_after, {s}.policy_delay, {s}.key_room, {s}.record_problem, {s}.record_problem_v5, {s}.record_problem_v9, {s}.record_problem_v11, {s}.token_counter_behind, {s}.live_leases, {s}.claimable_from,
    {s}.redelivery_delay RESTRICT;
DROP SCHEMA IF EXISTS {s} RESTRICT;
