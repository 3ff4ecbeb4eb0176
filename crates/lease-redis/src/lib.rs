//! The Redis backend for RFC 002 execution leases: one Lua script per operation on a
//! namespace of one partition (with more, some operations are one script per slot: see
//! "Redis Cluster and partitions" below and docs/decisions/0033-redis-partitions-and-cluster.md).
//!
//! ```no_run
//! # async fn demo() -> lease_core::Result<()> {
//! use lease_core::{Admission, ExecutionClient, ExecutionId};
//! use lease_redis::{RedisBackend, RedisConfig};
//!
//! let backend = RedisBackend::connect(
//!     RedisConfig::new("redis://127.0.0.1:6379").namespace("billing"),
//! )
//! .await?;
//! backend.admit(&Admission::new(ExecutionId::new("order-42")?)).await?;
//! # Ok(()) }
//! ```
//!
//! # How it maps the RFC
//!
//! - **Atomicity.** Every operation that reads or writes more than one thing is one Lua
//!   script (`EVALSHA`, reloaded on `NOSCRIPT`), so the token check and the write it guards
//!   are one step: a script runs with no other command in between. Scripts validate the
//!   stored record they change before changing it, because a Lua error does not roll back
//!   (a claim skips and lists a corrupt record, see below). Single-command reads (`read_step` = `HGET`, `list_steps` = `HGETALL`, `read_entry`
//!   = `HMGET`) are atomic on their own. One round trip per operation.
//! - **Keys.** Every key of a namespace starts with `lease:{<namespace>}:`; the hash tag
//!   puts all of them in one cluster slot, so every script touches one slot (scripts get the
//!   prefix as `KEYS[1]`, which routes them to that slot). JSON payloads are stored as
//!   strings. After the prefix:
//!
//!   | key | type | holds |
//!   |---|---|---|
//!   | `meta` | hash | `layout`: the version of this layout (checked at connect) |
//!   | `token` | string | the fencing-token counter (`INCR`, no TTL) |
//!   | `exec:<id>` | hash | one execution record (`st`, `tk`, `un`, `es`, `du`, `le`, `wk`, `ld`, `wf`, `in`, `oc`, `ov`; `pr` priority when not 0, `ck` concurrency key, `al` attempt limit, `sq` admission sequence, `ek` `em` `ea` `et` last error) |
//!   | `steps:<id>` | hash | its step records: field `<step key>\x1f<attempt>`, value `<token>\|<done>\|<json>` |
//!   | `ready` | zset | claimable-when-due executions of priority 0, scored by due time |
//!   | `ready:<p>` | zset | the same for priority `p` (not 0) |
//!   | `levels` | zset | the priorities `p` other than 0 whose `ready:<p>` has members (score `p`) |
//!   | `live:<key>` | zset | running executions with concurrency key `<key>`, scored by lease expiry |
//!   | `limits` | hash | concurrency key (or `\x1fdefault`) -> limit |
//!   | `paused` | set | paused workflow names (and `\x1fnamespace`) |
//!   | `waiting` | zset | executions claimable only after their due time, scored by that instant |
//!   | `running` | zset | running executions, scored by lease expiry |
//!   | `failing` | zset | executions with unacknowledged deliveries, scored by minus their count |
//!   | `corrupt` | zset | ids of records a claim could not use (score 0, so by id), out of every index |
//!   | `corrupt_why` | hash | id -> what could not be decoded (`list_corrupt`) |
//!   | `starts` | hash | start request id -> target execution id |
//!   | `store:<id>` | hash | store entries, plus the existence marker field `""` |
//!   | `receipts:<id>` | hash | store receipts: field `<execution>\x1f<step key>`, value the outcome |
//!   | `done` | zset | completed and failed executions, scored by the end of their last delivery |
//!   | `rcpt:<id>` | set | the receipts execution `<id>` made, as `<store>\x1f<step key>` |
//!   | `start_of` | hash | target execution id -> the start request id that created it |
//!   | `running_es` | zset | the members of `running` once suspended (`es`), scored by lease expiry |
//!   | `counts` | hash | records per stored status (each record's `cg` says it is counted), `bad`, `g`, `ok` (`status_counts`) |
//!   | `takeovers` | string | claims that took over an expired lease (INCRBY by those claims only, never lowered; `status_counts`) |
//!   | `attempts` | hash | workflow name (or `\x1fdefault`) -> attempt limit (each claim copies the one that applies onto the record as `al`) |
//!   | `dead` | zset | stored-dead executions, by id (score 0; `list_dead`) |
//!   | `running_last` | zset | the members of `running` on their last attempt, scored by lease expiry (expired: dead) |
//!   | `seq` | string | the admission counter: each new record's `sq` (its place in admission order) |
//!   | `line:<key>` | zset | the key's executions that are neither terminal nor dead, scored by `sq` (ordered keys) |
//!   | `ordered` | hash | ordered concurrency keys (and `\x1fdefault`) -> `1` |
//!   | `rates` | hash | concurrency key (or `\x1fdefault`) -> start rate `<starts>:<period ms>` |
//!   | `starts:<key>` | zset | the key's claim instants while a rate applies (member the token) |
//!   | `rated` | set | the keys that have a `starts:<key>` (forgotten when no rate applies any more) |
//!   | `ls:<status>`, `ls:<status>\x1fw\x1f<workflow>`, `ls:<status>\x1fk\x1f<key>`, `ls:<status>\x1fwk\x1f<workflow>\x1f<key>` | zset | records by stored status (and workflow, key, both), scored by `sq` (`list_executions`) |
//!   | `barrier` | string | a counter every call increments with [`RedisConfig::wait_for_replicas`] (its value means nothing; see `replication.rs`) |
//! - **Redis Cluster and partitions.** A `redis+cluster://host:port,host:port`
//!   URL connects through redis-rs's async cluster client. [`RedisConfig::partitions`] (or
//!   `?partitions=N`) splits a namespace into `P` partitions `lease:{<namespace>#<i>}:`, an
//!   execution placed by a stable hash of its id (FNV-1a 64 mod `P`), so one namespace
//!   spreads over every shard while each script touches one slot; the namespace-wide keys
//!   (meta, token counter, starts, stores) stay under `lease:{<namespace>}:`. One
//!   partition is exactly the layout above. Claims peek every partition, take the earliest
//!   due over all of them and hand out tokens reserved from the one counter, so a split
//!   namespace keeps every rule of one (the conformance suite runs on it). Every script
//!   also declares its prefix's `meta` as a second key, so that during a slot migration
//!   Redis answers `TRYAGAIN` (retried) instead of running it on a node holding only part
//!   of the slot. Details and what cluster mode does not promise: docs/decisions/0033 and 0034.
//! - **Tokens.** One counter key per namespace (`INCR`, no TTL); every claim takes the next
//!   value, so tokens rise per execution and never repeat across executions.
//! - **Claims.** Due executions live in two kinds of sorted sets: one ready set per
//!   priority level in use (`ready` for 0, `ready:<p>` listed in `levels`; scored by due
//!   time, so a claim walks the levels highest first, each with `ZRANGEBYSCORE` in
//!   `(due_at, id)` order) and `waiting`
//!   (executions whose claimable instant, `max(due_at, redelivery gate)` or for running ones
//!   lease expiry plus the delay then owed, lies after their due time, scored by that
//!   instant). A claim first moves the `waiting` members whose instant has passed into
//!   their ready set, then claims from the ready sets, re-checking each record in full and
//!   skipping a keyed one whose key holds its limit of live leases (`ZCOUNT live:<key>`
//!   above the claim's instant, plus this claim's; limits from `limits`, read at the first
//!   keyed candidate). The redelivery gate
//!   is evaluated in Lua from `RedeliveryPolicy::table_ms()`, passed with every call, so all
//!   handles on a namespace must use the same policy. The script plans first (reads only),
//!   then checks the token counter, then writes. Work per call is bounded: at most
//!   `max(limit * 4, 100)` moves out of `waiting` (oldest first) and `limit` plus as many
//!   `ready` members examined; what is left waits for the next call, and the horizon then
//!   reports "now".
//! - **Token counter checks.** Before its first write the claim checks that the tokens it is
//!   about to issue (`counter + 1 ..= counter + n`) are each above the candidate's stored
//!   token and at most [`MAX_TOKEN`] (2^53 - 1, exact in a Lua double); otherwise it fails
//!   with `LeaseError::TokenCounter` and changes nothing. Lease tokens above [`MAX_TOKEN`]
//!   are `InvalidInput` before any script.
//! - **Tokens across a Redis Cluster failover.** On a cluster node the claim
//!   reads the node's config epoch `E` (`cluster_my_epoch` of `CLUSTER INFO`, server-side)
//!   and issues tokens at or above `E * 2^36 + 1`, each within the 2^36-token range of its
//!   epoch (a claim that would pass it is `TokenCounter`): a promoted replica has a higher
//!   config epoch than the primary it replaces, so its tokens lie above every token that
//!   primary issued, whatever replication lost. Without cluster support the counter counts
//!   up to [`MAX_TOKEN`] (one primary, no automatic failover; see docs/decisions/0034).
//! - **Corrupt records.** A candidate the claim cannot use (a state field that does not
//!   parse, a wrong key type, an id or workflow name that is not a valid name, input or
//!   outcome that is not UTF-8) is skipped: moved out of `ready`, `waiting`, `running` and
//!   `failing` into `corrupt` with its problem, logged as a `tracing` warning and listed by
//!   `list_corrupt`; the rest is claimed. A claim that issued leases never reports an error
//!   afterwards.
//! - **Claims with records.** The claim script appends, after each claimed lease, the
//!   execution's hash as it stands right after the claim (an `HGETALL` inside the script, no
//!   extra round trip): the record `get` reads at that instant, with the horizon in front.
//!   `claim_due` (lease-core's `ExecutionClientExt`) keeps only the leases of that reply.
//! - **Batched acknowledgements.** `acknowledge_batch` is one script: it loads and checks
//!   every item first (unknown execution, token 0, foreign token: the typed error of the
//!   first such item, nothing written), then acknowledges each held item exactly as
//!   `acknowledge` does (the two scripts share `scripts/ack.lua`), at one clock reading; a
//!   stale item is `Lost` and unchanged. Redis runs the script with no other command in
//!   between, so a concurrent claim sees either none or all of a batch.
//! - **Acknowledge and claim.** `acknowledge_and_claim` is one script built from
//!   the acknowledgement helpers (`scripts/ack.lua`, shared with `acknowledge` and
//!   `acknowledge_batch`) and the claim helpers (`scripts/claim.lua`, shared with `claim_due`):
//!   the lease is checked first (unknown execution, token 0, foreign token: the typed error,
//!   nothing written, no claim), a held one is acknowledged at the script's clock, then the
//!   claim is planned, counter-checked and written after it at `min(caller's now, clock)`,
//!   with records and horizon. If the token counter refuses the claim after an applied
//!   acknowledgement, the claim writes nothing, the call returns the acknowledgement with
//!   an empty claim and logs the refusal; after a lost one it is `TokenCounter`. One wake-up
//!   message: the earliest of the acknowledged record's claimable instant (unless the same
//!   script claimed it) and the new leases'.
//! - **Retention.** `purge_terminal(before, limit)` is one script (per partition,
//!   then a home step, on a split namespace): it reads up to
//!   `limit` members of `done` scored before `before` (the earliest ended first), re-checks
//!   each record (only a completed or failed one whose end lies before `before` goes; a
//!   stale member leaves the index, a mis-scored one is re-scored), then deletes each
//!   execution's hash and step hash, its receipts (each member of `rcpt:<id>` names a field
//!   of a `receipts:<store>` hash) and the start record `start_of` points to. The ids come
//!   back sorted. Acknowledgements keep `done`, `store_update` keeps `rcpt:<id>`, `start`
//!   keeps `start_of`. These indexes are key layout 2: connecting to a layout-1 namespace
//!   builds them first (bounded `SCAN`/`HSCAN` pages, each indexed by one idempotent script)
//!   and then stores layout 2 (unless [`RedisConfig::migrate`]`(false)`: a read-only tool
//!   only reads `meta` and refuses another layout, or none, with `SchemaMismatch`, writing
//!   nothing); an older library refuses layout 2. A purged id is unknown:
//!   `get` is `None`, a stale lease is `UnknownExecution`, and a new admission starts from
//!   nothing, with tokens above the old ones (the counter is the namespace's).
//! - **Wake-ups.** The scripts that make work claimable (admit, admit_batch,
//!   start, request_wake without a live lease, release, a suspended acknowledgement with a
//!   wake, claim) publish, in the same script as the write, the record's
//!   `ExecutionRecord::claimable_at` in ms on the channel `lease:{<namespace>}:wake` (one
//!   message per script, the minimum), with `SPUBLISH` on Redis >= 7 and `PUBLISH` on Redis 6
//!   (decided at connect; Redis 5 has no wake-ups). Each handle family keeps one RESP3
//!   subscriber connection named `lease-wake:<namespace>` ([`RedisBackend::listener_name`]),
//!   started by the first `wakeups()` call and reconnected with backoff, signalling "now"
//!   after every (re)subscribe. `claim_due_with_horizon` returns the script's clock and the
//!   first score of `ready` and `waiting`, a lower bound of the earliest claimable instant.
//! - **The application's own writes.** [`FencedScript`] wraps the application's
//!   Lua body behind the `write_step` fence (`scripts/step.lua`, shared with `write_step`):
//!   [`RedisBackend::fenced_script`] runs the body only while the lease's token is current
//!   and its delivery has not ended, in the same script as the check, so a stale holder's
//!   body never runs (`Lost`); [`RedisBackend::step_in_script`] also writes the step's done
//!   record in that script, so the body's writes and the record exist together or not at
//!   all, and a redelivery replays the record without running the body. Every key the body
//!   declares must carry the namespace's hash tag ([`RedisBackend::hash_tag`]) and lie
//!   outside `lease:{<namespace>}:` (`InvalidInput` before anything runs). The body runs
//!   under `pcall`: a failure after some of its writes leaves them (Redis does not roll a
//!   script back) and is reported as [`ScriptBodyError`].
//! - **Admission in the application's script.** [`AdmitScript`] wraps the application's Lua
//!   body as [`FencedScript`] does, without a lease: [`RedisBackend::admit_script`] runs it
//!   and then, only if it returned without error, admits as `admit_batch` does and publishes
//!   the wake-up, in the same script. From a delivery, [`RedisBackend::fenced_script_admitting`]
//!   and [`RedisBackend::step_in_script_admitting`] take a [`FencedScript`] and the
//!   admissions: the lease check, the body, the admissions with their wake-up and (for the
//!   step) the step record are one script, so a step and the children it admits exist
//!   together, and a stale holder or a failing body admits nothing and wakes nobody.
//! - **Time.** Scripts read Redis `TIME` (one clock for every process; allowed in scripts
//!   because Redis >= 5 replicates a script's effects, not the script) unless a clock is
//!   injected with [`RedisConfig::clock`]. Fenced writes never consult a clock.
//! - **Numbers.** Lua numbers are doubles, exact up to 2^53. Timestamps handed to a script
//!   must lie within ±2^52 ms (a typed error otherwise) and tokens stop at [`MAX_TOKEN`]
//!   (see above); integers travel as decimal strings.
//!
//! # Failures
//!
//! Connection refused: [`LeaseError::Unavailable`] (nothing happened). A connection lost
//! after a writing command was sent: [`LeaseError::OutcomeUnknown`] (the script may have
//! run; read the state back). A reply of an unexpected shape or a corrupt stored value:
//! [`LeaseError::Protocol`]. Redis refusing to run a command (`OOM`, `BUSY`, `LOADING`,
//! `READONLY`, ...): `Unavailable`. The connection manager reconnects by itself.
//!
//! # Durability: what to configure
//!
//! Fencing is exactly as durable as the token counter and the execution records.
//!
//! - **Eviction.** [`RedisBackend::connect`] reads `maxmemory_policy` and refuses
//!   `allkeys-*` policies with [`LeaseError::UnsafeConfiguration`] (opt out with
//!   [`RedisConfig::allow_evicting_policy`], which logs a warning instead): an evicted
//!   counter or record would let a stale holder's writes through. `noeviction` and
//!   `volatile-*` never evict our keys, which have no TTL.
//! - **Restarts.** Without persistence a restart empties the store. With RDB snapshots a
//!   restart rolls back to the last snapshot, token counter included: tokens are then
//!   issued again and a stale holder could be accepted. Use AOF with `appendfsync always`
//!   (or `everysec`, accepting the loss of up to a second of claims) for leases that must
//!   survive a restart.
//! - **Failover.** Replication is asynchronous: a primary that fails before the replica
//!   received its last writes takes them with it. On a Redis Cluster tokens carry the
//!   node's config epoch, so a promoted replica never issues a token twice, but lost step,
//!   outcome and effect records are redone. [`RedisConfig::wait_for_replicas`] makes every
//!   call, read or write, wait for replicas under a barrier write (one pipeline on the
//!   slot's primary, see `replication.rs`), so with one replica per primary a success is
//!   something the promoted replica has (decision record 0034 in
//!   docs/decisions/). A single Redis without replicas, with AOF `appendfsync always`, loses
//!   nothing it acknowledged.
//!
//! [`LeaseError::Unavailable`]: lease_core::LeaseError::Unavailable
//! [`LeaseError::OutcomeUnknown`]: lease_core::LeaseError::OutcomeUnknown
//! [`LeaseError::Protocol`]: lease_core::LeaseError::Protocol
//! [`LeaseError::UnsafeConfiguration`]: lease_core::LeaseError::UnsafeConfiguration
//!
//! # Cargo features
//!
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod ack;
mod admit;
mod admit_script;
mod attempts;
mod backend;
mod browse;
mod claim;
mod claim_split;
mod combined;
mod config;
mod conn;
mod control;
mod counts;
mod effect;
mod error;
mod execution;
mod fenced;
mod fenced_admit;
mod guard;
mod heap;
mod history;
mod keyed;
mod keys;
mod live;
mod migrate;
mod partitioned;
mod redelivery;
mod refusal;
mod replication;
mod reply;
mod scripts;
mod start;
mod store;
mod tls;
mod url;
mod verify;
mod wakeup;
mod wire;

