//! [`ExecutionClient`] for [`PostgresBackend`]: admission, the effective record, wakes,
//! claims (with the claimed records from the claim's own statement) and the fenced lease
//! operations, single and batched (RFC 002 "Leases").

use std::time::Duration;

use async_trait::async_trait;
use lease_core::execution::{check_ack_batch, check_admit_batch};
use lease_core::limits::check_limit;
use lease_core::time::lease_millis;
use lease_core::{
    AckAndClaim, Acknowledged, Acknowledgement, Admission, ClaimBatch, ClaimRequest, Claimed,
    CorruptRecord, ErrorNote, ExecutionClient, ExecutionId, ExecutionLease, ExecutionOutcome,
    ExecutionRecord, Fenced, FencingToken, Purged, Release, Result, Timestamp, WakeReceiver,
    WorkflowRunOutcome,
};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgRow;

use crate::ack_and_claim::{AckAndClaimStatements, AckThenClaim};
use crate::admission::{
    AdmitColumns, AdmittedBatch, SNAPSHOT_RETRIES, admit_params, admitted, batch_admitted,
    invisible,
};
use crate::backend::PostgresBackend;
use crate::error::{Effect, protocol, settle};
use crate::rows::{self, EXECUTION_COLUMNS, FenceCheck, col, token_param};
use crate::statements::{ExecutionSql, Renderer, fragment};

const ADMIT: &str = include_str!("execution/admit.sql");
const ADMIT_BATCH: &str = include_str!("execution/admit_batch.sql");
const GET: &str = include_str!("execution/get.sql");
const LIST_FAILING: &str = include_str!("execution/list_failing.sql");
const LIST_CORRUPT: &str = include_str!("execution/list_corrupt.sql");
const LIST_LIVE_LEASES: &str = include_str!("execution/list_live_leases.sql");
const REQUEST_WAKE: &str = include_str!("execution/request_wake.sql");
const CLAIM: &str = include_str!("execution/claim.sql");
/// The claim's candidates (`levels`, `waiting`, `expired`), spliced as `{candidates}`.
const CLAIM_CANDIDATES: &str = include_str!("execution/claim_candidates.sql");
/// The claim transition after `picked`, spliced as `{take}`.
const CLAIM_TAKE: &str = include_str!("execution/claim_take.sql");
/// The claim's summary row, spliced as its `{horizon}`.
const CLAIM_HORIZON: &str = include_str!("execution/claim_horizon.sql");
/// Whether no paused scope covers the row, spliced as the claim's `{unpaused}`.
const CLAIM_UNPAUSED: &str = include_str!("execution/claim_unpaused.sql");
/// The keyed claim (`gate.rs`): candidates, key locks, counts after the locks, the claim.
const CLAIM_KEYED: &str = include_str!("execution/claim_keyed.sql");
/// The keyed claim's per-row condition (`{open}`): the key is not at its limit.
const CLAIM_OPEN: &str = include_str!("execution/claim_open.sql");
/// The keyed claim's horizon condition (`{unblocked}`).
const CLAIM_UNBLOCKED: &str = include_str!("execution/claim_unblocked.sql");
/// The keyed claim's own leases per key (`{taken}` in `{unblocked}`).
const CLAIM_TAKEN: &str = include_str!("execution/claim_taken.sql");
/// Whether the row's key is at its limit (`{key_full}`).
const KEY_FULL: &str = include_str!("execution/key_full.sql");
/// The row's key's live leases (`{key_live}`).
const KEY_LIVE: &str = include_str!("execution/key_live.sql");
/// The row's key's limit (`{key_cap}`).
const KEY_CAP: &str = include_str!("execution/key_cap.sql");
/// Whether the row's key's ordering or rate holds it back (`{key_held}`).
const KEY_HELD: &str = include_str!("execution/key_held.sql");
/// The row's key's ordering and rate (`{key_policy}`).
const KEY_POLICY: &str = include_str!("execution/key_policy.sql");
/// The keyed claim's part of the horizon: when a held key may start again.
const KEY_WAIT_HORIZON: &str = ", (SELECT w.at FROM key_wait w)";
/// The limit of `acknowledge_and_claim`'s claim, replacing the claim's `$3`.
const ACK_AND_CLAIM_LIMIT: &str = include_str!("execution/ack_and_claim_limit.sql");
const RENEW: &str = include_str!("execution/renew.sql");
const RELEASE: &str = include_str!("execution/release.sql");
const ACKNOWLEDGE: &str = include_str!("execution/acknowledge.sql");
const ACKNOWLEDGE_BATCH: &str = include_str!("execution/acknowledge_batch.sql");
const PURGE_TERMINAL: &str = include_str!("execution/purge_terminal.sql");

/// The acknowledgement sent: `acknowledge.sql`, or under cfg
/// `lease_postgres_nonatomic_fencing_experiment` (build.rs) the same statement with its
/// token test moved out of the update's re-tested WHERE into a read of the statement's
/// snapshot, so a claim committing in between goes unnoticed (deliberately broken, for
/// `tests/race.rs` by hand).
#[cfg(not(lease_postgres_nonatomic_fencing_experiment))]
fn acknowledge_template() -> String {
    fragment(ACKNOWLEDGE).to_owned()
}

/// See the other `acknowledge_template`.
#[cfg(lease_postgres_nonatomic_fencing_experiment)]
fn acknowledge_template() -> String {
    fragment(ACKNOWLEDGE).replace(
        "e.token = $2",
        "(SELECT s.token FROM {s}.executions s WHERE s.id = $1) = $2",
    )
}

/// `template` with the key gate's fragments (`{key_full}`, `{taken}` as `taken`,
/// `{key_live}`, `{key_cap}`) and the pause gate (`{unpaused}`) spliced in.
fn with_gates(template: &str, taken: &str) -> String {
    template
        .replace("{key_full}", fragment(KEY_FULL))
        .replace("{key_held}", fragment(KEY_HELD))
        .replace("{key_policy}", fragment(KEY_POLICY))
        .replace("{taken}", taken)
        .replace("{key_live}", fragment(KEY_LIVE))
        .replace("{key_cap}", fragment(KEY_CAP))
        .replace("{unpaused}", fragment(CLAIM_UNPAUSED))
}

