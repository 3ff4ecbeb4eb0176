//! The rendering every statement goes through, and the per-handle sets of rendered
//! statements.
//!
//! Statement files (`<module>/<name>.sql`, next to the module that runs them) name the
//! schema `{s}` (replaced by the quoted, validated schema name), the database clock `{now}`,
//! the execution columns `{cols}`, the decodable-row test `{decodable}`, the wake-up
//! `{notify}`, the wake transition `{wake}`, the last-attempt test `{last_attempt}`, the
//! status fenced statements judge by `{held_status}` and an expiry's last error
//! `{expiry_error}`: fragments kept here in `statements/*.sql`,
//! each written once. A file's leading `--` comment block documents it and is not sent.
//!
//! Statements that read the clock take a nullable `$clock` parameter: a value when a manual
//! clock is injected, otherwise NULL and the database's `clock_timestamp()` (not `now()`,
//! which is the transaction's start and would be stale after a lock wait) is used. Each
//! operation is one statement, hence one round trip and one atomic step, except the store
//! update and the store waiter registration (one short transaction each).
//!
//! Fencing: every fenced statement compares the token and status under a row lock that
//! conflicts with the claim's `FOR UPDATE SKIP LOCKED`, so no claim can commit between the
//! check and the write. Step writes, renew and release first lock the execution row in a CTE
//! (`FOR SHARE` for step writes, `FOR NO KEY UPDATE` for renew and release): in READ
//! COMMITTED a locking read that finds the row changed since the statement's snapshot waits
//! for the lock and returns the row's *newest* version, so the token and status compared
//! are the ones current after the lock was granted. Acknowledgements put the comparison in
//! the update's own WHERE instead: an update that meets a changed row waits for its lock
//! and tests the WHERE again on the newest version before writing, so the test and the
//! write happen under the update's row lock and no separate lock is logged first. Either
//! way the write commits before any later claim can lock the row.
//!
//! Each module that runs statements renders its own set on first use ([`Rendered::get`]);
//! the types of those sets live here so that the backend can hold them without depending on
//! the modules that fill them.

use std::sync::{Arc, OnceLock};

use crate::ack_and_claim::AckAndClaimStatements;

/// The database clock in milliseconds since the Unix epoch (`{now}`).
const NOW_MS: &str = include_str!("statements/now_ms.sql");
/// The execution columns (`{cols}`).
const EXECUTION_COLUMNS: &str = include_str!("statements/execution_columns.sql");
/// Whether the row `e` can be decoded (`{decodable}`).
pub(crate) const DECODABLE: &str = include_str!("statements/decodable.sql");
/// The head of a statement's wake-up CTE (`{notify}`; its `{chan}` is the channel).
const NOTIFY: &str = include_str!("statements/notify.sql");
/// The wake transition of the executions in `wake_targets` (`{wake}`).
const WAKE: &str = include_str!("statements/wake.sql");
/// The status a fenced statement judges the row `e` by (`{held_status}`).
const HELD_STATUS: &str = include_str!("statements/held_status.sql");
/// The last error an expired lease leaves, as SET items (`{expiry_error}`).
const EXPIRY_ERROR: &str = include_str!("statements/expiry_error.sql");
/// Whether the row `e` runs its last attempt (`{last_attempt}`).
const LAST_ATTEMPT: &str = include_str!("statements/last_attempt.sql");

/// `file` without its leading `--` comment block and surrounding whitespace.
pub(crate) fn fragment(file: &str) -> &str {
    let mut rest = file.trim_start();
    while rest.starts_with("--") {
        rest = rest.split_once('\n').map_or("", |(_, r)| r).trim_start();
    }
    rest.trim_end()
}

/// `template` with the schema `schema` (quoted) and the fragments `{decodable}`,
/// `{held_status}`, `{expiry_error}`, `{last_attempt}`, `{cols}` and `{now}` substituted (no wake-up: the migrations and the fenced transaction's
/// messages).
pub(crate) fn render(template: &str, schema: &str) -> Arc<str> {
    fragment(template)
        .replace("{decodable}", fragment(DECODABLE))
        .replace("{held_status}", fragment(HELD_STATUS))
        .replace("{expiry_error}", fragment(EXPIRY_ERROR))
        .replace("{last_attempt}", fragment(LAST_ATTEMPT))
        .replace("{cols}", fragment(EXECUTION_COLUMNS))
        .replace("{now}", fragment(NOW_MS))
        .replace("{s}", schema)
        .into()
}

