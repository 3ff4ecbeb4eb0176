-- `$1 effect id` -> the effect's columns as effect.rs decodes them.
SELECT f.id, f.execution_id, f.result, f.begun_at, f.settled_at FROM {s}.effects f WHERE f.id = $1
