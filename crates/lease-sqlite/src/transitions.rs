//! Execution operations (RFC 002 `ExecutionClient`), each run inside the transaction the
//! caller opened: load the row, apply lease-core's state machine, write the row back.

use std::collections::{BTreeMap, BTreeSet};

use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, ClaimBatch, Claimed, CorruptRecord,
    ExecutionId, ExecutionLease, ExecutionRecord, ExecutionStatus, Fenced, FencingToken,
    LeaseError, Timestamp, WorkflowRunOutcome,
};
use rusqlite::{Connection, OptionalExtension, params};

use lease_core::selection::Gates;
use lease_core::{
    AttemptLimits, ConcurrencyLimits, DeliveryEnd, PauseScope, RedeliveryPolicies, Release,
};

use crate::attempts;
use crate::candidates::{Candidates, Opening};
use crate::control::{self, KeyGate};
use crate::error::{OpError, OpResult};
use crate::group::{Woken, earliest};
use crate::history::{HistoryWrite, StoredHistory};
use crate::keyed_gate::KeyedGate;
use crate::redelivery;
use crate::rows::{self, RawExecution, read_raw};
use crate::scope::Scope;

/// Admits one execution at `now` unless its id exists: the effective record, and the
/// instant it is claimable from when this call created it (an existing one wakes nothing).
fn admit_one(
    conn: &Connection,
    scope: &Scope,
    admission: &Admission,
    now: Timestamp,
) -> OpResult<Woken<ExecutionRecord>> {
    let record = ExecutionRecord::admitted(admission, now);
    if rows::insert(conn, &scope.namespace, &record, &scope.policy)? {
        let wake = record.claimable_at(&scope.policy);
        return Ok(Woken::at(record.effective(now), wake));
    }
    let existing = rows::load(conn, &scope.namespace, &admission.id)?.ok_or_else(|| {
        OpError::Corrupt(format!(
            "execution {} conflicts on insert but cannot be read",
            admission.id
        ))
    })?;
    Ok(Woken::quiet(existing.effective(now)))
}

/// `admit` (due at `not_before`, or now): creates the execution unless it exists; returns
/// the effective record. The caller validated the admission.
pub(crate) fn admit(
    conn: &Connection,
    scope: &Scope,
    admission: &Admission,
) -> OpResult<Woken<ExecutionRecord>> {
    admit_one(conn, scope, admission, scope.now())
}

/// `admit_batch`: every item admitted exactly as [`admit`] would, in the caller's one
/// transaction with one clock reading; records in the items' order. Wakes at the earliest
/// instant over the executions it created. The caller checked the batch
/// (`check_admit_batch`).
pub(crate) fn admit_batch(
    conn: &Connection,
    scope: &Scope,
    admissions: &[Admission],
) -> OpResult<Woken<Vec<ExecutionRecord>>> {
    let now = scope.now();
    let mut records = Vec::with_capacity(admissions.len());
    let mut wake = None;
    for admission in admissions {
        let admitted = admit_one(conn, scope, admission, now)?;
        wake = earliest(wake, admitted.wake);
        records.push(admitted.value);
    }
    Ok(Woken::at(records, wake))
}

/// `get`: the effective record. A stored record this library cannot decode stays a typed
/// error for its id (`Protocol`): there is no record to return, and `None` would claim the
/// id is unknown. When a claim has quarantined it, the error says so and points at
/// `list_corrupt`.
pub(crate) fn get(
    conn: &Connection,
    scope: &Scope,
    id: &ExecutionId,
) -> OpResult<Option<ExecutionRecord>> {
    let now = scope.now();
    match rows::load(conn, &scope.namespace, id) {
        Ok(record) => Ok(record.map(|r| r.effective(now))),
        Err(OpError::Corrupt(problem)) => {
            Err(OpError::Corrupt(match quarantined(conn, scope, id)? {
                Some(note) => format!(
                    "execution {id} is quarantined as corrupt (listed by list_corrupt): {note}"
                ),
                None => problem,
            }))
        }
        Err(other) => Err(other),
    }
}

/// `$1 namespace, $2 id` -> the problem recorded when `id` was quarantined.
const QUARANTINED: &str = include_str!("transitions/quarantined.sql");

