//! Opening a connection and the embedded, versioned schema.
//!
//! Every table is prefixed `lease_`. `lease_meta` holds the product marker and the schema
//! version. Opening a database:
//!
//! * with no `lease_` tables: creates the schema (and, if the database is otherwise
//!   empty, stamps SQLite's `application_id` header with [`APPLICATION_ID`]);
//! * at an older version: applies the missing migrations;
//! * at a newer version, with a marker or `application_id` of another product, with `lease_`
//!   tables but no marker, or a file that is not a SQLite database: fails with
//!   [`LeaseError::Schema`] and changes nothing.
//!
//! All of it runs in one `BEGIN IMMEDIATE` transaction, so two processes opening a new file
//! at once serialise: the second finds the schema the first created.
//!
//! A verifying open (`open_verified`, [`crate::SqliteConfig::migrate`] `false`) creates no
//! file and writes nothing: it reads the version in a deferred transaction and refuses any
//! other with [`LeaseError::SchemaMismatch`], so a read-only tool neither alters an old file
//! under live traffic nor leaves an empty store at a mistyped path.

use std::time::Duration;

use lease_core::{LeaseError, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, Transaction};

use crate::config::{Location, Synchronous};
use crate::error::{OpError, OpResult, is_busy, is_not_a_database, sqlite_error};
use crate::tx;

/// The product marker stored in `lease_meta`.
pub const PRODUCT: &str = "execution-leases";

/// The schema version this library writes and reads.
pub const SCHEMA_VERSION: i64 = 17;

/// SQLite `application_id` stamped on databases this library created ("LSE1").
pub const APPLICATION_ID: i32 = 0x4C53_4531;

/// Statement cache size per connection (every statement uses `prepare_cached`).
const STATEMENT_CACHE: usize = 64;

/// Migrations: entry `i` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17,
];

const V1: &str = include_str!("migrate/v1.sql");

/// Version 2: the wake log other processes watch, and the index a claim's horizon (earliest
/// `claimable_at` of a namespace) seeks.
const V2: &str = include_str!("migrate/v2.sql");

/// Version 3: quarantine of records a claim could not decode, so one bad record never stops
/// every claim. `corrupt` holds the problem; a quarantined row has no claim columns, so
/// claims and the horizon skip it.
const V3: &str = include_str!("migrate/v3.sql");

/// Version 4 (retention): `purge_terminal` walks terminal rows in id order with their end
/// time (partial index; only completed and failed rows that are not quarantined), and
/// deletes the store receipts and start records naming an execution through indexes.
const V4: &str = include_str!("migrate/v4.sql");

/// Version 5 (a claim's cost stays flat as stored work grows): the claim index splits in
/// two, so a claim never walks past live leases. Rows that are not running keep (due, id)
/// order; running rows are keyed by `claimable_at` first, so only expired leases are read
/// (see `candidates.rs`).
const V5: &str = include_str!("migrate/v5.sql");

/// Version 6: effects (RFC 004, reduced) and store waiters.
const V6: &str = include_str!("migrate/v6.sql");

/// Version 7 (cancel and pause): cancelled rows join the retention index; paused scopes per
/// namespace (`lease_paused`).
const V7: &str = include_str!("migrate/v7.sql");

/// Version 8: each execution's priority and concurrency key.
const V8: &str = include_str!("migrate/v8.sql");

/// Version 9: the waiting claim index ordered by priority first, the keyed live-lease
/// index, and the concurrency limits per namespace (`lease_limits`).
const V9: &str = include_str!("migrate/v9.sql");

/// Version 10: each execution's W3C trace context (`trace_context`, written at admission).
const V10: &str = include_str!("migrate/v10.sql");

/// Version 11: attempt limits and dead letters (`attempt_limit` and `last_error` on each
/// execution, `lease_attempt_limits`, the dead rows' index).
const V11: &str = include_str!("migrate/v11.sql");

/// Version 12: ordered keys, start rates per key and browsing (`admitted_seq` on each
/// execution and its indexes, `lease_rate_limits`, `lease_ordered_keys`,
/// `lease_rate_starts`).
const V12: &str = include_str!("migrate/v12.sql");

/// Version 13: workflows' own redelivery policies (`lease_redelivery_policies`, the one a
/// claim kept in `redelivery_policy`) and each execution's delivery history (`deliveries`,
/// in the row its transitions write).
const V13: &str = include_str!("migrate/v13.sql");