/// The claim statement without its `{horizon}`: `claim.sql` with its candidates and the
/// claim transition, ungated by keys (`claim.sql` hands keyed work to the gate).
fn claim_template() -> String {
    let claim = fragment(CLAIM)
        .replace("{candidates}", fragment(CLAIM_CANDIDATES))
        .replace("{take}", fragment(CLAIM_TAKE))
        .replace("{open}", "true")
        .replace("{unblocked}", "true");
    with_gates(&claim, "0")
}

/// The keyed claim (`gate.rs`) without its `{horizon}`: `claim_keyed.sql` with its
/// candidates (open keys only), the stall bound and the claim transition.
fn claim_keyed_template() -> String {
    let open = fragment(CLAIM_OPEN)
        .replace("{key_full}", fragment(KEY_FULL))
        .replace("{key_held}", fragment(KEY_HELD))
        .replace("{taken}", "0");
    let keyed = fragment(CLAIM_KEYED)
        .replace("{candidates}", fragment(CLAIM_CANDIDATES))
        .replace("{open}", &open)
        .replace("{take}", fragment(CLAIM_TAKE))
        .replace("{unblocked}", fragment(CLAIM_UNBLOCKED))
        .replace("{stall_min}", &crate::gate::MIN_GATE_STALL_MS.to_string())
        .replace("{stall_max}", &crate::gate::MAX_GATE_STALL_MS.to_string());
    with_gates(&keyed, fragment(CLAIM_TAKEN))
}

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> ExecutionSql {
    let claim = claim_template();
    let keyed = claim_keyed_template();
    let acknowledge = r.render(&acknowledge_template());
    let plain_horizon = fragment(CLAIM_HORIZON).replace("{key_wait}", "");
    let keyed_horizon = fragment(CLAIM_HORIZON).replace("{key_wait}", KEY_WAIT_HORIZON);
    let claim = claim.replace("{horizon}", &plain_horizon);
    let keyed = keyed.replace("{horizon}", &keyed_horizon);
    let after_ack = |claim: &str| {
        let claim = claim.replace("$3", fragment(ACK_AND_CLAIM_LIMIT));
        AckAndClaimStatements::new(&acknowledge, &r.render(&claim))
    };
    let (ack_and_claim, ack_and_claim_keyed) = (after_ack(&claim), after_ack(&keyed));
    ExecutionSql {
        admit: r.render(ADMIT),
        admit_batch: r.render(ADMIT_BATCH),
        get: r.render(GET),
        list_failing: r.render(LIST_FAILING),
        list_corrupt: r.render(LIST_CORRUPT),
        list_live_leases: r.render(LIST_LIVE_LEASES),
        request_wake: r.render(REQUEST_WAKE),
        claim_leases_only: r.render(&claim_template().replace("{horizon}", "")),
        claim: r.render(&claim),
        claim_keyed: r.render(&keyed),
        renew: r.render(RENEW),
        release: r.render(RELEASE),
        acknowledge,
        acknowledge_batch: r.render(ACKNOWLEDGE_BATCH),
        ack_and_claim,
        ack_and_claim_keyed,
        purge_terminal: r.render(PURGE_TERMINAL),
    }
}

impl PostgresBackend {
    /// This module's statements.
    pub(crate) fn execution_sql(&self) -> &ExecutionSql {
        let sql = &self.inner.sql;
        sql.execution.get(&sql.renderer, statements)
    }

    /// Decides a fenced statement's reply from its (token, status, took-effect) row.
    pub(crate) fn fenced<T>(
        &self,
        operation: &'static str,
        lease: &ExecutionLease,
        row: Option<(FenceCheck, Option<T>)>,
    ) -> Result<Fenced<T>> {
        let Some((check, applied)) = row else {
            return Err(lease_core::LeaseError::UnknownExecution(
                lease.execution_id.clone(),
            ));
        };
        if let Some(value) = applied {
            // Accepted with token 0 cannot happen (no running row has token 0), but bad
            // input must never be reported as success.
            if lease.token == FencingToken::NONE {
                return Err(protocol(operation, "token 0 was accepted"));
            }
            return Ok(Fenced::Accepted(value));
        }
        check.rejection(&lease.execution_id, lease.token, operation)?;
        Ok(Fenced::Lost)
    }

