//! The application's own writes, fenced: [`SqliteBackend::fenced`] and
//! [`SqliteBackend::step_in_tx`].

use std::fmt;
use std::panic::resume_unwind;

use lease_core::{
    BoxError, ExecutionLease, Fenced, HeapRecord, Json, LeaseError, StepKey, StepWrite,
};
use lease_runtime::MAX_STEP_ATTEMPTS;
use lease_runtime::{Delivery, DeliveryError, StepSlot};
use rusqlite::Transaction;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use crate::authorizer;
use crate::backend::SqliteBackend;
use crate::conn::Weight;
use crate::error::OpError;
use crate::fenced::{Answer, Body, BodyError, BodyFn, FencedOp};
use crate::heap::{self, Recorded};
use crate::scope::Scope;

/// Why a fenced application transaction ([`SqliteBackend::fenced`]) did not commit.
/// Either way nothing of it was applied, except for [`LeaseError::OutcomeUnknown`] (the
/// COMMIT itself failed).
#[derive(Debug)]
#[non_exhaustive]
pub enum FencedError<E> {
    /// The backend refused the input (unknown execution, token 0, a token never issued to
    /// the execution: the closure did not run) or failed (`Unavailable`, ...).
    Lease(LeaseError),
    /// The application's closure returned this error; its transaction was rolled back.
    App(E),
}

impl<E> FencedError<E> {
    /// The closure's error, if that is what this is.
    pub fn into_app(self) -> Option<E> {
        match self {
            FencedError::App(e) => Some(e),
            FencedError::Lease(_) => None,
        }
    }
}

impl<E> From<LeaseError> for FencedError<E> {
    fn from(e: LeaseError) -> Self {
        FencedError::Lease(e)
    }
}

impl<E: fmt::Display> fmt::Display for FencedError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FencedError::Lease(e) => write!(f, "{e}"),
            FencedError::App(e) => {
                write!(f, "the fenced transaction failed and was rolled back: {e}")
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FencedError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FencedError::Lease(e) => Some(e),
            FencedError::App(e) => Some(e),
        }
    }
}

/// A plain fenced transaction's answer as the caller sees it (a panic resumes here).
fn into_fenced<T, E>(answer: Answer<T, E>) -> Result<Fenced<T>, FencedError<E>> {
    match answer {
        Answer::Accepted(value) => Ok(Fenced::Accepted(value)),
        Answer::Lost => Ok(Fenced::Lost),
        Answer::App(e) => Err(FencedError::App(e)),
        Answer::Lease(e) => Err(FencedError::Lease(e)),
        Answer::Panicked(payload) => resume_unwind(payload),
    }
}

/// The body of a plain fenced transaction: the closure, guarded, committed as it is.
fn app_body<T, E, F>(f: F) -> BodyFn<T, E>
where
    F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
{
    Box::new(move |tx, _| {
        authorizer::app_sql(|| f(tx))
            .map(Body::Apply)
            .map_err(BodyError::App)
    })
}

/// The body of `step_in_tx`: the closure, then its value recorded as the step's done record
/// with write_step's own code at the first attempt from `attempt` with no record. A done
/// record found there (written meanwhile) discards the closure's writes and is the answer.
fn step_body<T, E, F>(
    lease: ExecutionLease,
    step_key: StepKey,
    attempt: u32,
    f: F,
) -> BodyFn<HeapRecord, E>
where
    T: Serialize,
    F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
{
    Box::new(move |tx, scope| {
        let value = authorizer::app_sql(|| f(tx)).map_err(BodyError::App)?;
        let response =
            Json::to_json("step response", &value).map_err(|e| BodyError::Op(OpError::Lease(e)))?;
        record_done(tx, scope, &lease, step_key, attempt, response).map_err(BodyError::Op)
    })
}

/// Records a done step at the first attempt from `attempt` without a record.
fn record_done(
    tx: &Transaction<'_>,
    scope: &Scope,
    lease: &ExecutionLease,
    step_key: StepKey,
    mut attempt: u32,
    response: Json,
) -> Result<Body<HeapRecord>, OpError> {
    let mut write = StepWrite {
        step_key,
        step_attempt: attempt,
        done: true,
        response,
    };
    loop {
        match heap::record_step(tx, scope, lease, &write)? {
            Recorded::Inserted(record) => return Ok(Body::Apply(record)),
            Recorded::Existing(record) if record.done => return Ok(Body::Discard(record)),
            Recorded::Existing(_) if attempt >= MAX_STEP_ATTEMPTS => {
                return Err(OpError::Lease(LeaseError::invalid(
                    "step attempt",
                    format!(
                        "step {} has {MAX_STEP_ATTEMPTS} attempts recorded as not done",
                        write.step_key
                    ),
                )));
            }
            Recorded::Existing(_) => {
                attempt += 1;
                write.step_attempt = attempt;
            }
        }
    }
}