/// Version 14: browsing by a workflow and a key together walks an index of both
/// (`lease_executions_by_key_workflow`), so its page does not grow with what is stored.
const V14: &str = include_str!("migrate/v14.sql");

/// Version 15: a keyed execution's writes keep one key-led index up to date instead of
/// three (`lease_executions_by_key` with the lease expiry serves the concurrency limit's
/// live-lease count and the ordered key's line).
const V15: &str = include_str!("migrate/v15.sql");

/// Version 16: the latest delivery of each execution is described by its row's columns
/// (`delivery_claimed_at` with the token, the status and `last_delivery_ended_at`), so a
/// claim and an acknowledgement of the drain leave the `deliveries` JSON alone.
const V16: &str = include_str!("migrate/v16.sql");

/// Version 17: the namespace's takeover counter (`takeovers` on `lease_counters`), added to
/// only by the claims that take over an expired lease.
const V17: &str = include_str!("migrate/v17.sql");

/// `$1 name` -> 1 when the table exists.
const HAS_TABLE: &str = include_str!("migrate/has_table.sql");
/// `$1 key` -> its `lease_meta` value.
const META: &str = include_str!("migrate/meta.sql");
/// `$1 key, $2 value`: sets a `lease_meta` entry.
const SET_META: &str = include_str!("migrate/set_meta.sql");
/// The number of `lease_` objects in the database.
const COUNT_LEASE_OBJECTS: &str = include_str!("migrate/count_lease_objects.sql");
/// The number of objects in the database.
const COUNT_OBJECTS: &str = include_str!("migrate/count_objects.sql");
/// `$1 namespace` -> 1 when anything of the namespace is stored.
const NAMESPACE_USED: &str = include_str!("migrate/namespace_used.sql");

fn schema_error(location: &Location, reason: impl Into<String>) -> LeaseError {
    LeaseError::Schema {
        location: location.describe(),
        reason: reason.into(),
    }
}

/// Maps an error met while opening: "not a database" is a schema mismatch.
fn open_error(location: &Location, e: rusqlite::Error) -> LeaseError {
    if is_not_a_database(&e) {
        return schema_error(
            location,
            format!("not a SQLite database ({e}); refusing to touch it"),
        );
    }
    sqlite_error("open", e)
}

/// Creates a missing database file readable by its owner only (0600; SQLite gives its
/// `-wal` and `-shm` files the same mode), refusing a symlink in its place: `create_new` is
/// `O_CREAT | O_EXCL`, which never follows one. An existing file is left as it is; SQLite's
/// `SQLITE_OPEN_NOFOLLOW` then refuses a symlinked path.
fn create_private(path: &std::path::Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens a connection with the default [`Synchronous`] ([`open_with`]).
pub(crate) fn open(location: &Location, busy_timeout: Duration) -> Result<Connection> {
    open_with(location, busy_timeout, Synchronous::default())
}

/// Opens a connection, configures it (a file with `synchronous`) and brings the schema to
/// [`SCHEMA_VERSION`].
pub(crate) fn open_with(
    location: &Location,
    busy_timeout: Duration,
    synchronous: Synchronous,
) -> Result<Connection> {
    if let Location::File(path) = location {
        create_private(path).map_err(|e| LeaseError::Backend {
            backend: crate::error::BACKEND,
            operation: "open",
            source: format!("{}: {e}", path.display()).into(),
        })?;
    }
    let mut conn = connect(location, OpenFlags::SQLITE_OPEN_CREATE, busy_timeout)?;
    if matches!(location, Location::File(_)) {
        configure_file(&conn, location, synchronous)?;
    }
    tx::write(&mut conn, "open", busy_timeout, |tx| migrate(tx, location))
        .map_err(|e| not_a_database(location, e))?;
    crate::authorizer::guard_app_sql(&conn);
    Ok(conn)
}

/// Opens a connection that changes nothing until the schema is verified: a missing file is
/// not created, and a schema at another version than [`SCHEMA_VERSION`] (or none), or a
/// `namespace` other than the default that holds nothing, is refused before the journal
/// mode is touched. For read-only tools (`SqliteConfig::migrate(false)`).
pub(crate) fn open_verified(
    location: &Location,
    busy_timeout: Duration,
    synchronous: Synchronous,
    namespace: &str,
) -> Result<Connection> {
    if let Location::File(path) = location
        && !path.is_file()
    {
        return Err(mismatch(location, None));
    }
    let mut conn = connect(location, OpenFlags::empty(), busy_timeout)?;
    let busy = (busy_timeout, std::time::Instant::now() + busy_timeout);
    tx::read(&mut conn, "open", busy, |tx| {
        verify(tx, location, namespace)
    })
    .map_err(|e| not_a_database(location, e))?;
    if matches!(location, Location::File(_)) {
        configure_file(&conn, location, synchronous)?;
    }
    crate::authorizer::guard_app_sql(&conn);
    Ok(conn)
}

/// A connection to `location` (`create`: [`OpenFlags::SQLITE_OPEN_CREATE`] or empty) with
/// its busy timeout and statement cache.
fn connect(location: &Location, create: OpenFlags, busy_timeout: Duration) -> Result<Connection> {
    let conn = match location {
        // No SQLITE_OPEN_URI: a path is a path, even one that starts with "file:".
        Location::File(path) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | create
                | OpenFlags::SQLITE_OPEN_NOFOLLOW
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ),
        // The memdb VFS shares a database whose name starts with '/' between every
        // connection of the process, with ordinary locking (so busy_timeout applies).
        Location::Memory(name) => {
            Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), OpenFlags::default())
        }
    }
    .map_err(|e| open_error(location, e))?;
    conn.busy_timeout(busy_timeout)
        .map_err(|e| open_error(location, e))?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// "Not a database" met inside the opening transaction is a schema error.
