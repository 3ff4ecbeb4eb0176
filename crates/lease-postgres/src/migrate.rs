//! Embedded, idempotent schema migrations with a version check.
//!
//! sqlx's `migrate` feature is not used (it pulls in a libsqlite3-sys that clashes with the
//! workspace's rusqlite), so migrations run here: in one transaction, serialised across
//! processes by a transaction-scoped advisory lock keyed on the schema name, so concurrent
//! first connects are safe. The schema records its owner and version in
//! `<schema>.lease_schema`; a newer version than this library knows, or a schema that holds
//! tables it did not create, is a [`LeaseError::Schema`].

use lease_core::{LeaseError, Result};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};

use crate::error::{self, Attempt, Effect, Verdict};
use crate::statements::{fragment, render};

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
];

const LOCK: &str = include_str!("migrate/lock.sql");
const LOCK_TIMEOUT: &str = include_str!("migrate/lock_timeout.sql");
const INSPECT: &str = include_str!("migrate/inspect.sql");
const CREATE_VERSION_TABLE: &str = include_str!("migrate/create_version_table.sql");
const INSERT_VERSION: &str = include_str!("migrate/insert_version.sql");
const READ_VERSION: &str = include_str!("migrate/read_version.sql");
const SET_VERSION: &str = include_str!("migrate/set_version.sql");

/// The schema version this library writes and understands.
pub const SCHEMA_VERSION: i32 = 17;

const _: () = assert!(MIGRATIONS.len() as i32 == SCHEMA_VERSION);

/// Brings `schema` (validated, unquoted) up to [`SCHEMA_VERSION`] on `conn`.
pub(crate) async fn migrate(conn: &mut PgConnection, schema: &str) -> Result<()> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_migrate(conn, schema).await {
            Ok(()) => return Ok(()),
            Err(Failure::Lease(e)) => return Err(e),
            // The migration transaction either committed (then the retry finds the schema up
            // to date) or did not: running it again is always safe.
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

enum Failure {
    Lease(LeaseError),
    Driver(sqlx::Error),
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Driver(e)
    }
}

/// Checks, changing nothing, that `schema` exists, is ours and is at [`SCHEMA_VERSION`]:
/// [`LeaseError::SchemaMismatch`] otherwise (with the version found, `None` for no schema).
pub(crate) async fn verify(conn: &mut PgConnection, schema: &str) -> Result<()> {
    match try_verify(conn, schema).await {
        Ok(()) => Ok(()),
        Err(Failure::Lease(e)) => Err(e),
        Err(Failure::Driver(e)) => Err(
            match error::classify("verify schema", Effect::Read, Attempt::before_commit(e)) {
                Verdict::Retry(e) | Verdict::Fail(e) => e,
            },
        ),
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

/// One run of the migration transaction: lock, check or create the version table, check
/// the recorded owner and version, apply the missing migrations, commit. Every lock it
/// takes is waited for at most `lock_timeout` (`migrate/lock_timeout.sql`): a migration
/// queued behind a long transaction would otherwise hold every later statement on its
/// tables waiting behind it; it fails instead (`Unavailable`) and rolls back.
async fn try_migrate(conn: &mut PgConnection, schema: &str) -> Result<(), Failure> {
    let quoted = crate::config::quoted(schema);
    let mut tx = conn.begin().await?;
    sqlx::raw_sql(fragment(LOCK_TIMEOUT))
        .execute(&mut *tx)
        .await?;
    sqlx::query(fragment(LOCK))
        .bind(format!("{OWNER} migrate {schema}"))
        .execute(&mut *tx)
        .await?;
    ensure_version_table(&mut tx, schema, &quoted).await?;
    let version = recorded_version(&mut tx, schema, &quoted).await?;
    apply_from(&mut tx, schema, &quoted, version).await?;
    tx.commit().await?;
    Ok(())
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

/// Applies the migrations after `version`, recording each.
async fn apply_from(
    tx: &mut PgConnection,
    schema: &str,
    quoted: &str,
    version: usize,
) -> Result<(), Failure> {
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        sqlx::raw_sql(AssertSqlSafe(render(migration, quoted)))
            .execute(&mut *tx)
            .await?;
        let applied = i32::try_from(index + 1).unwrap_or(i32::MAX);
        sqlx::query(AssertSqlSafe(render(SET_VERSION, quoted)))
            .bind(applied)
            .execute(&mut *tx)
            .await?;
        tracing::info!(
            schema,
            version = applied,
            "applied lease-postgres migration"
        );
    }
    Ok(())
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