impl SqliteBackend {
    /// Runs the application's own SQL as a **fenced transaction** (RFC 002 fencing: "the
    /// check and the write will be atomic"): one `BEGIN IMMEDIATE` transaction on this
    /// handle's connection (or a savepoint of a group commit) that first checks `lease`
    /// exactly as `write_step` does (its token is the execution's current one and its
    /// delivery has not ended), then runs `f`, then commits.
    ///
    /// - The lease holds: `f`'s statements commit, `Ok(Fenced::Accepted(value))`.
    /// - The lease is lost (a newer claim, or the delivery ended): `f` does not run, nothing
    ///   is written, `Ok(Fenced::Lost)`. Stop and make no further writes.
    /// - `f` returns `Err(e)`: everything it did is rolled back, `Err(FencedError::App(e))`.
    ///   `f` panics: rolled back, and the panic resumes in the caller.
    /// - Unknown execution, token 0, a token never issued to the execution: the typed
    ///   [`LeaseError`] in [`FencedError::Lease`], and `f` does not run.
    ///
    /// Why this is atomic: SQLite has a single write lock, which `BEGIN IMMEDIATE` takes
    /// before the check; no claim, in this process or any other sharing the file, can
    /// commit between the check and this transaction's COMMIT, so a commit happens only
    /// while the lease is current. A stale holder's transaction is never half-applied.
    ///
    /// Constraints on `f`:
    /// - It is synchronous and runs on the connection's thread (or inline on the caller's,
    ///   inside `block_in_place`); there is no `.await` inside. Keep it short: it holds the
    ///   database's write lock, and every other writer waits, other processes included.
    /// - It must not end the transaction or touch the library's records: while it runs, an
    ///   authorizer refuses `BEGIN`/`COMMIT`/`ROLLBACK`, savepoints named `lease_*`, and
    ///   writes and schema changes on `lease_` tables (the statement fails with an
    ///   authorization error, which `f` returns like any other). Reading them is allowed.
    ///   Use `SAVEPOINT` statements of its own for partial rollbacks.
    /// - It runs at most once. Under a group commit it is a savepoint: its failure rolls
    ///   back only its own writes, and it sees earlier members' uncommitted writes (the
    ///   library's own rows). Should the group be rolled back by lock contention after `f`
    ///   ran, the answer is `Unavailable` with nothing applied rather than a second run.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use lease_core::{
    ///     Admission, ClaimRequest, ExecutionClient, ExecutionClientExt, ExecutionId, Fenced,
    /// };
    /// use lease_runtime::Delivery;
    /// use lease_sqlite::{SqliteBackend, SqliteConfig};
    /// use tokio_util::sync::CancellationToken;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    /// # rt.block_on(async {
    /// # let dir = tempfile::tempdir()?;
    /// let backend = SqliteBackend::open(SqliteConfig::file(dir.path().join("shop.db"))).await?;
    /// // The application's own table, in the same file.
    /// let charges = "CREATE TABLE IF NOT EXISTS charges (order_id TEXT PRIMARY KEY, cents INTEGER)";
    /// rusqlite::Connection::open(dir.path().join("shop.db"))?.execute_batch(charges)?;
    ///
    /// backend.admit(&Admission::new(ExecutionId::new("order-42")?)).await?;
    /// let now = backend.now().await?;
    /// let request = ClaimRequest { now, limit: 1, duration: Duration::from_secs(30) };
    /// let claimed = backend.claim_due_with_records(request).await?.remove(0);
    ///
    /// // The charge commits only while this lease is current.
    /// let charged = backend
    ///     .fenced(&claimed.lease, |tx| {
    ///         tx.execute("INSERT INTO charges VALUES ('order-42', 1999)", [])
    ///     })
    ///     .await?;
    /// assert!(matches!(charged, Fenced::Accepted(1)));
    ///
    /// // Inside a worker: the charge and the step's record in one transaction; a
    /// // redelivery returns the recorded receipt and does not charge again.
    /// let delivery = Delivery::new(
    ///     Arc::new(backend.clone()),
    ///     claimed.lease,
    ///     claimed.record,
    ///     CancellationToken::new(),
    /// );
    /// let receipt: String = backend
    ///     .step_in_tx(&delivery, "refund", |tx| {
    ///         tx.execute("UPDATE charges SET cents = 0 WHERE order_id = 'order-42'", [])?;
    ///         Ok::<_, rusqlite::Error>("refund-1".to_owned())
    ///     })
    ///     .await?;
    /// assert_eq!(receipt, "refund-1");
    /// # Ok::<_, Box<dyn std::error::Error>>(())
    /// # })
    /// # }
    /// ```
    pub async fn fenced<T, E, F>(
        &self,
        lease: &ExecutionLease,
        f: F,
    ) -> Result<Fenced<T>, FencedError<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    {
        let answer = self
            .run_fenced("fenced", Some(lease.clone()), app_body(f))
            .await?;
        into_fenced(answer)
    }