/// The problem a claim recorded when it quarantined `id`, if it did.
fn quarantined(conn: &Connection, scope: &Scope, id: &ExecutionId) -> OpResult<Option<String>> {
    Ok(conn
        .prepare_cached(QUARANTINED)?
        .query_row(params![scope.namespace, id.as_str()], |row| row.get(0))
        .optional()?
        .flatten())
}

/// `$1 namespace, $2 min, $3 limit` -> the top rows by stored delivery count.
pub(crate) const LIST_FAILING: &str = include_str!("transitions/list_failing.sql");

/// `$1 namespace, $2 min, $3 now` -> running rows whose lease expired (one more delivery).
pub(crate) const LIST_EXPIRED: &str = include_str!("transitions/list_expired.sql");

/// `list_failing`: effective `unacknowledged_deliveries >= max(min, 1)`, most failing first,
/// then id. Reads the top `limit` rows by stored count through an index, plus every running
/// row whose lease has expired (its effective count is one higher); merging the two is exact.
/// Quarantined records are skipped (they are listed by `list_corrupt`, and `get` reports
/// them); an undecodable record no claim has quarantined yet is still `Protocol`.
pub(crate) fn list_failing(
    conn: &Connection,
    scope: &Scope,
    min: u32,
    limit: usize,
) -> OpResult<Vec<ExecutionRecord>> {
    let now = scope.now();
    let min = i64::from(min.max(1));
    let limit_sql = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut raw: Vec<RawExecution> = conn
        .prepare_cached(LIST_FAILING)?
        .query_map(params![scope.namespace, min, limit_sql], read_raw)?
        .collect::<rusqlite::Result<_>>()?;
    let expired = conn
        .prepare_cached(LIST_EXPIRED)?
        .query_map(params![scope.namespace, min, now.as_millis()], read_raw)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    raw.extend(expired);
    let mut by_id = BTreeMap::new();
    for r in raw {
        let r = r.into_record()?.effective(now);
        if i64::from(r.unacknowledged_deliveries) >= min {
            by_id.insert(r.id.clone(), r);
        }
    }
    let mut out: Vec<ExecutionRecord> = by_id.into_values().collect();
    out.sort_by(|a, b| {
        b.unacknowledged_deliveries
            .cmp(&a.unacknowledged_deliveries)
            .then_with(|| a.id.cmp(&b.id))
    });
    out.truncate(limit);
    Ok(out)
}

/// `$1 namespace, $2 now, $3 limit` -> running rows whose lease is live at `now`, by
/// (expiry, id), through `lease_executions_running` (one seek and a range walk).
pub(crate) const LIST_LIVE_LEASES: &str = include_str!("transitions/list_live_leases.sql");

/// `list_live_leases`: the first `limit` live leases by (expiry, id), as stored (a live
/// lease's stored record is its effective one). Quarantined records are skipped, as
/// `list_failing` skips them.
pub(crate) fn list_live_leases(
    conn: &Connection,
    scope: &Scope,
    limit: usize,
) -> OpResult<Vec<ExecutionRecord>> {
    let now = scope.now();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let raw: Vec<RawExecution> = conn
        .prepare_cached(LIST_LIVE_LEASES)?
        .query_map(params![scope.namespace, now.as_millis(), limit], read_raw)?
        .collect::<rusqlite::Result<_>>()?;
    raw.into_iter()
        .map(|r| Ok(r.into_record()?.effective(now)))
        .collect()
}

/// `request_wake` (unfenced). Wakes when it changed an execution that is not running
/// (a running one keeps the wake for its acknowledgement).
pub(crate) fn request_wake(
    conn: &Connection,
    scope: &Scope,
    id: &ExecutionId,
    at: Timestamp,
) -> OpResult<Woken<()>> {
    let mut record = rows::load_required(conn, &scope.namespace, id)?;
    let before = record.clone();
    record.request_wake(at);
    if record == before {
        return Ok(Woken::quiet(()));
    }
    rows::save(conn, &scope.namespace, &record, &scope.policy)?;
    let wake = if record.status == ExecutionStatus::Running {
        None
    } else {
        record.claimable_at(&scope.policy)
    };
    Ok(Woken::at((), wake))
}