    /// One run of the admit-batch statement over `items` (distinct ids): (index into
    /// `items`, record as `admit` would return it) for every item the statement could see.
    async fn admit_batch_once(
        &self,
        items: &[&Admission],
    ) -> Result<Vec<(usize, ExecutionRecord)>> {
        const OP: &str = "admit_batch";
        let columns: AdmitColumns<'_> = items.iter().map(|a| admit_params(a)).collect();
        let sql = &self.execution_sql().admit_batch;
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::IdempotentWrite, sql, |q| {
                columns.bind(q, self.clock_param())
            })
            .await?;
        batch_admitted(&found, items, OP)
    }

    /// The claim statement's rows as the batch they describe (the claim committed), and
    /// whether the statement handed the claim to the key gate (then it claimed nothing).
    pub(crate) fn claim_batch(&self, found: &[PgRow]) -> Result<(ClaimBatch, bool)> {
        let mut batch = ClaimBatch::default();
        let mut gated = false;
        for row in found {
            let part: i32 = col(row, CLAIM_PART, "claim_due")?;
            if part == 1 {
                let now: i64 = col(row, CLAIM_NOW, "claim_due")?;
                let next: Option<i64> = col(row, CLAIM_NEXT, "claim_due")?;
                let handed: Option<bool> = col(row, CLAIM_GATED_COLUMN, "claim_due")?;
                batch.now = Some(Timestamp::from_millis(now));
                batch.next_claimable_at = next.map(Timestamp::from_millis);
                gated = handed.unwrap_or(false);
            } else {
                // The claim committed: a row that fails to decode cannot become an error
                // (the good leases would be issued to nobody too). The statement skips every
                // row `record_problem` rejects, which are the decoder's rules, so this does
                // not happen; if it did, that lease expires unused and the row is
                // redelivered, and the others are returned.
                match claimed_row(row) {
                    Ok(claimed) => batch.claimed.push(claimed),
                    Err(e) => tracing::error!(
                        schema = self.schema(),
                        error = %e,
                        "a claimed row cannot be decoded; its lease is left to expire"
                    ),
                }
            }
        }
        Ok((batch, gated))
    }

    /// The reply to `acknowledge`'s statement (`row`: its one row, `None` for an unknown
    /// execution) for `lease`, as `acknowledge` reports it.
    fn ack_reply(
        &self,
        lease: &ExecutionLease,
        row: Option<&PgRow>,
        reply: Acknowledged,
    ) -> Result<Fenced<Acknowledged>> {
        const OP: &str = "acknowledge";
        let decoded = row
            .map(|row| {
                let acknowledged: Option<bool> = col(row, 2, OP)?;
                Ok::<_, lease_core::LeaseError>((
                    FenceCheck::decode(row, OP)?,
                    acknowledged.filter(|a| *a).map(|_| reply),
                ))
            })
            .transpose()?;
        self.fenced(OP, lease, decoded)
    }

    /// One run of `acknowledge_and_claim`'s message
    /// ([`AckAndClaimStatements`]; its claim keyed once this backend's claims are, see
    /// `gate.rs`): the acknowledgement's reply, the claim's rows, and whether the claim was
    /// handed to the key gate.
    async fn ack_then_claim_once(
        &self,
        ack: &Acknowledgement,
        next: &ClaimRequest,
        lease_ms: i64,
    ) -> Result<(Fenced<Acknowledged>, ClaimBatch, bool)> {
        const OP: &str = "acknowledge_and_claim";
        let (status, value, reply) = ack_params(&ack.outcome);
        let token = token_param(&ack.lease)?;
        let delays = &self.inner.delays;
        let params = |clock| AckThenClaim {
            id: ack.lease.execution_id.as_str(),
            token,
            clock,
            status,
            outcome: value,
            requested: next.now.as_millis(),
            limit: i64::try_from(next.limit).unwrap_or(i64::MAX),
            lease_ms,
            delays,
        };
        let sql = if self.claims_keyed() {
            &self.execution_sql().ack_and_claim_keyed
        } else {
            &self.execution_sql().ack_and_claim
        };
        // Built before any connection is taken: a value the server could not accept
        // (U+0000 in an outcome) is refused with nothing sent, as a bound one would be.
        if sql.execute(&params(None)).is_none() {
            return Err(lease_core::LeaseError::invalid(
                "outcome",
                "contains U+0000, which PostgreSQL text cannot hold",
            ));
        }
        self.inner.listen_state.wait().await;
        // Never retried after it may have run: the claim could issue a second token.
        let parts = self
            .run(OP, Effect::Write, |mut conn| {
                let query = sql.execute(&params(self.clock_param()));
                async move {
                    let query = query.unwrap_or_default();
                    let message = || sqlx::raw_sql(AssertSqlSafe(query.clone()));
                    let mut r = statement_rows(message(), &mut conn).await;
                    if r.as_ref().is_err_and(|e| has_code(e, UNDEFINED_PREPARED)) {
                        // A connection without the statements (its first such call, or
                        // they were deallocated): the failed EXECUTE rolled the whole
                        // message back, so nothing ran; prepare them and send it again.
                        if let Err(e) = prepare_ack_then_claim(sql, &mut conn).await {
                            return settle(Err(e), &mut conn);
                        }
                        r = statement_rows(message(), &mut conn).await;
                    }
                    settle(r, &mut conn)
                }
            })
            .await
            .map_err(|e| crate::error::in_schema(e, self.schema()))?;
        // The transaction committed: from here on an unreadable reply is `OutcomeUnknown`.
        let [ack_rows, claim_rows] = <[Vec<PgRow>; 2]>::try_from(parts)
            .map_err(|p| after_commit(protocol(OP, format!("{} statement replies", p.len()))))?;
        if ack_rows.len() > 1 {
            return Err(after_commit(protocol(OP, "several acknowledgement rows")));
        }
        let (batch, gated) = self.claim_batch(&claim_rows).map_err(after_commit)?;
        match self.ack_reply(&ack.lease, ack_rows.first(), reply) {
            Ok(acknowledged) => Ok((acknowledged, batch, gated)),
            // Refused: the claim was limited to 0, so nothing was written.
            Err(e) if e.is_bad_input() && batch.claimed.is_empty() => Err(e),
            Err(e) => Err(after_commit(e)),
        }
    }
}

/// The claim statement's first record column: after the lease's (id, token, expiry).
const CLAIM_RECORD: usize = 3;
/// The claim's summary row columns: the clock it ran at and the horizon.
const CLAIM_NOW: usize = CLAIM_RECORD + EXECUTION_COLUMNS;
const CLAIM_NEXT: usize = CLAIM_NOW + 1;
/// The claim's row kind: 0 for a claimed execution, 1 for the summary.
const CLAIM_PART: usize = CLAIM_NOW + 3;
/// The summary row's "handed to the key gate" column (`claim.sql`).
const CLAIM_GATED_COLUMN: usize = CLAIM_NOW + 5;

/// The acknowledge-batch statement's rows as (fence check or `None` for an unknown
/// execution, applied?) per item, checking there is one row per item in item order.
fn batch_verdicts(found: &[PgRow], items: usize) -> Result<Vec<(Option<FenceCheck>, bool)>> {
    const OP: &str = "acknowledge_batch";
    if found.len() != items {
        return Err(protocol(
            OP,
            format!("{} rows for {} items", found.len(), items),
        ));
    }
    let mut verdicts = Vec::with_capacity(items);
    for (i, row) in found.iter().enumerate() {
        let ord: i64 = col(row, 0, OP)?;
        if usize::try_from(ord).ok() != Some(i + 1) {
            return Err(protocol(OP, format!("row {i} is item {ord}")));
        }
        let check = FenceCheck::decode_optional(row, 1, OP)?;
        let applied: bool = col(row, 3, OP)?;
        verdicts.push((check, applied));
    }
    Ok(verdicts)
}

/// An error found in the reply of a write statement that committed: the caller must not
/// read it as "nothing was applied" (the contract of every error but `OutcomeUnknown`), so a
/// reply that cannot be interpreted becomes [`lease_core::LeaseError::OutcomeUnknown`].
fn after_commit(error: lease_core::LeaseError) -> lease_core::LeaseError {
    match error {
        lease_core::LeaseError::Protocol {
            backend,
            operation,
            reason,
        } => lease_core::LeaseError::OutcomeUnknown {
            backend,
            operation,
            source: format!("the statement committed but its reply is unreadable: {reason}").into(),
        },
        other => other,
    }
}

