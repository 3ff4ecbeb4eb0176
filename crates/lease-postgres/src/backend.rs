//! [`PostgresBackend`]: the pool, the rendered statements, the retry loop every operation
//! runs in, and [`PostgresBackend::run_statement`], the one way a single bound statement is
//! run.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lease_core::{LeaseError, Result, Timestamp, WakeHub, WakeReceiver};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool, Postgres};

use crate::config::{PostgresConfig, quoted};
use crate::error::{self, Attempt, Effect, Verdict, settle};
use crate::hosts::{self, Hosts};
use crate::migrate;
use crate::statements::{BackendSql, Renderer, Statements};
use crate::wakeup::{self, ListenerTask};

/// The PostgreSQL lease backend: a `Clone` handle (one shared pool) implementing every
/// lease-core client trait, so it is a [`lease_core::LeaseBackend`].
///
/// Every operation is one atomic step: one statement (claim, fenced writes, admit, start,
/// ...) or, for store updates, one short transaction. Fenced writes lock the execution row
/// in a mode that conflicts with the claim's `FOR UPDATE SKIP LOCKED` and compare the token
/// of the row version current after the lock, so no claim can commit between the check and
/// the write.
#[derive(Clone)]
pub struct PostgresBackend {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) pool: PgPool,
    pub(crate) config: PostgresConfig,
    pub(crate) sql: Statements,
    /// `RedeliveryPolicy::table_ms()` as bigint parameters (clamped far beyond any real
    /// delay so that `ended + delay` cannot overflow a bigint).
    pub(crate) delays: Vec<i64>,
    /// Fans this handle's wake-up notifications out to its receivers.
    pub(crate) hub: WakeHub,
    /// The listener task feeding `hub`, started by the first `wakeups()` call.
    listener: Mutex<Option<ListenerTask>>,
    /// Whether the listener ever listened (claims wait for its first LISTEN).
    pub(crate) listen_state: Arc<lease_core::FirstListen>,
    /// The URL's hosts (one, or several with failover between them) and which is current;
    /// also the listener connection's options (its own `application_name`).
    hosts: Arc<Hosts>,
    /// The schema's NOTIFY channel.
    channel: String,
    /// Set by `close()`: no listener is started afterwards.
    closed: std::sync::atomic::AtomicBool,
    /// Set once a claim met a limited key: later claims start with the keyed statement
    /// (`gate.rs`).
    pub(crate) keyed_claims: std::sync::atomic::AtomicBool,
}

/// The session settings of every library connection (startup options `-c name=value`):
///
/// - `plan_cache_mode = force_generic_plan`: the claim statements are written for their
///   generic plans (every range is an index walk that stops where the claim does, whatever
///   the parameters); left to choose, the plan cache planned the claim afresh on every
///   call, because its generic plan's estimate (a LIMIT parameter is planned as 10% of the
///   rows) exceeded a custom plan's: 1.2-1.4 ms of planning per claim, more than the claim
///   itself (0.4-0.6 ms for a claim of one at 200,000 due);
/// - `jit = off`: that same estimate passes `jit_above_cost`, and JIT-compiling the claim
///   took 200-280 ms per call at 10^6 stored executions (the claim itself: 0.5 ms). Short
///   statements never gain from JIT;
/// - `enable_bitmapscan = off`: over statistics taken while the table was (almost) empty
///   (a new or emptied queue before autovacuum's next ANALYZE, every benchmark store), the
///   claim's level walk was estimated at ~1 row and planned as a bitmap scan plus a sort of
///   every due row (6.9 ms for a claim of 32 over 10,000 due, against 1.9 ms for the ordered
///   walk). Checked on the claims and on the bench's single-operation, drain, controls and
///   console rows; the console's namespace page took 100 ms at 10^5 with it (target 200);
/// - `enable_seqscan = off`: a generic plan is made once per connection, with the table's
///   size then, and kept; made while the table was empty (a new queue, every benchmark
///   store), `acknowledge_batch`'s `id = ANY($1) FOR NO KEY UPDATE` was a sequential scan,
///   kept as the table grew (3.4 ms over 20,000 rows for two ids; the bench's e2e rows ran
///   at 0.35-0.6x of `9ef24dc`'s in about half their runs, bimodal by when a connection
///   first ran it). Every library statement that touches rows by key has an index; the few
///   that read a whole table (counts, corrupt lists, purges) then walk an index instead.
///
/// Fenced application transactions set `plan_cache_mode` back to `auto` and bitmap and
/// sequential scans back on for the application's statements (`fenced/begin.sql`); JIT
/// stays off there.
pub(crate) const SESSION_SETTINGS: [(&str, &str); 4] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("jit", "off"),
    ("enable_bitmapscan", "off"),
    ("enable_seqscan", "off"),
];