/// `$1 namespace` -> the namespace's last issued token (no row: none issued yet). The
/// claim reads it inside [`crate::candidates::OPENING`]; the raw baseline alone.
pub(crate) const LAST_TOKEN: &str = include_str!("transitions/last_token.sql");

/// `$1 namespace, $2 token`: records the namespace's last issued token.
pub(crate) const STORE_LAST_TOKEN: &str = include_str!("transitions/store_last_token.sql");

fn store_last_token(conn: &Connection, namespace: &str, token: FencingToken) -> OpResult<()> {
    conn.prepare_cached(STORE_LAST_TOKEN)?
        .execute(params![namespace, rows::token_to_sql(token)?])?;
    Ok(())
}

/// `$1 namespace, $2 n`: adds a claim's takeovers to the namespace's counter.
pub(crate) const ADD_TAKEOVERS: &str = include_str!("transitions/add_takeovers.sql");

/// A claim's writes to the namespace's counters row, in its transaction: the last token it
/// issued, when it issued any (`issued`), then the `takeovers` it made, when it made any
/// (the drain's claims, which take over nothing, run no more than the token's write).
fn store_counters(
    conn: &Connection,
    namespace: &str,
    issued: bool,
    token: FencingToken,
    takeovers: u64,
) -> OpResult<()> {
    if !issued {
        return Ok(());
    }
    store_last_token(conn, namespace, token)?;
    if takeovers > 0 {
        let n = i64::try_from(takeovers).unwrap_or(i64::MAX);
        conn.prepare_cached(ADD_TAKEOVERS)?
            .execute(params![namespace, n])?;
    }
    Ok(())
}

/// The token after `last` for claiming `stored`: it must be above every token stored, or a
/// stale holder's token would be issued again. A counter that is behind the record
/// (deleted, or restored from an older copy) or used up fails the claim with
/// `TokenCounter`; the caller's transaction (or savepoint) rolls back, so nothing changes.
fn next_token(
    scope: &Scope,
    last: FencingToken,
    stored: &ExecutionRecord,
) -> OpResult<FencingToken> {
    let refuse = |reason: String| {
        OpError::Lease(LeaseError::TokenCounter {
            location: format!("{} (namespace {})", scope.location, scope.namespace),
            reason,
        })
    };
    let next = last
        .get()
        .checked_add(1)
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| refuse(format!("last token {last} leaves no token to issue")))?;
    let next = FencingToken::new(next);
    if next <= stored.token {
        return Err(refuse(format!(
            "next token {next} is not above token {} of execution {}; set the counter \
             above the highest stored token",
            stored.token, stored.id
        )));
    }
    Ok(next)
}

/// The earliest `claimable_at` of a namespace: one seek of `lease_executions_horizon`.
pub(crate) const HORIZON: &str = include_str!("transitions/horizon.sql");

/// `$1 rowid, $2 problem`: takes a record out of the claim and horizon indexes.
const QUARANTINE: &str = include_str!("transitions/quarantine.sql");

/// Quarantines a record the claim cannot decode, in the claim's transaction, so one bad
/// record never stops every claim: later claims do not walk it again and `list_corrupt`
/// names it. Logged once, here.
fn quarantine(conn: &Connection, scope: &Scope, rowid: i64, problem: &str) -> OpResult<()> {
    tracing::warn!(
        namespace = %scope.namespace,
        rowid,
        problem,
        "skipping a corrupt execution record; quarantined (see list_corrupt)"
    );
    conn.prepare_cached(QUARANTINE)?
        .execute(params![rowid, problem])?;
    Ok(())
}

/// `$1 namespace, $2 limit` -> (id, problem) of quarantined records, by id.
const LIST_CORRUPT: &str = include_str!("transitions/list_corrupt.sql");