/// SQLSTATE `invalid_sql_statement_name`: `EXECUTE` of a name the session has not prepared.
const UNDEFINED_PREPARED: &str = "26000";
/// SQLSTATE `duplicate_prepared_statement`.
const DUPLICATE_PREPARED: &str = "42P05";

/// Whether `error` is a server error with SQLSTATE `code`.
fn has_code(error: &sqlx::Error, code: &str) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some(code))
}

/// Prepares `acknowledge_and_claim`'s two statements on `conn`, each in its own message so
/// that one the session already has (`42P05`) does not stop the other.
async fn prepare_ack_then_claim(
    sql: &AckAndClaimStatements,
    conn: &mut sqlx::PgConnection,
) -> std::result::Result<(), sqlx::Error> {
    for prepare in [&sql.prepare_ack, &sql.prepare_claim] {
        match sqlx::raw_sql(AssertSqlSafe(prepare.to_string()))
            .execute(&mut *conn)
            .await
        {
            Err(e) if has_code(&e, DUPLICATE_PREPARED) => {}
            r => {
                r?;
            }
        }
    }
    Ok(())
}

/// The rows of each statement of a simple-query message, in order (one group per
/// statement that completed). Waits for the whole reply, so an error raised at commit is
/// an error here.
async fn statement_rows(
    query: sqlx::RawSql,
    conn: &mut sqlx::PgConnection,
) -> std::result::Result<Vec<Vec<PgRow>>, sqlx::Error> {
    use futures::TryStreamExt;
    let mut parts = Vec::with_capacity(2);
    let mut rows = Vec::new();
    let mut stream = query.fetch_many(conn);
    while let Some(item) = stream.try_next().await? {
        match item {
            sqlx::Either::Left(_done) => parts.push(std::mem::take(&mut rows)),
            sqlx::Either::Right(row) => rows.push(row),
        }
    }
    Ok(parts)
}

/// One claimed row: its lease and the record as the claim left it.
fn claimed_row(row: &PgRow) -> Result<Claimed> {
    const OP: &str = "claim_due";
    let id: String = col(row, 0, OP)?;
    let lease = ExecutionLease {
        execution_id: ExecutionId::new(id).map_err(|e| protocol(OP, e.to_string()))?,
        token: rows::token(col(row, 1, OP)?, OP)?,
        expires_at: Timestamp::from_millis(col(row, 2, OP)?),
    };
    // The record as the claim left it, decoded as `get` decodes rows.
    let record = rows::execution_from(row, CLAIM_RECORD, OP)?;
    Ok(Claimed { lease, record })
}

/// An outcome as the acknowledge statements take it: (new status, stored outcome, reply).
fn ack_params(outcome: &WorkflowRunOutcome) -> (&'static str, Option<&str>, Acknowledged) {
    match outcome {
        WorkflowRunOutcome::Suspended => ("suspended", None, Acknowledged::Suspended),
        WorkflowRunOutcome::Completed(v) => (
            "completed",
            Some(v.as_str()),
            Acknowledged::Terminal(ExecutionOutcome::Completed(v.clone())),
        ),
        WorkflowRunOutcome::Failed(v) => (
            "failed",
            Some(v.as_str()),
            Acknowledged::Terminal(ExecutionOutcome::Failed(v.clone())),
        ),
    }
}

#[async_trait]
impl ExecutionClient for PostgresBackend {
    /// Admits one execution, due at `admission.due_at(now)`; a created row notifies its due
    /// time in the same statement, so a waiting dispatcher learns of it at once. A
    /// scheduled instant out of range is `InvalidInput` before any statement.
    #[tracing::instrument(level = "debug", name = "admit", skip_all)]
    async fn admit(&self, admission: &Admission) -> Result<ExecutionRecord> {
        admission.validate()?;
        let sql = &self.execution_sql().admit;
        let p = admit_params(admission);
        for _ in 0..SNAPSHOT_RETRIES {
            let clock = self.clock_param();
            let row: Option<PgRow> = self
                .run_statement("admit", Effect::IdempotentWrite, sql, |q| p.bind(q, clock))
                .await?;
            if let Some(record) = admitted(row.as_ref(), "admit")? {
                return Ok(record);
            }
        }
        Err(invisible("admit"))
    }

    /// Admits the batch in one statement after `check_admit_batch` (so bad input admits
    /// nothing); items a concurrent admission made invisible to the statement's snapshot
    /// are fetched by running it again for them alone (admission is idempotent).
    #[tracing::instrument(level = "debug", name = "admit_batch", skip_all)]
    async fn admit_batch(&self, admissions: &[Admission]) -> Result<Vec<ExecutionRecord>> {
        check_admit_batch(admissions)?;
        let mut batch = AdmittedBatch::new(admissions);
        for _ in 0..SNAPSHOT_RETRIES {
            let Some(items) = batch.missing() else { break };
            let found = self.admit_batch_once(&items).await?;
            batch.found(found);
        }
        batch.records("admit_batch")
    }

    #[tracing::instrument(level = "debug", name = "get", skip_all)]
    async fn get(&self, id: &ExecutionId) -> Result<Option<ExecutionRecord>> {
        let sql = &self.execution_sql().get;
        let id = id.as_str();
        let clock = self.clock_param();
        let row: Option<PgRow> = self
            .run_statement("get", Effect::Read, sql, |q| q.bind(id).bind(clock))
            .await?;
        row.map(|row| {
            let record = rows::execution(&row, "get")?;
            let now = Timestamp::from_millis(col(&row, EXECUTION_COLUMNS, "get")?);
            Ok(record.effective(now))
        })
        .transpose()
    }

    #[tracing::instrument(level = "debug", name = "list_failing", skip_all)]
    async fn list_failing(&self, min: u32, limit: usize) -> Result<Vec<ExecutionRecord>> {
        check_limit("list limit", limit)?;
        let sql = &self.execution_sql().list_failing;
        let min = i64::from(min.max(1));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let clock = self.clock_param();
        let found: Vec<PgRow> = self
            .run_statement("list_failing", Effect::Read, sql, |q| {
                q.bind(min).bind(limit).bind(clock)
            })
            .await?;
        found
            .iter()
            .map(|row| {
                let record = rows::execution(row, "list_failing")?;
                let now = Timestamp::from_millis(col(row, EXECUTION_COLUMNS, "list_failing")?);
                Ok(record.effective(now))
            })
            .collect()
    }