/// A pooled connection idle at least this long is pinged before use.
const IDLE_PING_AFTER: Duration = Duration::from_secs(1);

/// Longest redelivery delay the SQL sees: about 31,700 years.
const MAX_DELAY_MS: i64 = 1_000_000_000_000_000;

/// `()` -> the database clock.
const NOW: &str = include_str!("backend/now.sql");
/// The library's objects, then the schema, each `RESTRICT` (`drop_schema`).
const DROP_SCHEMA: &str = include_str!("backend/drop_schema.sql");
/// `DROP SCHEMA ... CASCADE` (`drop_schema_forced`).
const DROP_SCHEMA_FORCED: &str = include_str!("backend/drop_schema_forced.sql");

/// This module's statements, rendered for one schema.
pub(crate) fn statements(r: &Renderer) -> BackendSql {
    BackendSql {
        now: r.render(NOW),
        drop_schema: r.render(DROP_SCHEMA),
        drop_schema_forced: r.render(DROP_SCHEMA_FORCED),
    }
}

/// A statement with its parameters bound.
pub(crate) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// How a statement's reply is fetched: every row (`Vec<PgRow>`), at most one
/// (`Option<PgRow>`) or exactly one (`PgRow`; none is `RowNotFound`).
pub(crate) trait Fetch: Sized + Send {
    /// Runs `query` on `conn` and fetches its reply.
    fn fetch<'c>(
        query: PgQuery<'c>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = std::result::Result<Self, sqlx::Error>> + Send + 'c;
}

impl Fetch for Vec<PgRow> {
    fn fetch<'c>(
        query: PgQuery<'c>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = std::result::Result<Self, sqlx::Error>> + Send + 'c {
        query.fetch_all(conn)
    }
}

impl Fetch for Option<PgRow> {
    fn fetch<'c>(
        query: PgQuery<'c>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = std::result::Result<Self, sqlx::Error>> + Send + 'c {
        query.fetch_optional(conn)
    }
}

impl Fetch for PgRow {
    fn fetch<'c>(
        query: PgQuery<'c>,
        conn: &'c mut PgConnection,
    ) -> impl Future<Output = std::result::Result<Self, sqlx::Error>> + Send + 'c {
        query.fetch_one(conn)
    }
}

/// The rendered statement `sql`, ready for its parameters.
pub(crate) fn query<'q>(sql: &Arc<str>) -> PgQuery<'q> {
    sqlx::query(AssertSqlSafe(sql.clone()))
}