fn not_a_database(location: &Location, e: LeaseError) -> LeaseError {
    match e {
        LeaseError::Backend { source, .. }
            if source
                .downcast_ref::<rusqlite::Error>()
                .is_some_and(is_not_a_database) =>
        {
            schema_error(location, format!("not a SQLite database ({source})"))
        }
        other => other,
    }
}

/// WAL journal with `synchronous` ([`Synchronous`]; default `NORMAL`: the WAL is synced at
/// checkpoints, a power loss may lose the last commits; `FULL`: every commit syncs the WAL,
/// so no token a caller heard of is lost to a power loss; see the crate docs).
fn configure_file(conn: &Connection, location: &Location, synchronous: Synchronous) -> Result<()> {
    let mut retries = 0;
    let mode: String = loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Ok(mode) => break mode,
            Err(e) if is_busy(&e) && retries < tx::BUSY_RETRIES => {
                retries += 1;
                std::thread::sleep(Duration::from_millis(1 << retries));
            }
            Err(e) => return Err(open_error(location, e)),
        }
    };
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            location = %location.describe(),
            mode,
            "SQLite refused WAL mode; running with this journal mode instead"
        );
    }
    conn.pragma_update(None, "synchronous", synchronous.pragma())
        .map_err(|e| open_error(location, e))?;
    crate::checkpoint::install(conn);
    Ok(())
}

fn has_table(tx: &Transaction<'_>, name: &str) -> OpResult<bool> {
    let n: i64 = tx.query_row(HAS_TABLE, [name], |row| row.get(0))?;
    Ok(n > 0)
}

fn meta(tx: &Transaction<'_>, key: &str) -> rusqlite::Result<Option<String>> {
    tx.query_row(META, [key], |row| row.get::<_, String>(0))
        .optional()
}

fn set_meta(tx: &Transaction<'_>, key: &str, value: &str) -> OpResult<()> {
    tx.execute(SET_META, [key, value])?;
    Ok(())
}

/// The schema version the database records (0: no `lease_` object yet), checked: ours
/// (marker and `application_id`) and not newer than [`SCHEMA_VERSION`]. Reads only.
fn stored_version(tx: &Transaction<'_>, location: &Location) -> OpResult<i64> {
    let fail = |reason: String| OpError::Lease(schema_error(location, reason));
    let app_id: i32 = tx.query_row("PRAGMA application_id", [], |row| row.get(0))?;
    if app_id != 0 && app_id != APPLICATION_ID {
        return Err(fail(format!(
            "the database belongs to another application (application_id {app_id:#x}, \
             expected 0 or {APPLICATION_ID:#x})"
        )));
    }
    let version = if has_table(tx, "lease_meta")? {
        let unreadable = |e: rusqlite::Error| -> OpError {
            if is_busy(&e) {
                e.into()
            } else {
                fail(format!("lease_meta is unreadable: {e}"))
            }
        };
        let product = meta(tx, "product").map_err(unreadable)?;
        if product.as_deref() != Some(PRODUCT) {
            return Err(fail(format!(
                "lease_meta names product {:?}, not {PRODUCT:?}; refusing to use it",
                product.unwrap_or_default()
            )));
        }
        let raw = meta(tx, "schema_version").map_err(unreadable)?;
        let version = raw
            .as_deref()
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| *v >= 1)
            .ok_or_else(|| fail(format!("lease_meta has no valid schema_version ({raw:?})")))?;
        if version > SCHEMA_VERSION {
            return Err(fail(format!(
                "schema version {version} is newer than version {SCHEMA_VERSION} that this \
                 lease-sqlite supports; upgrade the library, never downgrade a database"
            )));
        }
        version
    } else {
        let leftovers: i64 = tx.query_row(COUNT_LEASE_OBJECTS, [], |row| row.get(0))?;
        if leftovers > 0 {
            return Err(fail(
                "lease_ tables exist but lease_meta (the version marker) does not; \
                 refusing to guess what they are"
                    .to_owned(),
            ));
        }
        0
    };
    Ok(version)
}

