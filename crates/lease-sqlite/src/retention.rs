//! Retention: what `purge_terminal` reads and deletes (the engine runs it: the purge's
//! candidates from the terminal index, then everything that names each one).

/// `$1 namespace, $2 before, $3 limit` -> (rowid, id) of the first `limit` terminal
/// executions, in id order, whose terminal acknowledgement ended before `$2`. One walk of the
/// partial index `lease_executions_terminal` (terminal rows by id, with their end time), so
/// rows that are not terminal are never read; its WHERE terms repeat the index's, which is
/// what lets SQLite use it. `INDEXED BY` because without statistics the planner prefers the
/// (namespace, id) unique index, which also yields id order but reads every row of the
/// namespace (and preparing fails, rather than scanning, should the index ever not apply).
/// Quarantined rows stay for an operator (`list_corrupt`).
pub(crate) const PURGEABLE: &str = include_str!("retention/purgeable.sql");

/// What names a purged execution, `$1 namespace, $2 execution id`: its step records (the
/// steps' unique index), the store receipts it made and the start records that target it
/// (schema v4 indexes), its effects and store-waiter registrations (schema v6 indexes).
pub(crate) const FORGET: [&str; 5] = [
    include_str!("retention/steps_forget.sql"),
    include_str!("retention/store_receipts_forget.sql"),
    include_str!("retention/starts_forget.sql"),
    include_str!("retention/effect_forget.sql"),
    include_str!("retention/store_waiters_forget.sql"),
];

#[cfg(test)]
mod tests {
    use crate::migrate::plan;

    #[test]
    fn the_purge_walks_the_terminal_index_in_id_order() {
        let plan = plan(super::PURGEABLE, 3);
        assert!(plan.contains("lease_executions_terminal"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }

    #[test]
    fn what_names_an_execution_is_deleted_through_an_index() {
        for sql in super::FORGET {
            let plan = plan(sql, 2);
            assert!(plan.contains("USING"), "{sql}: {plan}");
            assert!(!plan.starts_with("SCAN"), "{sql}: {plan}");
        }
    }
}
