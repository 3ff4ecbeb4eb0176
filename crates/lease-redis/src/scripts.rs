//! How the Lua scripts are composed: each operation's body (in the directory of the one
//! module that runs it, e.g. `effect/effect_begin.lua`, compiled once per process in a
//! `static` there) follows the shared helpers it needs, kept here in `scripts/`:
//! `scripts/base.lua`; `scripts/ops.lua` for all but the step writers; `scripts/record.lua`
//! for scripts that change execution records, `scripts/wake.lua` for those that wake one
//! (request_wake's transition, shared), `scripts/effect.lua` for the effect and store-waiter
//! scripts, `scripts/ack.lua` for the acknowledging ones, `scripts/claim.lua` for
//! the claiming ones and `scripts/step.lua` for the step writers. Each transition is
//! written once, in a helper. The application's fenced scripts ([`fenced_source`]) are the
//! base and step helpers and `scripts/fenced.lua` inside a function, the lease check, then
//! the caller's body. `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (after a restart
//! or `SCRIPT FLUSH`), loads the script and retries, so scripts never need to be preloaded.

use redis::Script;

/// Declares `static $name`, the operation script `$body` after the helpers `$compose` adds
/// (one of this module's composers), compiled (hashed) once per process. The body is
/// `include_str!`ed by the module that runs it, from that module's directory.
macro_rules! operation_script {
    ($name:ident = $compose:ident($body:expr)) => {
        pub(crate) static $name: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| crate::scripts::$compose($body));
    };
}
pub(crate) use operation_script;

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
pub(crate) fn script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n-- operation\n{body}"))
}

/// A script made of the base and record helpers and `body`.
pub(crate) fn record_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n{RECORD}\n-- operation\n{body}"))
}

/// A script made of the base, record and wake helpers (`scripts/wake.lua`: request_wake's
/// transition) and `body`.
pub(crate) fn wake_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{WAKE}\n-- operation\n{body}"
    ))
}

/// purge_terminal: the base, effect (`scripts/effect.lua`) and retention
/// (`scripts/forget.lua`) helpers and `body`.
pub(crate) fn purge_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{EFFECT}\n{FORGET}\n-- operation\n{body}"
    ))
}

/// A script made of the base, operation and effect helpers and `body`.
pub(crate) fn effect_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{OPS}\n{EFFECT}\n-- operation\n{body}"))
}

/// A script made of the base, record, wake and effect helpers and `body`: the writes that
/// wake waiters in their own atomic step (a settle, a store update).
pub(crate) fn effect_wake_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{WAKE}\n{EFFECT}\n-- operation\n{body}"
    ))
}

/// A script made of the base and step helpers and `body` (no clock, no wake-ups).
pub(crate) fn step_script(body: &str) -> Script {
    Script::new(&format!("{BASE}\n{STEP}\n-- operation\n{body}"))
}

/// The source of an application's fenced script, built so that no body can run anything
/// before the lease check: first a function
/// holding the base and step helpers and `scripts/fenced.lua`, which returns the lease check
/// and what follows the body (so the body, outside that function, sees none of the
/// helpers); then the check, run, returning when the lease is not held; only then the
/// caller's `body` as the function `__fenced_body(KEYS, ARGV)`, and its call. Lua runs a
/// chunk in order, so whatever the body's text does (even close its wrapper with `end`
/// and go on at the top level) runs after the check passed.
pub(crate) fn fenced_source(body: &str) -> String {
    let fenced = fenced_lua();
    format!(
        "local __fence, __finish = (function()\n{BASE}\n{STEP}\n-- operation\n{fenced}\nend)()\n\
         local __stop, __keys, __argv = __fence(2, 8)\n\
         if __stop then return __stop end\n\
         local __fenced_body = function(KEYS, ARGV) {body}\nend\n\
         return __finish(pcall(__fenced_body, __keys, __argv))\n"
    )
}

