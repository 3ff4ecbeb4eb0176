//! Embedded, idempotent schema migrations with a version check.
//!
//! sqlx's `migrate` feature is not used (it pulls in a libsqlite3-sys that clashes with the
//! workspace's rusqlite), so migrations run here, serialised across processes by a session
//! advisory lock keyed on the schema name, on a connection of their own (taken out of the
//! pool and closed afterwards, so neither the lock nor the session's `lock_timeout` outlives
//! the run). The schema records its owner, version and the part of the next migration
//! reached in `<schema>.lease_schema`; a newer version than this library knows, or a schema
//! that holds tables it did not create, is a [`LeaseError::Schema`].
//!
//! A new schema is created in one transaction, every index built in it (its tables are seen
//! by no one yet). An existing schema is upgraded one part at a time (`migrate/parts.rs`):
//! runs of statements in a transaction each, every `CREATE INDEX CONCURRENTLY` on its own,
//! outside any transaction, so the build never blocks the table's writers. Every lock any
//! part waits for is waited for at most the configured `lock_timeout`, so a migration never
//! queues every session behind a long transaction: it fails `Unavailable` instead, and the
//! part it was in changed nothing. A concurrent build that failed leaves an INVALID index;
//! the next run drops and builds it again (`migrate/apply.rs`).

use lease_core::{LeaseError, Result};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Row};

use crate::error::{self, Attempt, Effect, Verdict};
use crate::statements::{fragment, render};

mod apply;
mod parts;

use apply::Failure;

/// The owner tag written into the version table.
pub(crate) const OWNER: &str = "lease-postgres";

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrate/v1.sql"),
    include_str!("migrate/v2.sql"),
    include_str!("migrate/v3.sql"),
    include_str!("migrate/v4.sql"),
    include_str!("migrate/v5.sql"),
    include_str!("migrate/v6.sql"),
    include_str!("migrate/v7.sql"),
    include_str!("migrate/v8.sql"),
    include_str!("migrate/v9.sql"),
    include_str!("migrate/v10.sql"),
    include_str!("migrate/v11.sql"),
    include_str!("migrate/v12.sql"),
    include_str!("migrate/v13.sql"),
    include_str!("migrate/v14.sql"),
    include_str!("migrate/v15.sql"),
    include_str!("migrate/v16.sql"),
    include_str!("migrate/v17.sql"),
    include_str!("migrate/v18.sql"),
    include_str!("migrate/v19.sql"),
    include_str!("migrate/v20.sql"),
    include_str!("migrate/v21.sql"),
    include_str!("migrate/v22.sql"),
];

const LOCK_TIMEOUT: &str = include_str!("migrate/lock_timeout.sql");
const RESET_LOCK_TIMEOUT: &str = include_str!("migrate/reset_lock_timeout.sql");
const UNLOCK: &str = include_str!("migrate/unlock.sql");
const ADD_STEP_COLUMN: &str = include_str!("migrate/add_step_column.sql");
const READ_STEP: &str = include_str!("migrate/read_step.sql");
const INSPECT: &str = include_str!("migrate/inspect.sql");
const CREATE_VERSION_TABLE: &str = include_str!("migrate/create_version_table.sql");
const INSERT_VERSION: &str = include_str!("migrate/insert_version.sql");
const READ_VERSION: &str = include_str!("migrate/read_version.sql");

/// The schema version this library writes and understands.
pub const SCHEMA_VERSION: i32 = 22;

const _: () = assert!(MIGRATIONS.len() as i32 == SCHEMA_VERSION);

/// Brings `schema` (validated, unquoted) up to [`SCHEMA_VERSION`]: nothing more than a
/// read on `conn` when it is there already; else on `conn` taken out of the pool, each lock
/// waited for at most `lock_timeout`.
pub(crate) async fn migrate(
    mut conn: PoolConnection<Postgres>,
    schema: &str,
    lock_timeout: Duration,
) -> Result<()> {
    match try_verify(&mut conn, schema).await {
        Ok(()) => return Ok(()),
        Err(Failure::Lease(LeaseError::SchemaMismatch { .. })) => {}
        Err(Failure::Lease(e)) => return Err(e),
        Err(Failure::Driver(e)) => return Err(driver_error("migrate", e)),
    }
    let mut conn = conn.detach();
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_migrate(&mut conn, schema, lock_timeout).await {
            Ok(()) => return Ok(()),
            Err(Failure::Lease(e)) => return Err(e),
            // Every part either committed (then the retry resumes after it) or did not:
            // running it again is always safe.
            Err(Failure::Driver(e)) => {
                match error::classify("migrate", Effect::Read, Attempt::before_commit(e)) {
                    Verdict::Retry(e) if attempt >= error::MAX_ATTEMPTS => return Err(e),
                    Verdict::Retry(_) => tokio::time::sleep(error::backoff(attempt)).await,
                    Verdict::Fail(e) => return Err(e),
                }
            }
        }
    }
}

