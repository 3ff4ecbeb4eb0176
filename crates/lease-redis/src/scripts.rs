//! The Lua scripts: one per operation, each the shared helpers it needs (`scripts/base.lua`;
//! `scripts/ops.lua` for all but the step writers; `scripts/record.lua` for scripts that change
//! execution records, `scripts/wake.lua` for those that wake one (request_wake's transition,
//! shared), `scripts/effect.lua` for the effect and store-waiter scripts (issue 16), `scripts/ack.lua` for the acknowledging ones, `scripts/claim.lua` for the
//! claiming ones and `scripts/step.lua` for the step writers) followed by the operation's body. The application's fenced scripts
//! ([`fenced_source`]) are the base and step helpers and `scripts/fenced.lua` inside a
//! function, the lease check, then the caller's body. `redis::Script` sends
//! `EVALSHA` and, on `NOSCRIPT` (after a restart or `SCRIPT FLUSH`), loads the script and
//! retries, so scripts never need to be preloaded.

use std::sync::LazyLock;

use redis::Script;

const BASE: &str = include_str!("scripts/base.lua");
const OPS: &str = include_str!("scripts/ops.lua");
const RECORD: &str = include_str!("scripts/record.lua");
const ACK: &str = include_str!("scripts/ack.lua");
const CLAIM: &str = include_str!("scripts/claim.lua");
const STEP: &str = include_str!("scripts/step.lua");
const FENCED: &str = include_str!("scripts/fenced.lua");
const FORGET: &str = include_str!("scripts/forget.lua");
const WAKE: &str = include_str!("scripts/wake.lua");
const EFFECT: &str = include_str!("scripts/effect.lua");

/// A script made of the base and operation helpers and `body`.
fn script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n-- operation\n{body}"))
}

/// A script made of the base, operation and retention helpers (`scripts/forget.lua`) and `body`.
fn forget_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n{FORGET}\n-- operation\n{body}"))
}

/// A script made of the base and record helpers and `body`.
fn record_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n{RECORD}\n-- operation\n{body}"))
}

/// A script made of the base, record and wake helpers (`scripts/wake.lua`: request_wake's
/// transition) and `body`.
fn wake_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{WAKE}\n-- operation\n{body}"
    ))
}

/// purge_terminal: the base, effect (`scripts/effect.lua`, issue 16) and retention
/// (`scripts/forget.lua`) helpers and `body`.
fn purge_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{EFFECT}\n{FORGET}\n-- operation\n{body}"
    ))
}

/// A script made of the base, operation and effect helpers and `body`.
fn effect_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n{EFFECT}\n-- operation\n{body}"))
}

/// A script made of the base, record, wake and effect helpers and `body`: the writes that
/// wake waiters in their own atomic step (a settle, a store update).
fn effect_wake_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{WAKE}\n{EFFECT}\n-- operation\n{body}"
    ))
}

/// A script made of the base and step helpers and `body` (no clock, no wake-ups).
fn step_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{STEP}\n-- operation\n{body}"))
}

/// The source of an application's fenced script (issue 25 item 9): first a function
/// holding the base and step helpers and `scripts/fenced.lua`, which returns the lease check
/// and what follows the body (so the body, outside that function, sees none of the
/// helpers); then the check, run, returning when the lease is not held; only then the
/// caller's `body` as the function `__fenced_body(KEYS, ARGV)`, and its call. Lua runs a
/// chunk in order, so whatever the body's text does (even close its wrapper with `end`
/// and go on at the top level) runs after the check passed.
pub(crate) fn fenced_source(body: &str) -> String {
    let fenced = FENCED.replace(
        "__MAX_JSON_DEPTH__",
        &lease_core::limits::MAX_JSON_DEPTH.to_string(),
    );
    format!(
        "local __fence, __finish = (function()\n{BASE}\n{STEP}\n-- operation\n{fenced}\nend)()\n\
         local __stop, __keys, __argv = __fence()\n\
         if __stop then return __stop end\n\
         local __fenced_body = function(KEYS, ARGV) {body}\nend\n\
         return __finish(pcall(__fenced_body, __keys, __argv))\n"
    )
}