/// Refuses, changing nothing, a schema at another version than [`SCHEMA_VERSION`] (or
/// none), and a non-default `namespace` that holds nothing (a mistyped one).
fn verify(tx: &Transaction<'_>, location: &Location, namespace: &str) -> OpResult<()> {
    let version = stored_version(tx, location)?;
    if version != SCHEMA_VERSION {
        return Err(OpError::Lease(mismatch(location, Some(version))));
    }
    if namespace != crate::config::DEFAULT_NAMESPACE {
        let used: bool = tx.query_row(NAMESPACE_USED, [namespace], |row| row.get(0))?;
        if !used {
            return Err(OpError::Lease(LeaseError::invalid(
                "namespace",
                format!(
                    "{namespace:?} holds nothing in {} (mistyped?); nothing was created",
                    location.describe()
                ),
            )));
        }
    }
    Ok(())
}

/// [`LeaseError::SchemaMismatch`] for a database at `found` (`None` or `Some(0)`: no
/// schema at all).
fn mismatch(location: &Location, found: Option<i64>) -> LeaseError {
    LeaseError::SchemaMismatch {
        location: location.describe(),
        found: found
            .filter(|v| *v > 0)
            .map(|v| u32::try_from(v).unwrap_or(u32::MAX)),
        expected: u32::try_from(SCHEMA_VERSION).unwrap_or(u32::MAX),
    }
}

fn migrate(tx: &Transaction<'_>, location: &Location) -> OpResult<()> {
    let version = stored_version(tx, location)?;
    if version == 0 {
        let objects: i64 = tx.query_row(COUNT_OBJECTS, [], |row| row.get(0))?;
        if objects == 0 {
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        }
    }
    for (from, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(version).unwrap_or(0))
    {
        tx.execute_batch(sql)?;
        if from == 0 {
            set_meta(tx, "product", PRODUCT)?;
        }
        let to = i64::try_from(from + 1).unwrap_or(SCHEMA_VERSION);
        set_meta(tx, "schema_version", &to.to_string())?;
        tracing::info!(location = %location.describe(), version = to, "lease schema migrated");
    }
    Ok(())
}

/// `EXPLAIN QUERY PLAN` of `sql` on a fresh schema, its details joined by " | " (the tests
/// that a statement reads the index it was written for).
#[cfg(test)]
pub(crate) fn plan(sql: &str, params: usize) -> String {
    let conn = open(
        &crate::config::Location::Memory(format!("plan-{}", uuid::Uuid::new_v4())),
        std::time::Duration::from_secs(1),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn synchronous_of(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA synchronous", [], |r| r.get(0))
            .expect("synchronous")
    }

    /// A file runs `NORMAL` (1) by default and syncs every commit (`FULL` = 2, so a power
    /// loss cannot roll back a claim whose token a caller saw) when configured so.
    #[tokio::test]
    async fn files_sync_every_commit_when_configured_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        let default = crate::SqliteBackend::open(crate::SqliteConfig::file(dir.path().join("a")))
            .await
            .expect("open");
        let full = crate::SqliteBackend::open(
            crate::SqliteConfig::file(dir.path().join("b")).synchronous(Synchronous::Full),
        )
        .await
        .expect("open");
        for (backend, want) in [(default, 1), (full, 2)] {
            let got = backend
                .connection()
                .call("synchronous", |c| Ok(synchronous_of(c)))
                .await
                .expect("read");
            assert_eq!(got, want, "PRAGMA synchronous");
        }
        let raw = open(
            &Location::File(dir.path().join("c")),
            Duration::from_secs(1),
        )
        .expect("open");
        assert_eq!(
            synchronous_of(&raw),
            1,
            "raw::open is configured as the default"
        );
    }
}