pub use admit_script::{AdmitScript, ScriptAdmitted};
pub use backend::RedisBackend;
pub use config::{DEFAULT_NAMESPACE, RedisConfig};
pub use conn::{Conn, key_slot};
pub use fenced::{FencedScript, ScriptBodyError};
pub use keys::MAX_NAMESPACE_BYTES;
pub use url::{CLUSTER_SCHEME, MAX_PARTITIONS};
pub use wire::MAX_TOKEN;

/// The assembled Lua scripts of the hot-path operations, so the benchmark (`crates/bench`,
/// `cargo xtask bench`) can run exactly these scripts without the library as its raw
/// baseline. Arguments as documented at the top of each script (`KEYS[1]` the namespace
/// prefix, `ARGV[1]` clock or `''`, `ARGV[2]` redelivery table, then the operation's).
/// Not a stable API.
#[doc(hidden)]
pub mod raw {
    /// `claim_due`.
    pub fn claim_due() -> &'static redis::Script {
        &crate::claim::CLAIM_DUE
    }
    /// `renew`.
    pub fn renew() -> &'static redis::Script {
        &crate::execution::RENEW
    }
    /// `write_step`.
    pub fn write_step() -> &'static redis::Script {
        &crate::heap::WRITE_STEP
    }
    /// `acknowledge`.
    pub fn acknowledge() -> &'static redis::Script {
        &crate::execution::ACKNOWLEDGE
    }
    /// `acknowledge_batch`: `ARGV[3]` the wake publish command (`''` for none), then four
    /// arguments per item (id, token, outcome kind, outcome JSON), as documented at the top
    /// of `ack/acknowledge_batch.lua`.
    pub fn acknowledge_batch() -> &'static redis::Script {
        &crate::ack::ACKNOWLEDGE_BATCH
    }
    /// `acknowledge_and_claim`: `ARGV[3..=7]` as `acknowledge`, then the claim's caller now
    /// (`''` = the clock's), limit and lease ms, as documented at the top of
    /// `combined/acknowledge_and_claim.lua`.
    pub fn acknowledge_and_claim() -> &'static redis::Script {
        &crate::combined::ACKNOWLEDGE_AND_CLAIM
    }
}