/// Renders statement files for one schema and its NOTIFY channel.
#[derive(Debug)]
pub(crate) struct Renderer {
    schema: String,
    notify: String,
}

impl Renderer {
    /// A renderer for the quoted schema name `schema`, notifying `channel`.
    pub(crate) fn new(schema: &str, channel: &str) -> Self {
        Renderer {
            schema: schema.to_owned(),
            notify: fragment(NOTIFY).replace("{chan}", channel),
        }
    }

    /// `template` with every placeholder substituted.
    pub(crate) fn render(&self, template: &str) -> Arc<str> {
        let template = fragment(template)
            .replace("{wake}", fragment(WAKE))
            .replace("{notify}", &self.notify);
        render(&template, &self.schema)
    }
}

/// A set of statements rendered by its module on first use, then shared.
#[derive(Debug)]
pub(crate) struct Rendered<T>(OnceLock<T>);

impl<T> Default for Rendered<T> {
    fn default() -> Self {
        Rendered(OnceLock::new())
    }
}

impl<T> Rendered<T> {
    /// The set, rendered by `build` with `renderer` if this is the first use.
    pub(crate) fn get(&self, renderer: &Renderer, build: fn(&Renderer) -> T) -> &T {
        self.0.get_or_init(|| build(renderer))
    }
}

/// Every statement set of one handle (cloning a statement is an `Arc` bump).
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) renderer: Renderer,
    pub(crate) backend: Rendered<BackendSql>,
    pub(crate) execution: Rendered<ExecutionSql>,
    pub(crate) heap: Rendered<HeapSql>,
    pub(crate) store: Rendered<StoreSql>,
    pub(crate) start: Rendered<Arc<str>>,
    pub(crate) effect: Rendered<EffectSql>,
    pub(crate) counts: Rendered<Arc<str>>,
    pub(crate) control: Rendered<ControlSql>,
    pub(crate) attempts: Rendered<AttemptsSql>,
    pub(crate) policy: Rendered<PolicySql>,
    pub(crate) redelivery: Rendered<RedeliverySql>,
    pub(crate) browse: Rendered<BrowseSql>,
}

impl Statements {
    /// No statement rendered yet, for the quoted schema `schema` notifying `channel`.
    pub(crate) fn new(schema: &str, channel: &str) -> Self {
        Statements {
            renderer: Renderer::new(schema, channel),
            backend: Rendered::default(),
            execution: Rendered::default(),
            heap: Rendered::default(),
            store: Rendered::default(),
            start: Rendered::default(),
            effect: Rendered::default(),
            counts: Rendered::default(),
            control: Rendered::default(),
            attempts: Rendered::default(),
            policy: Rendered::default(),
            redelivery: Rendered::default(),
            browse: Rendered::default(),
        }
    }
}

/// `control.rs`'s statements (`control/*.sql`).
#[derive(Debug)]
pub(crate) struct ControlSql {
    pub(crate) cancel: Arc<str>,
    pub(crate) pause: Arc<str>,
    pub(crate) resume: Arc<str>,
    pub(crate) list_paused: Arc<str>,
    pub(crate) set_limit: Arc<str>,
    pub(crate) remove_limit: Arc<str>,
    pub(crate) limits: Arc<str>,
}

/// `attempts.rs`'s statements (`attempts/*.sql`).
#[derive(Debug)]
pub(crate) struct AttemptsSql {
    pub(crate) set_limit: Arc<str>,
    pub(crate) remove_limit: Arc<str>,
    pub(crate) limits: Arc<str>,
    pub(crate) list_dead: Arc<str>,
    pub(crate) retry_dead: Arc<str>,
}

/// `policy.rs`'s statements (`policy/*.sql`).
#[derive(Debug)]
pub(crate) struct PolicySql {
    pub(crate) set_rate: Arc<str>,
    pub(crate) remove_rate: Arc<str>,
    pub(crate) mark_ordered: Arc<str>,
    pub(crate) unmark_ordered: Arc<str>,
    pub(crate) policies: Arc<str>,
}