fn driver_error(operation: &'static str, e: sqlx::Error) -> LeaseError {
    match error::classify(operation, Effect::Read, Attempt::before_commit(e)) {
        Verdict::Retry(e) | Verdict::Fail(e) => e,
    }
}

/// Checks, changing nothing, that `schema` exists, is ours and is at [`SCHEMA_VERSION`]:
/// [`LeaseError::SchemaMismatch`] otherwise (with the version found, `None` for no schema).
pub(crate) async fn verify(conn: &mut PgConnection, schema: &str) -> Result<()> {
    match try_verify(conn, schema).await {
        Ok(()) => Ok(()),
        Err(Failure::Lease(e)) => Err(e),
        Err(Failure::Driver(e)) => Err(driver_error("verify schema", e)),
    }
}

async fn try_verify(conn: &mut PgConnection, schema: &str) -> Result<(), Failure> {
    let quoted = crate::config::quoted(schema);
    let row = sqlx::query(fragment(INSPECT))
        .bind(schema)
        .fetch_one(&mut *conn)
        .await?;
    let has_version_table: bool = row.try_get(0)?;
    let relations: i64 = row.try_get(1)?;
    let found = match (has_version_table, relations) {
        (false, 0) => None,
        (false, _) => return Err(Failure::Lease(not_ours(schema, relations))),
        (true, _) => Some(recorded_version(conn, schema, &quoted).await?),
    };
    if found == Some(MIGRATIONS.len()) {
        return Ok(());
    }
    Err(Failure::Lease(LeaseError::SchemaMismatch {
        location: format!("postgres schema {schema:?}"),
        found: found.map(|v| u32::try_from(v).unwrap_or(u32::MAX)),
        expected: SCHEMA_VERSION.unsigned_abs(),
    }))
}

/// One run: this session's `lock_timeout`, the advisory lock (tried until `lock_timeout`
/// has passed), the migrations, then the lock and the setting released.
async fn try_migrate(
    conn: &mut PgConnection,
    schema: &str,
    lock_timeout: Duration,
) -> Result<(), Failure> {
    let name = format!("{OWNER} migrate {schema}");
    sqlx::query(fragment(LOCK_TIMEOUT))
        .bind(format!("{}ms", lock_timeout.as_millis().max(1)))
        .execute(&mut *conn)
        .await?;
    let result = match apply::lock(conn, &name, lock_timeout).await {
        Ok(()) => {
            let result = run(conn, schema).await;
            let unlocked = sqlx::query(fragment(UNLOCK))
                .bind(&name)
                .execute(&mut *conn)
                .await;
            result.and(unlocked.map(drop).map_err(Failure::from))
        }
        Err(e) => Err(e),
    };
    let reset = sqlx::raw_sql(fragment(RESET_LOCK_TIMEOUT))
        .execute(&mut *conn)
        .await;
    result.and(reset.map(drop).map_err(Failure::from))
}

/// Under the lock: checks or creates the version table and reads where the schema is; a
/// new schema gets every migration in the same transaction, an existing one is upgraded
/// part by part.
async fn run(conn: &mut PgConnection, schema: &str) -> Result<(), Failure> {
    let quoted = crate::config::quoted(schema);
    let mut tx = conn.begin().await?;
    ensure_version_table(&mut tx, schema, &quoted).await?;
    sqlx::raw_sql(AssertSqlSafe(render(ADD_STEP_COLUMN, &quoted)))
        .execute(&mut *tx)
        .await?;
    let version = recorded_version(&mut tx, schema, &quoted).await?;
    let step: i32 = sqlx::query_scalar(AssertSqlSafe(render(READ_STEP, &quoted)))
        .fetch_one(&mut *tx)
        .await?;
    if version == 0 && step == 0 {
        apply::all_in(&mut tx, MIGRATIONS, schema, &quoted).await?;
        tx.commit().await?;
        return Ok(());
    }
    tx.commit().await?;
    let step = usize::try_from(step).unwrap_or(0);
    apply::upgrade(conn, MIGRATIONS, schema, &quoted, version, step).await
}