    /// Runs one workflow step whose effect is the application's own SQL, with the effect
    /// and the step's record in **one fenced transaction** (RFC 002 fencing: "the check and
    /// the write will be atomic"): they exist together or not at all.
    ///
    /// The replay rule first, exactly as [`Delivery::step`] ([`Delivery::step_slot`]): a
    /// done record of `step_key` exists -> its value is decoded and returned, `f` does not
    /// run. Otherwise one transaction as [`SqliteBackend::fenced`]: the lease check, `f`
    /// (the application's rows, and the step's value), then the done record at the slot's
    /// attempt, inserted by the same code as `write_step`; commit; the record is noted on
    /// the delivery ([`Delivery::note_step_written`]). Should a done record have appeared
    /// at that attempt meanwhile, `f`'s writes are rolled back and the recorded value is
    /// returned. The value returned is always the recorded one, decoded (as `step`).
    ///
    /// - A stale holder: nothing applied, the delivery is marked lost
    ///   ([`Delivery::mark_lost`]: cancelled, no further fenced write) and
    ///   `Err(DeliveryError::Lost)`.
    /// - `f` fails: nothing applied, nothing recorded, `Err(DeliveryError::Step)`.
    /// - A lost or cancelled delivery: refused before anything runs.
    ///
    /// `delivery` must have been claimed from this handle's database and namespace. The
    /// constraints on `f` are those of [`SqliteBackend::fenced`].
    pub async fn step_in_tx<T, E, F>(
        &self,
        delivery: &Delivery,
        step_key: &str,
        f: F,
    ) -> Result<T, DeliveryError>
    where
        T: Serialize + DeserializeOwned,
        E: Into<BoxError> + Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    {
        let key = StepKey::new(step_key)?;
        let attempt = match delivery.step_slot(&key).await? {
            StepSlot::Recorded(record) => return Ok(record.response.decode()?),
            StepSlot::Free { attempt } => attempt,
        };
        let lease = delivery.claimed_lease().clone();
        let body = step_body(lease.clone(), key.clone(), attempt, f);
        match self.run_fenced("step_in_tx", Some(lease), body).await? {
            Answer::Accepted(record) => {
                delivery.note_step_written(&record);
                Ok(record.response.decode()?)
            }
            Answer::Lost => {
                tracing::warn!(step = %key, "lost: fenced step transaction refused");
                delivery.mark_lost();
                Err(DeliveryError::Lost)
            }
            Answer::App(e) => Err(DeliveryError::Step {
                step: key,
                source: e.into(),
            }),
            Answer::Lease(e) => Err(e.into()),
            Answer::Panicked(payload) => resume_unwind(payload),
        }
    }

    /// Test support, not a stable API, and **not fenced atomically**: checks `lease` in
    /// one transaction, then runs `f` in another with no check, so a claim can commit in
    /// between and a stale holder's writes land after it. It exists so the race test can
    /// show that its check catches exactly this mistake.
    #[doc(hidden)]
    pub async fn fenced_non_atomic_for_tests<T, E, F>(
        &self,
        lease: &ExecutionLease,
        f: F,
    ) -> Result<Fenced<T>, FencedError<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    {
        let checked = lease.clone();
        let holds = self
            .write("fenced_check", Weight::Light, move |tx, s| {
                heap::lease_holds(tx, s, &checked)
            })
            .await?;
        if !holds {
            return Ok(Fenced::Lost);
        }
        into_fenced(self.run_fenced("unfenced", None, app_body(f)).await?)
    }

    /// Test and benchmark support, not a stable API, and **not fenced**: runs `f` exactly as
    /// [`SqliteBackend::fenced`] does (same connection path, group commit, guard) but with
    /// no lease check, so `examples/fenced_cost` can price the check alone.
    #[doc(hidden)]
    pub async fn unfenced_for_tests<T, E, F>(&self, f: F) -> Result<Fenced<T>, FencedError<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, E> + Send + 'static,
    {
        into_fenced(self.run_fenced("unfenced", None, app_body(f)).await?)
    }

    /// Submits a fenced transaction (no check when `lease` is `None`) and awaits its answer.
    async fn run_fenced<R, E>(
        &self,
        operation: &'static str,
        lease: Option<ExecutionLease>,
        body: BodyFn<R, E>,
    ) -> Result<Answer<R, E>, LeaseError>
    where
        R: Send + 'static,
        E: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let hubs = (self.scope().clone(), self.wakes().clone());
        let member = FencedOp::new(operation, hubs, lease, body, reply);
        self.connection()
            .write_member(operation, Box::new(member), answer)
            .await
    }
}