impl PostgresBackend {
    /// Connects to the database, creates or upgrades the schema (embedded migrations under
    /// an advisory lock; with [`PostgresConfig::migrate`] `false`, only verifies its version)
    /// and returns the backend.
    ///
    /// Errors: [`LeaseError::InvalidInput`](lease_core::LeaseError::InvalidInput) for a bad URL or schema name,
    /// [`LeaseError::Unavailable`](lease_core::LeaseError::Unavailable) when the server cannot be reached,
    /// [`LeaseError::Schema`](lease_core::LeaseError::Schema) when the schema is newer than this library or not ours.
    pub async fn connect(config: PostgresConfig) -> Result<Self> {
        config.validate()?;
        let split = hosts::split(&config.url)?;
        let statement_timeout = config.statement_timeout;
        let hosts = Arc::new(Hosts::new(
            &split,
            &wakeup::application_name(&config.schema),
            |options: PgConnectOptions| {
                let options = options
                    .application_name("lease-postgres")
                    .options(SESSION_SETTINGS);
                match statement_timeout {
                    Some(t) => {
                        options.options([("statement_timeout", format!("{}ms", t.as_millis()))])
                    }
                    None => options,
                }
            },
        )?);
        let attrs = hosts.attrs();
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .min_connections(0)
            .acquire_timeout(config.acquire_timeout)
            // sqlx pings every connection when it returns to the pool; pinging again on
            // acquire would add a round trip to every operation. Only a connection that sat
            // idle (where the server may have dropped it meanwhile) is pinged, so a dead idle
            // connection is replaced instead of turning a write into an unknown outcome.
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= IDLE_PING_AFTER {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            // `target_session_attrs`: a connection to a server that does not qualify (a
            // standby) is refused; the pool's connect loop tries again, on the host a probe
            // found meanwhile (`acquire`).
            .after_connect(move |conn, _meta| Box::pin(async move { attrs.check(conn).await }))
            .connect_lazy_with(hosts.current());
        let schema = quoted(&config.schema);
        let delays = config
            .policy
            .table_ms()
            .into_iter()
            .map(|d| i64::try_from(d).unwrap_or(MAX_DELAY_MS).min(MAX_DELAY_MS))
            .collect();
        let channel = wakeup::channel_name(&config.schema);
        let backend = PostgresBackend {
            inner: Arc::new(Inner {
                pool,
                sql: Statements::new(&schema, &channel),
                config,
                delays,
                hub: WakeHub::new(),
                listener: Mutex::new(None),
                listen_state: Arc::new(lease_core::FirstListen::new()),
                hosts,
                channel,
                closed: std::sync::atomic::AtomicBool::new(false),
                keyed_claims: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        let mut conn = backend.acquire("connect").await?;
        let config = &backend.inner.config;
        match config.migrate {
            true => migrate::migrate(conn, &config.schema, config.lock_timeout).await?,
            false => migrate::verify(&mut conn, &config.schema).await?,
        }
        Ok(backend)
    }

    /// A new backend on a NEW pool to the same schema, as a second runtime process would
    /// open (the createPeer model). It shares the configuration, clock and policy.
    pub async fn peer(&self) -> Result<Self> {
        Self::connect(self.inner.config.clone()).await
    }

    /// Drops the schema with every table, the token sequence and all data (tests and tenant
    /// removal), but only what the library created, so it never destroys the application's
    /// own data: an object in the schema the migrations did not create (an application
    /// table such as `charges`), an object elsewhere that depends on a lease object (a
    /// view, a foreign key), or the schema `public` make it fail with
    /// [`LeaseError::Schema`] naming them, and nothing is dropped. Other handles on the
    /// schema fail afterwards with `LeaseError::Schema`.
    pub async fn drop_schema(&self) -> Result<()> {
        let sql = self.backend_sql().drop_schema.clone();
        self.drop_with("drop_schema", sql).await
    }

    /// Drops the schema with `CASCADE`: everything in it and every object elsewhere that
    /// depends on it, for callers that own all of it (tests keeping their own tables in the
    /// lease schema). `public` is still refused.
    pub async fn drop_schema_forced(&self) -> Result<()> {
        let sql = self.backend_sql().drop_schema_forced.clone();
        self.drop_with("drop_schema_forced", sql).await
    }

    async fn drop_with(&self, operation: &'static str, sql: Arc<str>) -> Result<()> {
        let schema = self.inner.config.schema.clone();
        refuse_public(&schema)?;
        self.run(operation, Effect::IdempotentWrite, |mut conn| {
            let sql = sql.clone();
            let schema = schema.clone();
            async move {
                let r = sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *conn).await;
                match r {
                    Err(e) => match blocked(&schema, &e) {
                        Some(refusal) => Ok(Err(refusal)),
                        None => settle::<(), _>(Err(e), &mut conn).map(|_| Ok(())),
                    },
                    Ok(_) => Ok(Ok(())),
                }
            }
        })
        .await?
    }
    /// Closes the pool: waits for checked-out connections to return, then closes them all.
    /// Later operations on any clone fail with [`LeaseError::Unavailable`](lease_core::LeaseError::Unavailable).
    pub async fn close(&self) {
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(listener) = self.listener_slot().take() {
            listener.abort();
        }
        self.inner.pool.close().await;
    }

    /// The `application_name` of this schema's wake-up listener connections
    /// (`lease-listen:<schema>`, cut to 63 bytes by the server), so operators and tests can
    /// find them in `pg_stat_activity`.
    pub fn listener_application_name(&self) -> String {
        wakeup::application_name(&self.inner.config.schema)
    }

    /// The schema's NOTIFY channel (see `wakeup::channel_name`).
    pub fn wakeup_channel(&self) -> &str {
        &self.inner.channel
    }

    /// A new receiver of this handle's wake-ups, starting the listener task if none runs
    /// (first call, or its runtime is gone). `None` outside a tokio runtime when no listener
    /// runs, and after [`PostgresBackend::close`]: the caller then polls.
    pub(crate) fn subscribe_wakeups(&self) -> Option<WakeReceiver> {
        if self.inner.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let mut slot = self.listener_slot();
        if slot.as_ref().is_none_or(ListenerTask::is_finished) {
            *slot = Some(ListenerTask::spawn(
                self.inner.hosts.clone(),
                self.inner.channel.clone(),
                self.inner.hub.clone(),
                self.inner.listen_state.clone(),
            )?);
        }
        Some(self.inner.hub.subscribe())
    }

    fn listener_slot(&self) -> std::sync::MutexGuard<'_, Option<ListenerTask>> {
        // The slot holds no invariant a panic could break.
        self.inner
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The schema this backend's tables live in.
    pub fn schema(&self) -> &str {
        &self.inner.config.schema
    }

    /// The underlying connection pool (for diagnostics; the tables are private to this
    /// crate).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The injected clock's now, or `None` when the database clock is used. Passed as the
    /// `$clock` parameter of every statement that reads time.
    pub(crate) fn clock_param(&self) -> Option<i64> {
        self.inner
            .config
            .clock
            .as_ref()
            .map(|c| c.now().as_millis())
    }

    /// The current time of the backend's one clock.
    pub(crate) async fn clock_now(&self) -> Result<Timestamp> {
        if let Some(clock) = &self.inner.config.clock {
            return Ok(clock.now());
        }
        let row: PgRow = self
            .run_statement("now", Effect::Read, &self.backend_sql().now, |q| q)
            .await?;
        Ok(Timestamp::from_millis(crate::rows::col(&row, 0, "now")?))
    }

    /// A pooled connection; failing to get one is always [`LeaseError::Unavailable`](lease_core::LeaseError::Unavailable).
    pub(crate) async fn acquire(
        &self,
        operation: &'static str,
    ) -> Result<PoolConnection<Postgres>> {
        let acquire = self.inner.pool.acquire();
        if !self.inner.hosts.is_multi() {
            return acquire
                .await
                .map_err(|e| error::acquire_failed(operation, e));
        }
        // Several hosts: a connection that is slow to come (the current host is down, or
        // a standby now) starts a probe for the host to use; the pending acquire then
        // connects there.
        tokio::pin!(acquire);
        tokio::select! {
            r = &mut acquire => return r.map_err(|e| error::acquire_failed(operation, e)),
            () = tokio::time::sleep(hosts::PROBE_AFTER) => {}
        }
        let probe = self.inner.hosts.probe(&self.inner.pool);
        tokio::pin!(probe);
        tokio::select! {
            r = &mut acquire => r.map_err(|e| error::acquire_failed(operation, e)),
            _ = &mut probe => acquire.await.map_err(|e| error::acquire_failed(operation, e)),
        }
    }

    /// Runs the single statement `sql` as `operation`: each attempt binds its parameters
    /// with `bind`, fetches its reply as `T` and settles the attempt; retries as
    /// [`PostgresBackend::run`] decides.
    pub(crate) async fn run_statement<'q, T: Fetch>(
        &self,
        operation: &'static str,
        effect: Effect,
        sql: &Arc<str>,
        bind: impl Fn(PgQuery<'q>) -> PgQuery<'q> + Send + Sync,
    ) -> Result<T> {
        let bind = &bind;
        self.run(operation, effect, |mut conn| async move {
            let r = T::fetch(bind(query(sql)), &mut conn).await;
            settle(r, &mut conn)
        })
        .await
    }

    /// This module's statements.
    fn backend_sql(&self) -> &BackendSql {
        let sql = &self.inner.sql;
        sql.backend.get(&sql.renderer, statements)
    }

    /// Runs one attempt of an operation per call of `attempt` on a fresh pooled
    /// connection, retrying what [`error::classify`] calls retryable (at most
    /// [`error::MAX_ATTEMPTS`] attempts) and reporting everything else as a typed error.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        operation: &'static str,
        effect: Effect,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut(PoolConnection<Postgres>) -> Fut,
        Fut: Future<Output = std::result::Result<T, Attempt>>,
    {
        let mut tries = 0;
        loop {
            tries += 1;
            let conn = self.acquire(operation).await?;
            let failure = match attempt(conn).await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            match error::classify(operation, effect, failure) {
                Verdict::Retry(e) if tries >= error::MAX_ATTEMPTS => return Err(e),
                Verdict::Retry(e) => {
                    tracing::debug!(operation, error = %e, tries, "retrying");
                    tokio::time::sleep(error::backoff(tries)).await;
                }
                Verdict::Fail(e) => return Err(e),
            }
        }
    }
}

impl fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("schema", &self.inner.config.schema)
            .field("clock", &self.inner.config.clock)
            .finish_non_exhaustive()
    }
}

/// `public` holds other software's objects in nearly every database: never dropped.
fn refuse_public(schema: &str) -> Result<()> {
    if schema == "public" {
        return Err(LeaseError::Schema {
            location: schema.to_owned(),
            reason: "the schema public is never dropped by the library".to_owned(),
        });
    }
    Ok(())
}

/// A drop refused by PostgreSQL's dependency check (2BP01; 42725 when an application
/// overloads a library function's name): the schema error naming what is in the way.
fn blocked(schema: &str, e: &sqlx::Error) -> Option<LeaseError> {
    let db = e.as_database_error()?;
    if !matches!(db.code().as_deref(), Some("2BP01" | "42725")) {
        return None;
    }
    let detail = db
        .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        .and_then(|pg| pg.detail())
        .map(|d| format!(": {}", d.replace('\n', "; ")))
        .unwrap_or_default();
    Some(LeaseError::Schema {
        location: schema.to_owned(),
        reason: format!(
            "not dropped, it holds or feeds objects the library did not create ({}{detail}); \
             drop them first, or use drop_schema_forced",
            db.message()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Refused before any SQL runs (connecting with schema `public` would migrate into it).
    #[test]
    fn public_is_never_dropped() {
        let err = refuse_public("public").expect_err("public accepted");
        assert!(matches!(err, LeaseError::Schema { .. }), "{err:?}");
        assert!(refuse_public("lease").is_ok());
    }
}