/// Creates the schema and its version table (at version 0) unless the version table
/// exists; a schema holding relations but no version table is not ours.
async fn ensure_version_table(
    tx: &mut PgConnection,
    schema: &str,
    quoted: &str,
) -> Result<(), Failure> {
    let row = sqlx::query(fragment(INSPECT))
        .bind(schema)
        .fetch_one(&mut *tx)
        .await?;
    let has_version_table: bool = row.try_get(0)?;
    let relations: i64 = row.try_get(1)?;
    if has_version_table {
        return Ok(());
    }
    if relations > 0 {
        return Err(Failure::Lease(not_ours(schema, relations)));
    }
    sqlx::raw_sql(AssertSqlSafe(render(CREATE_VERSION_TABLE, quoted)))
        .execute(&mut *tx)
        .await?;
    sqlx::query(AssertSqlSafe(render(INSERT_VERSION, quoted)))
        .bind(OWNER)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The version the schema records, checked: ours, and not newer than this library.
async fn recorded_version(
    tx: &mut PgConnection,
    schema: &str,
    quoted: &str,
) -> Result<usize, Failure> {
    let row = sqlx::query(AssertSqlSafe(render(READ_VERSION, quoted)))
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else {
        return Err(Failure::Lease(schema_error(
            schema,
            "lease_schema is empty",
        )));
    };
    let owner: String = row.try_get(0)?;
    let version: i32 = row.try_get(1)?;
    if owner != OWNER {
        return Err(Failure::Lease(schema_error(
            schema,
            format!("owned by {owner:?}, not {OWNER:?}"),
        )));
    }
    if version > SCHEMA_VERSION {
        return Err(Failure::Lease(schema_error(
            schema,
            format!(
                "schema version {version} is newer than this library's {SCHEMA_VERSION}; \
                 upgrade lease-postgres"
            ),
        )));
    }
    usize::try_from(version).map_err(|_| {
        Failure::Lease(schema_error(
            schema,
            format!("invalid schema version {version}"),
        ))
    })
}

fn not_ours(schema: &str, relations: i64) -> LeaseError {
    schema_error(
        schema,
        format!("holds {relations} relations but no lease_schema table: not ours"),
    )
}

fn schema_error(schema: &str, reason: impl Into<String>) -> LeaseError {
    LeaseError::Schema {
        location: format!("postgres schema {schema:?}"),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::parts::{Part, parts};

    /// Every concurrent statement of the shipped migrations is cut whole: one statement
    /// naming its index, nothing of the next one.
    #[test]
    fn every_concurrent_statement_is_cut_whole() {
        let mut found = 0;
        for migration in super::MIGRATIONS {
            for part in parts(migration) {
                if let Part::Concurrent(c) = part {
                    found += 1;
                    assert!(!c.sql.contains(';'), "{c:?}");
                    assert!(c.sql.contains(&c.index), "{c:?}");
                }
            }
        }
        assert!(found > 0, "no migration builds an index concurrently");
    }

    /// The planner uses `executions_corrupt` only for a test equal to its predicate, so
    /// the predicate is the statements' `{decodable}` word for word (unqualified): a change
    /// to one without the other would turn `list_corrupt` and `status_counts` back into
    /// reads of every row, silently.
    #[test]
    fn the_corrupt_index_is_the_decodable_test() {
        let decodable = crate::statements::fragment(crate::statements::DECODABLE);
        let unqualified = decodable.replace("e.", "");
        let v20 = super::MIGRATIONS[19];
        let predicate = v20
            .split_once("executions_corrupt ON {s}.executions (id)\n    WHERE NOT ")
            .and_then(|(_, rest)| rest.split_once(";\n"))
            .map(|(predicate, _)| predicate)
            .expect("the corrupt index's predicate");
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(squash(predicate), squash(&unqualified));
    }
}