/// `list_corrupt`: quarantined records by id, at most `limit`.
pub(crate) fn list_corrupt(
    conn: &Connection,
    scope: &Scope,
    limit: usize,
) -> OpResult<Vec<CorruptRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    Ok(conn
        .prepare_cached(LIST_CORRUPT)?
        .query_map(params![scope.namespace, limit], |row| {
            Ok(CorruptRecord {
                id: row.get::<_, Option<String>>(0)?.unwrap_or_default(),
                problem: row.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?)
}

/// Candidates per index page when claiming.
const PAGE_MIN: usize = 16;

/// The earliest instant anything in the namespace becomes claimable, read after the claim
/// in its own transaction (the dispatcher sleeps until then).
fn horizon(conn: &Connection, namespace: &str) -> OpResult<Option<Timestamp>> {
    let at: Option<i64> = conn
        .prepare_cached(HORIZON)?
        .query_row([namespace], |row| row.get(0))
        .optional()?;
    Ok(at.map(Timestamp::from_millis))
}

/// `claim_due_with_horizon` (and through it `claim_due`, `claim_due_with_records`): walks
/// the claim indexes in (priority DESC, due, id) order over rows whose `claimable_at` is at
/// most `now`, re-checks each with `effective()` + `claimable()` (with this handle's
/// policy), skips paused rows and rows whose concurrency key is at its limit
/// ([`KeyGate`]; lease_core::selection rules 1-3), and claims until `limit`. Tokens come
/// from the namespace's one counter; a claim that took over expired leases adds their number
/// to the namespace's takeover counter on the same row, in the same transaction. Each lease comes with the
/// record exactly as written back, which is what `get` reads right after the claim. The
/// batch also carries the clock the claim used and the namespace's earliest `claimable_at`
/// after it; the claim wakes at the earliest instant its new leases would be claimable
/// again (their expiry plus the redelivery delay), so idle dispatchers arm a timer.
pub(crate) fn claim_due(
    conn: &Connection,
    scope: &Scope,
    requested_now: Timestamp,
    limit: usize,
    lease_ms: i64,
) -> OpResult<Woken<ClaimBatch>> {
    claim_at(conn, scope, requested_now.min(scope.now()), limit, lease_ms)
}

/// The claim of [`claim_due`] evaluated at `now` (already `min(requested, backend clock)`):
/// the one claim code path, shared with [`acknowledge_and_claim`].
fn claim_at(
    conn: &Connection,
    scope: &Scope,
    now: Timestamp,
    limit: usize,
    lease_ms: i64,
) -> OpResult<Woken<ClaimBatch>> {
    let ns = scope.namespace.as_str();
    let opening = Opening::read(conn, ns, now)?;
    let paused = if opening.any_paused {
        control::paused_set(conn, ns)?
    } else {
        BTreeSet::new()
    };
    let gates = Gates {
        paused: &paused,
        limits: &ConcurrencyLimits::default(),
    };
    let mut keys = KeyGate::new(opening.any_limit);
    let mut keyed = KeyedGate::new(opening.any_ordered, opening.any_rate);
    let mut token = rows::token_from_sql(opening.last_token)?;
    let first_token = token;
    let mut leases = Vec::with_capacity(limit);
    let mut candidates = Candidates::new(ns, now, limit.max(PAGE_MIN), &opening);
    let mut settings = ClaimSettings::default();
    let mut takeovers: u64 = 0;
    let everything_paused = paused.contains(&PauseScope::Namespace);
    while leases.len() < limit && !everything_paused {
        let Some(candidate) = candidates.next(conn)? else {
            break;
        };
        // A quarantined row leaves both claim indexes, so no later page returns it.
        let stored = match candidate.record {
            Ok(stored) => stored,
            Err(problem) => {
                quarantine(conn, scope, candidate.rowid, &problem)?;
                continue;
            }
        };
        let mut record = stored.effective(now);
        if !record.claimable(now, &scope.policy)
            || gates.paused(&record)
            || !keyed.admits(conn, ns, now, &record)?
            || !keys.admits(conn, ns, now, &record)?
        {
            continue;
        }
        let Some(history) = candidate_history(
            conn,
            scope,
            candidate.rowid,
            &candidate.history,
            &stored,
            now,
        )?
        else {
            continue;
        };
        keyed.took(conn, ns, now, &record)?;
        token = next_token(scope, token, &stored)?;
        settings.stamp(conn, ns, &mut record)?;
        let lease = record.claim(now, lease_ms, token);
        rows::save_with(conn, ns, &record, &scope.policy, &history)?;
        // A stored running row a claim may take is a lease that ran out: a takeover.
        takeovers += u64::from(stored.status == ExecutionStatus::Running);
        leases.push(Claimed { lease, record });
    }
    store_counters(conn, ns, token != first_token, token, takeovers)?;
    let wake = leases
        .iter()
        .filter_map(|c| c.record.claimable_at(&scope.policy))
        .min();
    let batch = ClaimBatch {
        claimed: leases,
        now: Some(now),
        next_claimable_at: claim_horizon(conn, ns, &paused, &keys, &keyed)?,
    };
    Ok(Woken::at(batch, wake))
}

/// The per-workflow settings a claim stamps on each record it takes, read once the claim
/// takes its first lease: a claim that takes nothing pays nothing.
#[derive(Default)]
struct ClaimSettings {
    attempt_limits: Option<AttemptLimits>,
    redelivery_policies: Option<RedeliveryPolicies>,
}

impl ClaimSettings {
    /// Stamps the attempt limit and redelivery policy of `record`'s workflow on it.
    fn stamp(&mut self, conn: &Connection, ns: &str, record: &mut ExecutionRecord) -> OpResult<()> {
        let limits = match &mut self.attempt_limits {
            Some(limits) => limits,
            empty => empty.insert(attempts::limits(conn, ns)?),
        };
        record.attempt_limit = limits.of(record.workflow.as_ref());
        let policies = match &mut self.redelivery_policies {
            Some(policies) => policies,
            empty => empty.insert(redelivery::policies(conn, ns)?),
        };
        record.redelivery_policy = policies.of(record.workflow.as_ref());
        Ok(())
    }
}

/// What a claim at `now` of a candidate (`stored` its record) writes of its delivery
/// history; `None` after setting aside a row whose history does not decode (it leaves the
/// claim indexes, like any corrupt row).
fn candidate_history(
    conn: &Connection,
    scope: &Scope,
    rowid: i64,
    history: &StoredHistory,
    stored: &ExecutionRecord,
    now: Timestamp,
) -> OpResult<Option<HistoryWrite>> {
    match history.claim(stored, now) {
        Ok(write) => Ok(Some(write)),
        Err(OpError::Corrupt(problem)) => {
            quarantine(conn, scope, rowid, &problem)?;
            Ok(None)
        }
        Err(other) => Err(other),
    }
}

/// The claim's horizon after its writes: one seek when nothing was held back; otherwise
/// the walk past what the gates held back (lease_core::selection rule 4), no later than
/// the instant a head held back by another execution's live lease may go.
fn claim_horizon(
    conn: &Connection,
    ns: &str,
    paused: &BTreeSet<PauseScope>,
    keys: &KeyGate,
    keyed: &KeyedGate,
) -> OpResult<Option<Timestamp>> {
    if paused.is_empty() && keys.blocked.is_empty() && keyed.held_nothing() {
        return horizon(conn, ns);
    }
    if paused.contains(&PauseScope::Namespace) {
        return Ok(None);
    }
    let walked = control::gated_horizon(conn, ns, paused, |id, key, at| {
        if keys.blocked.contains(id) {
            None
        } else {
            keyed.hold(id, key, at)
        }
    })?;
    Ok(earliest(walked, keyed.released_at()))
}

/// Loads the record a lease names and checks it (`holds_at` the backend clock: a lease
/// whose expiry used the last attempt is lost, as `get` reads it dead): `None` when lost.
fn held(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
) -> OpResult<Option<ExecutionRecord>> {
    Ok(held_with_history(conn, scope, lease)?.map(|(record, _)| record))
}

/// [`held`] with the execution's delivery history, for the transitions that end the
/// delivery (a stale holder gets `None` and writes nothing).
fn held_with_history(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
) -> OpResult<Option<(ExecutionRecord, StoredHistory)>> {
    let (record, history) = rows::load_with_history(conn, &scope.namespace, &lease.execution_id)?;
    Ok(if record.holds_at(lease, scope.now())? {
        Some((record, history))
    } else {
        None
    })
}

/// `renew` (fenced): extends from the backend clock's now.
pub(crate) fn renew(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
    lease_ms: i64,
) -> OpResult<Fenced<ExecutionLease>> {
    let Some(mut record) = held(conn, scope, lease)? else {
        return Ok(Fenced::Lost);
    };
    let renewed = record.renew(scope.now(), lease_ms);
    rows::save(conn, &scope.namespace, &record, &scope.policy)?;
    Ok(Fenced::Accepted(renewed))
}

/// `release_with` (fenced): ends the delivery unacknowledged as `how` says (an attempt, the
/// last one making the execution dead in this transaction, or a lease never started).
/// Wakes at the end of the redelivery delay (at once for a lease never started).
pub(crate) fn release(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
    how: &Release,
) -> OpResult<Woken<Fenced<()>>> {
    let Some((mut record, history)) = held_with_history(conn, scope, lease)? else {
        return Ok(Woken::quiet(Fenced::Lost));
    };
    let now = scope.now();
    // Only a reported error is kept with the entry; a retry reply is no error.
    let (end, error) = match how {
        Release::NotStarted => (DeliveryEnd::NotStarted, None),
        Release::Failed(note) => (DeliveryEnd::Released, Some(note.clone())),
        Release::Retry => (DeliveryEnd::Released, None),
    };
    // Read from the stored record: the row describes the delivery until this write.
    let history = history.end(&record, end, now, error)?;
    record.release_with(now, how);
    rows::save_with(conn, &scope.namespace, &record, &scope.policy, &history)?;
    Ok(Woken::at(
        Fenced::Accepted(()),
        earliest(
            record.claimable_at(&scope.policy),
            freed_place(&record, scope.now()),
        ),
    ))
}

/// A keyed lease that ended at `now` freed a place of its key: the wake-up path hears
/// "now", since a candidate of that key may be claimable again.
fn freed_place(record: &ExecutionRecord, now: Timestamp) -> Option<Timestamp> {
    record.concurrency_key.is_some().then_some(now)
}

/// `acknowledge` (fenced): ends the delivery with an outcome. Wakes when the outcome
/// leaves the execution due (suspended with a wake requested during the delivery).
pub(crate) fn acknowledge(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
    outcome: &WorkflowRunOutcome,
) -> OpResult<Woken<Fenced<Acknowledged>>> {
    acknowledge_at(conn, scope, lease, outcome, scope.now())
}

/// The acknowledgement of [`acknowledge`] at `now`: the one acknowledgement code path,
/// shared with [`acknowledge_batch`] and [`acknowledge_and_claim`]. An unknown execution,
/// token 0 or a foreign token fails before anything is written.
fn acknowledge_at(
    conn: &Connection,
    scope: &Scope,
    lease: &ExecutionLease,
    outcome: &WorkflowRunOutcome,
    now: Timestamp,
) -> OpResult<Woken<Fenced<Acknowledged>>> {
    let Some((mut record, history)) = held_with_history(conn, scope, lease)? else {
        return Ok(Woken::quiet(Fenced::Lost));
    };
    let end = match outcome {
        WorkflowRunOutcome::Suspended => DeliveryEnd::Suspended,
        WorkflowRunOutcome::Completed(_) | WorkflowRunOutcome::Failed(_) => {
            DeliveryEnd::Acknowledged
        }
    };
    // Read from the stored record: the row describes the delivery until this write.
    let history = history.acknowledge(&record, end, now)?;
    let acknowledged = record.acknowledge(now, outcome);
    rows::save_with(conn, &scope.namespace, &record, &scope.policy, &history)?;
    Ok(Woken::at(
        Fenced::Accepted(acknowledged),
        earliest(
            record.claimable_at(&scope.policy),
            freed_place(&record, now),
        ),
    ))
}

/// `acknowledge_batch` (fenced per item), inside the caller's one transaction: checks every
/// item first, so an unknown execution, a foreign token or token 0 in any item fails the
/// whole batch before anything is written; then acknowledges each item exactly as
/// [`acknowledge`] does (a `Lost` item changes nothing and refuses no other item).
/// Wakes at the earliest instant over the items.
pub(crate) fn acknowledge_batch(
    conn: &Connection,
    scope: &Scope,
    acks: &[Acknowledgement],
) -> OpResult<Woken<Vec<Fenced<Acknowledged>>>> {
    for ack in acks {
        held(conn, scope, &ack.lease)?;
    }
    let now = scope.now();
    let mut results = Vec::with_capacity(acks.len());
    let mut wake = None;
    for ack in acks {
        let acked = acknowledge_at(conn, scope, &ack.lease, &ack.outcome, now)?;
        wake = earliest(wake, acked.wake);
        results.push(acked.value);
    }
    Ok(Woken::at(results, wake))
}

/// Savepoint around the claim part of [`acknowledge_and_claim`] (opened and released
/// through the statement cache: `execute_batch` compiles its SQL on every call).
const CLAIM_SAVEPOINT: &str = "SAVEPOINT lease_ack_claim";
const CLAIM_SAVEPOINT_RELEASE: &str = "RELEASE lease_ack_claim";
const CLAIM_SAVEPOINT_ROLLBACK: &str = "ROLLBACK TO lease_ack_claim; RELEASE lease_ack_claim";

/// Runs one cached statement without parameters (a savepoint's).
fn run_cached(conn: &Connection, sql: &str) -> OpResult<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// `acknowledge_and_claim`, inside the caller's one transaction and with one clock reading:
/// the acknowledgement exactly as [`acknowledge`] (`Lost` changes nothing; an unknown
/// execution, token 0 or a foreign token fails the whole call before anything is written,
/// so no claim is made either), then the claim exactly as [`claim_due`], evaluated after it
/// at `min(requested_now, now)`. The caller validated the claim request.
///
/// A claim the store refuses after the acknowledgement applied (`TokenCounter`, an
/// unreadable counter row) rolls back to its own savepoint: the acknowledgement stays, the
/// claim is empty and logged, as the trait's default and lease-redis do (the delivery's
/// outcome is not lost to a counter an operator has to repair). Lock contention and driver
/// errors fail the whole call (the group retries or rolls back, nothing applied). Wakes at
/// the earlier of the two parts' instants.
pub(crate) fn acknowledge_and_claim(
    conn: &Connection,
    scope: &Scope,
    ack: &Acknowledgement,
    requested_now: Timestamp,
    limit: usize,
    lease_ms: i64,
) -> OpResult<Woken<AckAndClaim>> {
    let now = scope.now();
    let acked = acknowledge_at(conn, scope, &ack.lease, &ack.outcome, now)?;
    let claimed = claim_after_ack(conn, scope, requested_now.min(now), limit, lease_ms)?;
    Ok(Woken::at(
        AckAndClaim {
            acknowledged: acked.value,
            next: claimed.value,
        },
        earliest(acked.wake, claimed.wake),
    ))
}

/// [`claim_at`] in a savepoint: a refusal of its own (a typed or corrupt-data error) is an
/// empty claim with nothing of the claim applied; SQLite errors propagate.
fn claim_after_ack(
    conn: &Connection,
    scope: &Scope,
    now: Timestamp,
    limit: usize,
    lease_ms: i64,
) -> OpResult<Woken<ClaimBatch>> {
    run_cached(conn, CLAIM_SAVEPOINT)?;
    match claim_at(conn, scope, now, limit, lease_ms) {
        Ok(claimed) => {
            run_cached(conn, CLAIM_SAVEPOINT_RELEASE)?;
            Ok(claimed)
        }
        Err(e @ OpError::Sqlite(_)) => Err(e),
        Err(refused) => {
            conn.execute_batch(CLAIM_SAVEPOINT_ROLLBACK)?;
            tracing::warn!(
                namespace = %scope.namespace,
                error = %refused.into_lease("acknowledge_and_claim"),
                "the claim after an applied acknowledgement was refused; claimed nothing"
            );
            Ok(Woken::quiet(ClaimBatch::default()))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use crate::config::Location;

    /// `EXPLAIN QUERY PLAN` of `sql` on a fresh schema, its details joined by " | ".
    pub(crate) fn plan(sql: &str, params: usize) -> String {
        let conn = crate::migrate::open(
            &Location::Memory(format!("plan-{}", uuid::Uuid::new_v4())),
            Duration::from_secs(1),
        )
        .expect("open");
        let args: Vec<i64> = vec![0; params];
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("prepare");
        let rows: Vec<String> = stmt
            .query_map(rusqlite::params_from_iter(args), |row| {
                row.get::<_, String>(3)
            })
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        rows.join(" | ")
    }

    #[test]
    fn the_horizon_is_one_seek_of_its_index() {
        let plan = plan(super::HORIZON, 1);
        assert!(plan.contains("lease_executions_horizon"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        assert!(!plan.starts_with("SCAN"), "{plan}");
    }
}
