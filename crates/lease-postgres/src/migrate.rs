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
use crate::sql::render;

/// The owner tag written into the version table.
pub(crate) const OWNER: &str = "lease-postgres";

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/v1.sql"),
    include_str!("migrations/v2.sql"),
    include_str!("migrations/v3.sql"),
    include_str!("migrations/v4.sql"),
    include_str!("migrations/v5.sql"),
    include_str!("migrations/v6.sql"),
    include_str!("migrations/v7.sql"),
];

/// The schema version this library writes and understands.
pub const SCHEMA_VERSION: i32 = 7;

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

async fn try_migrate(conn: &mut PgConnection, schema: &str) -> Result<(), Failure> {
    let quoted = crate::config::quoted(schema);
    let mut tx = conn.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(format!("{OWNER} migrate {schema}"))
        .execute(&mut *tx)
        .await?;
    let row = sqlx::query(
        "SELECT to_regclass(format('%I.lease_schema', $1::text)) IS NOT NULL, \
         (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
          WHERE n.nspname = $1)",
    )
    .bind(schema)
    .fetch_one(&mut *tx)
    .await?;
    let has_version_table: bool = row.try_get(0)?;
    let relations: i64 = row.try_get(1)?;
    if !has_version_table {
        if relations > 0 {
            return Err(Failure::Lease(schema_error(
                schema,
                format!("holds {relations} relations but no lease_schema table: not ours"),
            )));
        }
        let create = render(
            "CREATE SCHEMA IF NOT EXISTS {s}; \
             CREATE TABLE {s}.lease_schema ( \
                 singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), \
                 owner text NOT NULL, \
                 version integer NOT NULL)",
            &quoted,
        );
        sqlx::raw_sql(AssertSqlSafe(create))
            .execute(&mut *tx)
            .await?;
        sqlx::query(AssertSqlSafe(render(
            "INSERT INTO {s}.lease_schema (owner, version) VALUES ($1, 0)",
            &quoted,
        )))
        .bind(OWNER)
        .execute(&mut *tx)
        .await?;
    }
    let row = sqlx::query(AssertSqlSafe(render(
        "SELECT owner, version FROM {s}.lease_schema",
        &quoted,
    )))
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
    if version < 0 {
        return Err(Failure::Lease(schema_error(
            schema,
            format!("invalid schema version {version}"),
        )));
    }
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        sqlx::raw_sql(AssertSqlSafe(render(migration, &quoted)))
            .execute(&mut *tx)
            .await?;
        let applied = i32::try_from(index + 1).unwrap_or(i32::MAX);
        sqlx::query(AssertSqlSafe(render(
            "UPDATE {s}.lease_schema SET version = $1",
            &quoted,
        )))
        .bind(applied)
        .execute(&mut *tx)
        .await?;
        tracing::info!(
            schema,
            version = applied,
            "applied lease-postgres migration"
        );
    }
    tx.commit().await?;
    Ok(())
}

fn schema_error(schema: &str, reason: impl Into<String>) -> LeaseError {
    LeaseError::Schema {
        location: format!("postgres schema {schema:?}"),
        reason: reason.into(),
    }
}
