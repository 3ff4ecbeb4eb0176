//! Applying the migrations: all at once into a new schema, or part by part into an existing
//! one (see `parts.rs`), each part's progress recorded so a retry resumes after it.

use std::time::{Duration, Instant};

use lease_core::LeaseError;
use sqlx::{AssertSqlSafe, Connection, PgConnection};

use super::parts::{Concurrent, Part, parts};
use crate::statements::{fragment, render};

const LOCK: &str = include_str!("apply/lock.sql");
const SET_STEP: &str = include_str!("apply/set_step.sql");
const INDEX_STATE: &str = include_str!("apply/index_state.sql");
const DROP_INDEX: &str = include_str!("apply/drop_index.sql");

/// How a migration step failed: refused by the library, or a driver error the caller
/// classifies (and may retry).
pub(super) enum Failure {
    Lease(LeaseError),
    Driver(sqlx::Error),
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Driver(e)
    }
}

/// How long between two tries of the advisory lock.
const LOCK_POLL: Duration = Duration::from_millis(25);

/// Takes the session advisory lock `name`, trying until `timeout` has passed; then
/// `Unavailable` (another process is migrating the schema).
pub(super) async fn lock(
    conn: &mut PgConnection,
    name: &str,
    timeout: Duration,
) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout;
    loop {
        let taken: bool = sqlx::query_scalar(fragment(LOCK))
            .bind(name)
            .fetch_one(&mut *conn)
            .await?;
        if taken {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::Lease(LeaseError::Unavailable {
                backend: crate::error::BACKEND,
                operation: "migrate",
                source: format!(
                    "another process held the migration lock ({name}) longer than \
                     lock_timeout ({timeout:?})"
                )
                .into(),
            }));
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

/// Every migration (`migrations`, in order) into a schema created in the open transaction `tx`, indexes built plainly:
/// no one else sees its tables before the commit, so no build waits or blocks.
pub(super) async fn all_in(
    tx: &mut PgConnection,
    migrations: &[&str],
    schema: &str,
    quoted: &str,
) -> Result<(), Failure> {
    for migration in migrations {
        for part in parts(migration) {
            let sql = match part {
                Part::Transaction(sql) => sql,
                Part::Concurrent(statement) => statement.plain(),
            };
            sqlx::raw_sql(AssertSqlSafe(render(&sql, quoted)))
                .execute(&mut *tx)
                .await?;
        }
    }
    record(tx, quoted, migrations.len(), 0).await?;
    tracing::info!(
        schema,
        version = migrations.len(),
        "created lease-postgres schema"
    );
    Ok(())
}

/// The migrations after `version`, the first from its part `step`: each run of statements
/// in a transaction of its own that also records the progress, each concurrent statement
/// alone and then recorded.
pub(super) async fn upgrade(
    conn: &mut PgConnection,
    migrations: &[&str],
    schema: &str,
    quoted: &str,
    version: usize,
    mut step: usize,
) -> Result<(), Failure> {
    for (index, migration) in migrations.iter().enumerate().skip(version) {
        let parts = parts(migration);
        if parts.is_empty() {
            // Nothing to apply (comments only): the version is reached all the same.
            record(conn, quoted, index + 1, 0).await?;
        }
        let last = parts.len().saturating_sub(1);
        for (j, part) in parts.iter().enumerate().skip(step) {
            // After the last part the migration is applied; else the next part is due.
            let (reached, next) = if j == last {
                (index + 1, 0)
            } else {
                (index, j + 1)
            };
            match part {
                Part::Transaction(sql) => {
                    let mut tx = conn.begin().await?;
                    sqlx::raw_sql(AssertSqlSafe(render(sql, quoted)))
                        .execute(&mut *tx)
                        .await?;
                    record(&mut tx, quoted, reached, next).await?;
                    tx.commit().await?;
                }
                Part::Concurrent(statement) => {
                    concurrent(conn, schema, quoted, statement).await?;
                    record(conn, quoted, reached, next).await?;
                }
            }
        }
        step = 0;
        tracing::info!(
            schema,
            version = index + 1,
            "applied lease-postgres migration"
        );
    }
    Ok(())
}

/// Runs one concurrent statement, outside any transaction. A build whose index is there and
/// valid already (built by a run that failed before recording it) is skipped; one whose
/// index is INVALID (a build that failed: a lock_timeout, a cancel, a duplicate) drops it
/// first, concurrently too. A drop of an index that is gone is skipped.
async fn concurrent(
    conn: &mut PgConnection,
    schema: &str,
    quoted: &str,
    statement: &Concurrent,
) -> Result<(), Failure> {
    let valid: Option<bool> = sqlx::query_scalar(fragment(INDEX_STATE))
        .bind(schema)
        .bind(&statement.index)
        .fetch_optional(&mut *conn)
        .await?;
    match (statement.builds, valid) {
        (true, Some(true)) | (false, None) => return Ok(()),
        (true, Some(false)) => {
            tracing::warn!(
                schema,
                index = %statement.index,
                "dropping an INVALID index left by a failed concurrent build; building it again"
            );
            let drop = fragment(DROP_INDEX).replace("{index}", &statement.index);
            sqlx::raw_sql(AssertSqlSafe(render(&drop, quoted)))
                .execute(&mut *conn)
                .await?;
        }
        (true, None) | (false, Some(_)) => {}
    }
    sqlx::raw_sql(AssertSqlSafe(render(&statement.sql, quoted)))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Records `version` reached and the part `step` of the next migration due.
async fn record(
    conn: &mut PgConnection,
    quoted: &str,
    version: usize,
    step: usize,
) -> Result<(), Failure> {
    let version = i32::try_from(version).unwrap_or(i32::MAX);
    let step = i32::try_from(step).unwrap_or(i32::MAX);
    sqlx::query(AssertSqlSafe(render(SET_STEP, quoted)))
        .bind(version)
        .bind(step)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