/// The source of an application's fenced script that also admits (the admitting variants
/// of [`fenced_source`]: `fenced_script_admitting`, `step_in_script_admitting`): one
/// function holding the base, step and operation helpers, which returns the lease check and
/// what follows the body (`scripts/fenced.lua`) and `admit_batch`'s body `admit` as a
/// function of its own arguments (as in [`admit_source`]); the check, run, returning when
/// the lease is not held; the admissions' arguments picked out; then the caller's `body`
/// and its call, as in [`fenced_source`], with the admissions handed to what follows it,
/// which makes them only when the body returned without error (and, for a step, before its
/// record). `KEYS[2]` is the prefix's anchor; `ARGV[8]` the publish command, `ARGV[9]` the
/// number of admissions, `ARGV[10]` their admission sequences, their seven arguments each
/// follow it, then the caller's.
pub(crate) fn fenced_admit_source(admit: &str, body: &str) -> String {
    let admit = admit.replace("ARGV", "A");
    format!(
        "local __fence, __finish, __admit = (function()\n{BASE}\n{STEP}\n{OPS}\n-- operation\n\
         local pre, finish = (function()\n{fenced}\nend)()\n\
         return pre, finish, function(A)\n{admit}\nend\nend)()\n\
         local __last = 10 + 7 * tonumber(ARGV[9])\n\
         local __stop, __keys, __argv = __fence(3, __last + 1)\n\
         if __stop then return __stop end\n\
         local __items = {{ARGV[1], ARGV[2], ARGV[8], ARGV[10]}}\n\
         for i = 11, __last do __items[i - 6] = ARGV[i] end\n\
         local __fenced_body = function(KEYS, ARGV) {body}\nend\n\
         local __ok, __result = pcall(__fenced_body, __keys, __argv)\n\
         return __finish(__ok, __result, function() return __admit(__items) end)\n",
        fenced = fenced_lua(),
    )
}

/// The source of an application's admitting script ([`crate::AdmitScript`]): first a
/// function holding the base and operation helpers, which returns `admit_batch`'s body as a
/// function of its own arguments (`admit`, `ARGV` renamed `A` in its text, so the global
/// `ARGV` is never rewritten); then the caller's keys (after the prefix and its anchor)
/// and arguments (after the admissions) picked out; then the caller's `body` as the
/// function `__app_body(KEYS, ARGV)` under `pcall`, seeing none of the helpers; only when
/// it returned without error, the admissions and their wake-up, in the same script.
/// `ARGV[4]` is the number of admissions, `ARGV[5]` their admission sequences, their seven
/// arguments each follow it.
pub(crate) fn admit_source(admit: &str, body: &str) -> String {
    let admit = admit.replace("ARGV", "A");
    format!(
        "local __admit = (function()\n{BASE}\n{OPS}\n-- operation\n\
         return function(A)\n{admit}\nend\nend)()\n\
         local __keys, __argv, __items = {{}}, {{}}, {{ARGV[1], ARGV[2], ARGV[3], ARGV[5]}}\n\
         for i = 3, #KEYS do __keys[i - 2] = KEYS[i] end\n\
         local __last = 5 + 7 * tonumber(ARGV[4])\n\
         for i = 6, __last do __items[i - 1] = ARGV[i] end\n\
         for i = __last + 1, #ARGV do __argv[i - __last] = ARGV[i] end\n\
         local __app_body = function(KEYS, ARGV) {body}\nend\n\
         local __ok, __result = pcall(__app_body, __keys, __argv)\n\
         if type(__result) == 'table' and __result.err then __ok, __result = false, __result.err end\n\
         if not __ok then return {{'failed', tostring(__result)}} end\n\
         redis.set_repl(redis.REPL_ALL)\n\
         return {{'ok', __admit(__items), __result}}\n"
    )
}

/// `scripts/fenced.lua` with its JSON depth limit filled in.
fn fenced_lua() -> String {
    FENCED.replace(
        "__MAX_JSON_DEPTH__",
        &lease_core::limits::MAX_JSON_DEPTH.to_string(),
    )
}

/// A script made of the base, record and acknowledgement helpers and `body`.
pub(crate) fn ack_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{ACK}\n-- operation\n{body}"
    ))
}

/// A script made of the base, record and claim helpers and `body`.
pub(crate) fn claim_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{CLAIM}\n-- operation\n{body}"
    ))
}

/// A script made of the base, record, acknowledgement and claim helpers and `body`.
pub(crate) fn ack_claim_script(body: &str) -> Script {
    Script::new(&format!(
        "{BASE}\n{OPS}\n{RECORD}\n{ACK}\n{CLAIM}\n-- operation\n{body}"
    ))
}