/// A script made of the base, record and acknowledgement helpers and `body`.
fn ack_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{ACK}\n-- operation\n{body}"
    ))
}

/// A script made of the base, record and claim helpers and `body`.
fn claim_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{CLAIM}\n-- operation\n{body}"
    ))
}

/// A script made of the base, record, acknowledgement and claim helpers and `body`.
fn ack_claim_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{ACK}\n{CLAIM}\n-- operation\n{body}"
    ))
}

/// Every script of the backend, compiled (hashed) once per process.
pub(crate) struct Scripts {
    pub(crate) meta: Script,
    pub(crate) admit: Script,
    pub(crate) admit_batch: Script,
    pub(crate) get: Script,
    pub(crate) list_failing: Script,
    pub(crate) list_corrupt: Script,
    pub(crate) request_wake: Script,
    pub(crate) claim_due: Script,
    pub(crate) renew: Script,
    pub(crate) release: Script,
    pub(crate) acknowledge: Script,
    pub(crate) acknowledge_batch: Script,
    pub(crate) acknowledge_and_claim: Script,
    pub(crate) write_step: Script,
    pub(crate) start: Script,
    pub(crate) get_or_create: Script,
    pub(crate) store_update: Script,
    pub(crate) purge_terminal: Script,
    pub(crate) status_counts: Script,
    pub(crate) forget_at_home: Script,
    pub(crate) reserve_tokens: Script,
    pub(crate) start_home: Script,
    pub(crate) start_target: Script,
    pub(crate) effect_begin: Script,
    pub(crate) effect_settle: Script,
    pub(crate) effect_read: Script,
    pub(crate) effect_wait: Script,
    pub(crate) store_watch: Script,
    pub(crate) migrate: Script,
}

/// The scripts.
pub(crate) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    meta: script(include_str!("scripts/meta.lua")),
    admit: script(include_str!("scripts/admit.lua")),
    admit_batch: script(include_str!("scripts/admit_batch.lua")),
    get: script(include_str!("scripts/get.lua")),
    list_failing: script(include_str!("scripts/list_failing.lua")),
    list_corrupt: script(include_str!("scripts/list_corrupt.lua")),
    request_wake: wake_script(include_str!("scripts/request_wake.lua")),
    claim_due: claim_script(include_str!("scripts/claim_due.lua")),
    renew: record_script(include_str!("scripts/renew.lua")),
    release: record_script(include_str!("scripts/release.lua")),
    acknowledge: ack_script(include_str!("scripts/acknowledge.lua")),
    acknowledge_batch: ack_script(include_str!("scripts/acknowledge_batch.lua")),
    acknowledge_and_claim: ack_claim_script(include_str!("scripts/acknowledge_and_claim.lua")),
    write_step: step_script(include_str!("scripts/write_step.lua")),
    start: script(include_str!("scripts/start.lua")),
    get_or_create: script(include_str!("scripts/get_or_create.lua")),
    status_counts: script(include_str!("scripts/status_counts.lua")),
    forget_at_home: forget_script(include_str!("scripts/forget_at_home.lua")),
    reserve_tokens: claim_script(include_str!("scripts/reserve_tokens.lua")),
    start_home: script(include_str!("scripts/start_home.lua")),
    start_target: script(include_str!("scripts/start_target.lua")),
    store_update: effect_wake_script(include_str!("scripts/store_update.lua")),
    purge_terminal: purge_script(include_str!("scripts/purge_terminal.lua")),
    effect_begin: effect_script(include_str!("scripts/effect_begin.lua")),
    effect_settle: effect_wake_script(include_str!("scripts/effect_settle.lua")),
    effect_read: effect_script(include_str!("scripts/effect_read.lua")),
    effect_wait: effect_script(include_str!("scripts/effect_wait.lua")),
    store_watch: effect_script(include_str!("scripts/store_watch.lua")),
    migrate: script(include_str!("scripts/migrate.lua")),
});