/// `redelivery.rs`'s statements (`redelivery/*.sql`).
#[derive(Debug)]
pub(crate) struct RedeliverySql {
    pub(crate) set_policy: Arc<str>,
    pub(crate) remove_policy: Arc<str>,
    pub(crate) policies: Arc<str>,
    pub(crate) deliveries: Arc<str>,
}

/// `browse.rs`'s statements (`browse/*.sql`): one page walk per filter shape.
#[derive(Debug)]
pub(crate) struct BrowseSql {
    /// Indexed by filter shape (`browse.rs`'s mask).
    pub(crate) pages: Vec<Arc<str>>,
}

/// `backend.rs`'s statements (`backend/*.sql`).
#[derive(Debug)]
pub(crate) struct BackendSql {
    pub(crate) now: Arc<str>,
    pub(crate) drop_schema: Arc<str>,
    pub(crate) drop_schema_forced: Arc<str>,
}

/// `execution.rs`'s statements (`execution/*.sql`).
#[derive(Debug)]
pub(crate) struct ExecutionSql {
    pub(crate) admit: Arc<str>,
    pub(crate) admit_batch: Arc<str>,
    pub(crate) get: Arc<str>,
    pub(crate) list_failing: Arc<str>,
    pub(crate) list_corrupt: Arc<str>,
    pub(crate) list_live_leases: Arc<str>,
    pub(crate) request_wake: Arc<str>,
    pub(crate) claim: Arc<str>,
    /// The claim without its summary row (the benchmark's raw baseline reads only leases).
    pub(crate) claim_leases_only: Arc<str>,
    /// The keyed claim: every concurrency limit counted after its key's lock (`gate.rs`).
    pub(crate) claim_keyed: Arc<str>,
    pub(crate) renew: Arc<str>,
    pub(crate) release: Arc<str>,
    pub(crate) acknowledge: Arc<str>,
    pub(crate) acknowledge_batch: Arc<str>,
    /// `acknowledge_and_claim`'s two per-connection prepared statements.
    pub(crate) ack_and_claim: AckAndClaimStatements,
    /// The same with the keyed claim (a backend whose claims run keyed, `gate.rs`).
    pub(crate) ack_and_claim_keyed: AckAndClaimStatements,
    pub(crate) purge_terminal: Arc<str>,
}

/// `heap.rs`'s statements (`heap/*.sql`; `write_step` is also `step_in_tx`'s).
#[derive(Debug)]
pub(crate) struct HeapSql {
    pub(crate) write_step: Arc<str>,
    pub(crate) read_step: Arc<str>,
    pub(crate) list_steps: Arc<str>,
    pub(crate) list_steps_page: Arc<str>,
}

/// `store.rs`'s statements (`store/*.sql`).
#[derive(Debug)]
pub(crate) struct StoreSql {
    pub(crate) get_or_create: Arc<str>,
    pub(crate) read_entry: Arc<str>,
    pub(crate) lock_store: Arc<str>,
    pub(crate) read_receipt: Arc<str>,
    pub(crate) apply_update: Arc<str>,
    pub(crate) watch_lock: Arc<str>,
    pub(crate) watch_register: Arc<str>,
}

/// `effect.rs`'s statements (`effect/*.sql`).
#[derive(Debug)]
pub(crate) struct EffectSql {
    pub(crate) begin: Arc<str>,
    pub(crate) settle: Arc<str>,
    pub(crate) wait: Arc<str>,
    pub(crate) read: Arc<str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_not_sent_and_placeholders_are_rendered() {
        assert_eq!(
            fragment("-- a\n  --b\n\nSELECT 1\n-- c\n"),
            "SELECT 1\n-- c"
        );
        let r = Renderer::new("\"t\"", "lease_wake_t");
        let sql = r.render("-- doc\nWITH wake_targets AS (SELECT 1), {wake} SELECT {now}");
        assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
        assert!(sql.starts_with("WITH wake_targets"), "{sql}");
        assert!(sql.contains("pg_notify('lease_wake_t'") && sql.contains("\"t\".executions"));
    }
}