    /// One statement, a walk of `executions_live` (schema v14) from the database clock
    /// (`execution/list_live_leases.sql`).
    #[tracing::instrument(level = "debug", name = "list_live_leases", skip_all)]
    async fn list_live_leases(&self, limit: usize) -> Result<Vec<ExecutionRecord>> {
        const OP: &str = "list_live_leases";
        check_limit("list limit", limit)?;
        let sql = &self.execution_sql().list_live_leases;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let clock = self.clock_param();
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| q.bind(limit).bind(clock))
            .await?;
        found
            .iter()
            .map(|row| {
                let record = rows::execution(row, OP)?;
                let now = Timestamp::from_millis(col(row, EXECUTION_COLUMNS, OP)?);
                Ok(record.effective(now))
            })
            .collect()
    }

    /// Rows no claim takes because they cannot be decoded (`record_problem`, migrations v5,
    /// v9 and v11: an id, workflow name or concurrency key no `ExecutionId`/`WorkflowName`/
    /// `ConcurrencyKey` can hold, an unknown status, a negative token, an unacknowledged
    /// count beyond `u32`, a terminal row without an outcome), by id. A full scan, for
    /// operators.
    #[tracing::instrument(level = "debug", name = "list_corrupt", skip_all)]
    async fn list_corrupt(&self, limit: usize) -> Result<Vec<CorruptRecord>> {
        const OP: &str = "list_corrupt";
        check_limit("list limit", limit)?;
        let sql = &self.execution_sql().list_corrupt;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Read, sql, |q| q.bind(limit))
            .await?;
        found
            .iter()
            .map(|row| {
                Ok(CorruptRecord {
                    id: col(row, 0, OP)?,
                    problem: col(row, 1, OP)?,
                })
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", name = "request_wake", skip_all)]
    async fn request_wake(&self, id: &ExecutionId, at: Timestamp) -> Result<()> {
        const OP: &str = "request_wake";
        let sql = &self.execution_sql().request_wake;
        let key = id.as_str();
        let delays = &self.inner.delays;
        let row: PgRow = self
            .run_statement(OP, Effect::IdempotentWrite, sql, |q| {
                q.bind(key).bind(at.as_millis()).bind(delays)
            })
            .await?;
        let known: bool = col(&row, 0, OP)?;
        if known {
            Ok(())
        } else {
            Err(lease_core::LeaseError::UnknownExecution(id.clone()))
        }
    }

    /// The claim statement (shared by every claim method): the leases and records as the
    /// claim left them, the clock it ran at, and the earliest `claimable_at` after it over
    /// the schema's non-terminal executions (an index seek), in one round trip. The claim
    /// notifies its new leases' earliest `claimable_at` (expiry + redelivery delay).
    ///
    /// A token not above an execution's stored token (the sequence was reset or restored
    /// behind the tokens issued) and a used-up sequence are
    /// [`lease_core::LeaseError::TokenCounter`], with nothing claimed.
    #[tracing::instrument(level = "debug", name = "claim_due_with_horizon", skip_all)]
    async fn claim_due_with_horizon(&self, request: ClaimRequest) -> Result<ClaimBatch> {
        let lease_ms = request.validate()?;
        self.inner.listen_state.wait().await;
        if self.claims_keyed() {
            return self.claim_keyed(&request, lease_ms).await;
        }
        let sql = &self.execution_sql().claim;
        let delays = &self.inner.delays;
        let limit = i64::try_from(request.limit).unwrap_or(i64::MAX);
        let requested = request.now.as_millis();
        // Never retried after the statement may have run: a retry could issue a second token.
        let found: Vec<PgRow> = self
            .run_statement("claim_due", Effect::Write, sql, |q| {
                q.bind(requested)
                    .bind(self.clock_param())
                    .bind(limit)
                    .bind(lease_ms)
                    .bind(delays)
            })
            .await
            .map_err(|e| crate::error::in_schema(e, self.schema()))?;
        match self.claim_batch(&found)? {
            (_, true) => self.claim_keyed(&request, lease_ms).await,
            (batch, false) => Ok(batch),
        }
    }

    /// The acknowledgement and the claim in one round trip and one commit: the
    /// `acknowledge` statement, then the claim statement, prepared once per connection and
    /// run as `EXECUTE ...; EXECUTE ...` in one simple-query message (one implicit
    /// transaction; see `ack_and_claim.rs`). The acknowledgement is fenced exactly as
    /// `acknowledge` (same statement, same row lock, held to the commit); the claim is
    /// `claim_due_with_horizon`'s statement, evaluated after it in its own snapshot (so it
    /// sees the acknowledgement), limited to 0 when the acknowledgement is refused (unknown
    /// execution, token 0, foreign token): then nothing is written and the error is
    /// returned. The claim request is validated before any statement.
    ///
    /// A token-counter failure of the claim rolls the acknowledgement back with it; the
    /// acknowledgement is then made alone, as the trait's default does, and the failed claim
    /// is logged and reported as empty. A claim the statement hands to the key gate
    /// (`claim.sql`: a picked row's key has a limit) runs as the keyed claim (`gate.rs`)
    /// after the acknowledgement committed; if that fails it is logged and reported as
    /// empty (the acknowledgement stands). Once this backend's claims run keyed, the
    /// message carries the keyed claim itself.
    #[tracing::instrument(level = "debug", name = "acknowledge_and_claim", skip_all)]
    async fn acknowledge_and_claim(
        &self,
        ack: &Acknowledgement,
        next: ClaimRequest,
    ) -> Result<AckAndClaim> {
        let lease_ms = next.validate()?;
        match self.ack_then_claim_once(ack, &next, lease_ms).await {
            Ok((acknowledged, batch, false)) => Ok(AckAndClaim {
                acknowledged,
                next: batch,
            }),
            Ok((acknowledged, _, true)) => {
                let next = self.claim_keyed(&next, lease_ms).await.unwrap_or_else(|e| {
                    tracing::error!(
                        schema = self.schema(),
                        error = %e,
                        "the keyed claim after an acknowledgement failed"
                    );
                    ClaimBatch::default()
                });
                Ok(AckAndClaim { acknowledged, next })
            }
            Err(e @ lease_core::LeaseError::TokenCounter { .. }) => {
                tracing::error!(
                    schema = self.schema(),
                    error = %e,
                    "the claim after an acknowledgement failed; acknowledging alone"
                );
                Ok(AckAndClaim {
                    acknowledged: self.acknowledge(&ack.lease, &ack.outcome).await?,
                    next: ClaimBatch::default(),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// One `GROUP BY` statement over the schema's executions (`counts/status_counts.sql`).
    #[tracing::instrument(level = "debug", name = "status_counts", skip_all)]
    async fn status_counts(&self) -> Result<lease_core::StatusCounts> {
        self.count_statuses().await
    }

    /// Retention: one statement (`execution/purge_terminal.sql`) deletes up to `limit`
    /// terminal executions acknowledged before `before`, oldest first, with their step
    /// records, store receipts and start records, skipping rows other statements hold
    /// locked; the ids come back in id order. A limit outside 1..=1000 is `InvalidInput`
    /// before any statement.
    #[tracing::instrument(level = "debug", name = "purge_terminal", skip_all)]
    async fn purge_terminal(&self, before: Timestamp, limit: usize) -> Result<Purged> {
        const OP: &str = "purge_terminal";
        check_limit("purge limit", limit)?;
        let sql = &self.execution_sql().purge_terminal;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Write, sql, |q| {
                q.bind(before.as_millis()).bind(limit)
            })
            .await?;
        // The rows are deleted: an id that cannot be reported is `OutcomeUnknown`.
        let ids = found
            .iter()
            .map(|row| {
                let id: String = col(row, 0, OP)?;
                ExecutionId::new(id).map_err(|e| after_commit(protocol(OP, e.to_string())))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Purged { ids })
    }

    /// A receiver of this handle's LISTEN/NOTIFY wake-ups (see `wakeup.rs`): `None` outside
    /// a tokio runtime (no listener can run) or after `close`.
    fn wakeups(&self) -> Option<WakeReceiver> {
        self.subscribe_wakeups()
    }

    fn capabilities(&self) -> lease_core::Capabilities {
        lease_core::Capabilities::all(crate::error::BACKEND)
    }

    fn namespace_name(&self) -> Option<String> {
        Some(self.schema().to_owned())
    }

    fn effects(&self) -> Option<&dyn lease_core::EffectClient> {
        Some(self)
    }

    #[tracing::instrument(level = "debug", name = "renew", skip_all)]
    async fn renew(
        &self,
        lease: &ExecutionLease,
        duration: Duration,
    ) -> Result<Fenced<ExecutionLease>> {
        let lease_ms = lease_millis("renewal duration", duration)?;
        let sql = &self.execution_sql().renew;
        let delays = &self.inner.delays;
        let id = lease.execution_id.as_str();
        let token = token_param(lease)?;
        let row: Option<PgRow> = self
            .run_statement("renew", Effect::Write, sql, |q| {
                q.bind(id)
                    .bind(token)
                    .bind(self.clock_param())
                    .bind(lease_ms)
                    .bind(delays)
            })
            .await?;
        let decoded = row
            .map(|row| {
                let expiry: Option<i64> = col(&row, 2, "renew")?;
                Ok::<_, lease_core::LeaseError>((FenceCheck::decode(&row, "renew")?, expiry))
            })
            .transpose()
            .map_err(after_commit)?;
        let decoded = decoded.map(|(check, expiry)| {
            let renewed = expiry.map(|ms| ExecutionLease {
                execution_id: lease.execution_id.clone(),
                token: lease.token,
                expires_at: Timestamp::from_millis(ms),
            });
            (check, renewed)
        });
        // The statement committed: a reply that cannot be read is `OutcomeUnknown`.
        self.fenced("renew", lease, decoded).map_err(after_commit)
    }

    #[tracing::instrument(level = "debug", name = "release", skip_all)]
    async fn release(&self, lease: &ExecutionLease) -> Result<Fenced<()>> {
        self.release_with(lease, &Release::Retry).await
    }

    /// One statement (`execution/release.sql`): an attempt counts, keeps its note as the
    /// last error and makes the execution dead when it used the last attempt; a lease no
    /// worker started changes neither the counter nor the delay.
    #[tracing::instrument(level = "debug", name = "release_with", skip_all)]
    async fn release_with(&self, lease: &ExecutionLease, release: &Release) -> Result<Fenced<()>> {
        let sql = &self.execution_sql().release;
        let delays = &self.inner.delays;
        let id = lease.execution_id.as_str();
        let token = token_param(lease)?;
        let note = release.note();
        let (kind, message) = (
            note.as_ref().map(ErrorNote::kind),
            note.as_ref().map(ErrorNote::message),
        );
        // The history keeps the worker's error; a retry reply is no error there, though the
        // record's last error names it.
        let history_error = matches!(release, Release::Failed(_));
        let row: Option<PgRow> = self
            .run_statement("release", Effect::Write, sql, |q| {
                q.bind(id)
                    .bind(token)
                    .bind(self.clock_param())
                    .bind(delays)
                    .bind(kind)
                    .bind(message)
                    .bind(history_error)
            })
            .await?;
        let decoded = row
            .map(|row| {
                let released: Option<bool> = col(&row, 2, "release")?;
                Ok::<_, lease_core::LeaseError>((
                    FenceCheck::decode(&row, "release")?,
                    released.filter(|r| *r).map(|_| ()),
                ))
            })
            .transpose()
            .map_err(after_commit)?;
        // The statement committed: a reply that cannot be read is `OutcomeUnknown`.
        self.fenced("release", lease, decoded).map_err(after_commit)
    }

    #[tracing::instrument(level = "debug", name = "acknowledge", skip_all)]
    async fn acknowledge(
        &self,
        lease: &ExecutionLease,
        outcome: &WorkflowRunOutcome,
    ) -> Result<Fenced<Acknowledged>> {
        let (status, value, reply) = ack_params(outcome);
        let sql = &self.execution_sql().acknowledge;
        let id = lease.execution_id.as_str();
        let token = token_param(lease)?;
        let row: Option<PgRow> = self
            .run_statement("acknowledge", Effect::Write, sql, |q| {
                q.bind(id)
                    .bind(token)
                    .bind(self.clock_param())
                    .bind(status)
                    .bind(value)
            })
            .await?;
        // The statement committed: a reply that cannot be read is `OutcomeUnknown`.
        self.ack_reply(lease, row.as_ref(), reply)
            .map_err(after_commit)
    }

    #[tracing::instrument(level = "debug", name = "acknowledge_batch", skip_all)]
    async fn acknowledge_batch(
        &self,
        acks: &[Acknowledgement],
    ) -> Result<Vec<Fenced<Acknowledged>>> {
        const OP: &str = "acknowledge_batch";
        check_ack_batch(acks)?;
        if acks.is_empty() {
            return Ok(Vec::new());
        }
        let mut ids = Vec::with_capacity(acks.len());
        let mut tokens = Vec::with_capacity(acks.len());
        let mut statuses = Vec::with_capacity(acks.len());
        let mut values = Vec::with_capacity(acks.len());
        let mut replies = Vec::with_capacity(acks.len());
        for ack in acks {
            let (status, value, reply) = ack_params(&ack.outcome);
            ids.push(ack.lease.execution_id.as_str());
            tokens.push(token_param(&ack.lease)?);
            statuses.push(status);
            values.push(value);
            replies.push(reply);
        }
        let sql = &self.execution_sql().acknowledge_batch;
        let (ids, tokens, statuses, values) = (&ids, &tokens, &statuses, &values);
        // One statement: a serialization failure or deadlock rolled all of it back and is
        // retried like the single acknowledge; a lost connection is `OutcomeUnknown`.
        let found: Vec<PgRow> = self
            .run_statement(OP, Effect::Write, sql, |q| {
                q.bind(ids)
                    .bind(tokens)
                    .bind(statuses)
                    .bind(values)
                    .bind(self.clock_param())
            })
            .await?;
        // The statement committed: from here on, a reply this code cannot interpret is
        // `OutcomeUnknown` (items may have been applied), never `Protocol`: the contract
        // says every error but `OutcomeUnknown` means nothing was applied.
        let verdicts = batch_verdicts(&found, acks.len()).map_err(after_commit)?;
        // The first item `acknowledge` would refuse with an error decides the reply; the
        // statement then wrote nothing.
        for (ack, (check, _)) in acks.iter().zip(&verdicts) {
            let refused = match check {
                None => Err(lease_core::LeaseError::UnknownExecution(
                    ack.lease.execution_id.clone(),
                )),
                Some(check) => check.refusal(&ack.lease.execution_id, ack.lease.token),
            };
            if let Err(e) = refused {
                if verdicts.iter().any(|(_, applied)| *applied) {
                    return Err(after_commit(protocol(
                        OP,
                        "items were applied although one was refused",
                    )));
                }
                return Err(e);
            }
        }
        acks.iter()
            .zip(verdicts)
            .zip(replies)
            .map(|((ack, (check, applied)), reply)| {
                let decoded = check.map(|check| (check, applied.then_some(reply)));
                self.fenced(OP, &ack.lease, decoded).map_err(after_commit)
            })
            .collect()
    }

    /// One statement (`control/cancel.sql`) locks the row, ends a live lease and stores
    /// status `cancelled` with the reason; a keyed one notifies "now".
    #[tracing::instrument(level = "debug", name = "cancel", skip_all)]
    async fn cancel(
        &self,
        id: &ExecutionId,
        reason: &lease_core::CancelReason,
    ) -> Result<lease_core::CancelOutcome> {
        self.cancel_execution(id, reason).await
    }

    /// A row of `paused_scopes`; claims skip what it covers.
    #[tracing::instrument(level = "debug", name = "pause", skip_all)]
    async fn pause(&self, scope: &lease_core::PauseScope) -> Result<bool> {
        self.pause_scope(scope).await
    }

    /// Deletes the scope's row and notifies "now" like admit.
    #[tracing::instrument(level = "debug", name = "resume", skip_all)]
    async fn resume(&self, scope: &lease_core::PauseScope) -> Result<bool> {
        self.resume_scope(scope).await
    }

    /// The namespace first, then workflows by name.
    #[tracing::instrument(level = "debug", name = "list_paused", skip_all)]
    async fn list_paused(&self) -> Result<Vec<lease_core::PauseScope>> {
        self.paused_scopes().await
    }

    /// One statement upserts or deletes the scope's row of `concurrency_limits` and
    /// notifies "now" when it changed.
    #[tracing::instrument(level = "debug", name = "set_concurrency_limit", skip_all)]
    async fn set_concurrency_limit(
        &self,
        scope: &lease_core::LimitScope,
        limit: Option<lease_core::ConcurrencyLimit>,
    ) -> Result<()> {
        self.set_limit(scope, limit).await
    }

    /// The default first, then keys by name.
    #[tracing::instrument(level = "debug", name = "concurrency_limits", skip_all)]
    async fn concurrency_limits(&self) -> Result<lease_core::ConcurrencyLimits> {
        self.limits().await
    }

    /// Attempt limits: one statement upserts or deletes the scope's row of
    /// `attempt_limits`; claims copy the limit that applies onto each row they take.
    #[tracing::instrument(level = "debug", name = "set_attempt_limit", skip_all)]
    async fn set_attempt_limit(
        &self,
        scope: &lease_core::AttemptScope,
        limit: Option<lease_core::AttemptLimit>,
    ) -> Result<()> {
        self.set_attempts(scope, limit).await
    }

    /// The default first, then workflows by name.
    #[tracing::instrument(level = "debug", name = "attempt_limits", skip_all)]
    async fn attempt_limits(&self) -> Result<lease_core::AttemptLimits> {
        self.attempts().await
    }

    /// One statement, a walk of `executions_dead` (schema v15) by id.
    #[tracing::instrument(level = "debug", name = "list_dead", skip_all)]
    async fn list_dead(
        &self,
        after: Option<&ExecutionId>,
        limit: usize,
    ) -> Result<Vec<ExecutionRecord>> {
        self.dead_page(after, limit).await
    }

    /// One statement: every id judged after its row lock, then all re-admitted or none.
    #[tracing::instrument(level = "debug", name = "retry_dead", skip_all)]
    async fn retry_dead(
        &self,
        ids: &[ExecutionId],
        input: Option<&lease_core::Json>,
    ) -> Result<Vec<ExecutionRecord>> {
        self.retry(ids, input).await
    }

    /// One statement upserts or clears the scope's rate on `key_policies` (schema v16);
    /// a change notifies "now".
    #[tracing::instrument(level = "debug", name = "set_rate_limit", skip_all)]
    async fn set_rate_limit(
        &self,
        scope: &lease_core::LimitScope,
        limit: Option<lease_core::RateLimit>,
    ) -> Result<()> {
        self.set_rate(scope, limit).await
    }

    /// The default first, then keys by name.
    #[tracing::instrument(level = "debug", name = "rate_limits", skip_all)]
    async fn rate_limits(&self) -> Result<lease_core::RateLimits> {
        self.rates().await
    }

    /// One statement marks or unmarks the scope on `key_policies`; unmarking notifies
    /// "now".
    #[tracing::instrument(level = "debug", name = "set_key_ordering", skip_all)]
    async fn set_key_ordering(&self, scope: &lease_core::LimitScope, ordered: bool) -> Result<()> {
        self.set_ordering(scope, ordered).await
    }

    /// The default, then the keys marked one by one.
    #[tracing::instrument(level = "debug", name = "key_ordering", skip_all)]
    async fn key_ordering(&self) -> Result<lease_core::KeyOrdering> {
        self.ordering().await
    }

    /// One statement upserts or deletes the workflow's row of `redelivery_policies`
    /// (schema v17); claims copy it onto the rows they take. A change notifies "now".
    #[tracing::instrument(level = "debug", name = "set_redelivery_policy", skip_all)]
    async fn set_redelivery_policy(
        &self,
        workflow: &lease_core::WorkflowName,
        policy: Option<lease_core::RedeliveryPolicy>,
    ) -> Result<()> {
        self.set_workflow_redelivery(workflow, policy).await
    }

    /// The workflows' rows, by name.
    #[tracing::instrument(level = "debug", name = "redelivery_policies", skip_all)]
    async fn redelivery_policies(&self) -> Result<lease_core::RedeliveryPolicies> {
        self.workflow_redeliveries().await
    }

    /// One read of the row's `deliveries` (schema v17), made effective at the backend's
    /// clock like `get`.
    #[tracing::instrument(level = "debug", name = "deliveries", skip_all)]
    async fn deliveries(&self, id: &ExecutionId) -> Result<lease_core::DeliveryHistory> {
        self.delivery_history(id).await
    }

    /// One backward walk of an index in admission order (schema v16).
    #[tracing::instrument(level = "debug", name = "list_executions", skip_all)]
    async fn list_executions(
        &self,
        filter: &lease_core::ExecutionFilter,
        after: Option<&lease_core::ListCursor>,
        limit: usize,
    ) -> Result<lease_core::ExecutionPage> {
        self.browse_page(filter, after, limit).await
    }

    #[tracing::instrument(level = "debug", name = "now", skip_all)]
    async fn now(&self) -> Result<Timestamp> {
        self.clock_now().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_rendered() {
        let s = statements(&Renderer::new("\"t\"", "lease_wake_t"));
        for sql in [
            &s.admit,
            &s.admit_batch,
            &s.claim,
            &s.claim_leases_only,
            &s.claim_keyed,
            &s.acknowledge_batch,
            &s.request_wake,
            &s.list_failing,
            &s.purge_terminal,
        ] {
            assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
            assert!(!sql.starts_with("--"), "{sql}");
        }
        assert!(s.claim.contains("\"t\".fencing_tokens"));
        assert!(s.claim.contains("clock_timestamp()"));
        assert!(!s.claim.contains("now()"));
    }

    #[test]
    fn ack_then_claim_prepares_both_statements_and_executes_them_in_one_message() {
        let s = statements(&Renderer::new("\"t\"", "lease_wake_t"));
        let ac = &s.ack_and_claim;
        let [ack, claim] = ac.names();
        assert!(ack.starts_with("lease_ack_") && claim.starts_with("lease_claim_after_ack_"));
        assert!(ack.len() <= 63 && claim.len() <= 63, "{ack} {claim}");
        assert!(ac.prepare_ack.starts_with(&format!(
            "PREPARE {ack}(text, bigint, bigint, text, text) AS WITH"
        )));
        assert!(
            ac.prepare_ack.ends_with(&*s.acknowledge),
            "{}",
            ac.prepare_ack
        );
        assert!(ac.prepare_claim.starts_with(&format!(
            "PREPARE {claim}(bigint, bigint, bigint, bigint, bigint[], text, bigint) AS WITH"
        )));
        for sql in [&ac.prepare_ack, &ac.prepare_claim] {
            assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
        }
        // The claim's limit is the acknowledgement-dependent one, in the LIMITs of
        // `waiting` (per level and overall), `expired`, `picked` and `dying` (so a refused
        // acknowledgement stores no death either) and in `short`.
        assert_eq!(
            ac.prepare_claim
                .matches("g.id = $6 AND g.token >= $7")
                .count(),
            6
        );
        assert!(
            !ac.prepare_claim.contains("LIMIT $3"),
            "{}",
            ac.prepare_claim
        );
        // Another statement text never gets the same name.
        let other = statements(&Renderer::new("\"u\"", "lease_wake_u"));
        assert_ne!(other.ack_and_claim.names(), ac.names());

        let sql = ac
            .execute(&AckThenClaim {
                id: "a",
                token: 3,
                clock: None,
                status: "completed",
                outcome: Some("{\"x\":\"'$1\"}"),
                requested: 10,
                limit: 1,
                lease_ms: 30_000,
                delays: &[100, 200],
            })
            .expect("sendable");
        assert_eq!(
            sql,
            format!(
                "EXECUTE {ack}((E'a'::text), (3::bigint), (NULL::bigint), (E'completed'::text), \
                 (E'{{\"x\":\"''$1\"}}'::text)); EXECUTE {claim}((10::bigint), (NULL::bigint), \
                 (1::bigint), (30000::bigint), (ARRAY[100::bigint,200::bigint]::bigint[]), \
                 (E'a'::text), (3::bigint))"
            )
        );
        let unsendable = AckThenClaim {
            id: "a",
            token: 3,
            clock: Some(5),
            status: "completed",
            outcome: Some("a\0b"),
            requested: 10,
            limit: 1,
            lease_ms: 30_000,
            delays: &[],
        };
        assert!(ac.execute(&unsendable).is_none());
    }
}
