//! The `lease` binary as a process against each backend: SQLite in a temporary file always;
//! PostgreSQL and Redis on the servers `LEASE_POSTGRES_URL` / `LEASE_REDIS_URL` name (else
//! the local defaults; unreachable fails), each in a fresh schema or namespace removed
//! afterwards, pass or fail.

mod common;

use lease::postgres::{PostgresBackend, PostgresConfig};
use lease::redis::{RedisBackend, RedisConfig};

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    common::check_commands(&url, &backend).await;
    // A namespace that holds nothing is a mistyped one: refused, not shown as empty.
    let other = common::with_namespace(&url, "other");
    common::on(&other, &["status", "--json"])
        .await
        .assert_error(1, "namespace");
}

/// A SQLite file at the schema version before this one: the shipped migrations but the
/// last, applied as the migrating open of that version did.
fn older_sqlite_file(path: &std::path::Path) -> i64 {
    use lease::sqlite::migrate::{APPLICATION_ID, PRODUCT, SCHEMA_VERSION};
    let conn = lease::sqlite::rusqlite::Connection::open(path).expect("raw open");
    conn.pragma_update(None, "application_id", APPLICATION_ID)
        .expect("application_id");
    let older = SCHEMA_VERSION - 1;
    for version in 1..=older {
        let file = format!(
            "{}/../lease-sqlite/src/migrate/v{version}.sql",
            env!("CARGO_MANIFEST_DIR")
        );
        let sql = std::fs::read_to_string(&file).expect("migration file");
        conn.execute_batch(&sql).expect("apply migration");
    }
    conn.execute(
        "INSERT INTO lease_meta VALUES ('product', ?1), ('schema_version', ?2)",
        [PRODUCT.to_owned(), older.to_string()],
    )
    .expect("marker");
    older
}

fn sqlite_version(path: &std::path::Path) -> String {
    lease::sqlite::rusqlite::Connection::open(path)
        .expect("raw open")
        .query_row(
            "SELECT value FROM lease_meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .expect("version")
}

/// Only `lease migrate` upgrades a SQLite file: `lease status` on a file of an older schema
/// fails naming that command and leaves the file's version as it was; after `lease migrate`
/// it answers. A mistyped path is refused and not created.
#[tokio::test(flavor = "multi_thread")]
async fn only_migrate_upgrades_a_sqlite_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    let url = format!("sqlite:{}", path.display());
    let older = older_sqlite_file(&path);
    let refused = common::on(&url, &["status"]).await;
    refused.assert_error(1, "run `lease migrate`");
    assert_eq!(sqlite_version(&path), older.to_string(), "status upgraded");
    let migrated = common::on(&url, &["migrate"]).await;
    assert_eq!(migrated.code, Some(0), "{migrated:?}");
    assert_eq!(
        sqlite_version(&path),
        lease::sqlite::migrate::SCHEMA_VERSION.to_string()
    );
    let counted = common::on(&url, &["status", "--json"]).await;
    assert_eq!(counted.json()["total"], 0, "{counted:?}");
    let missing = format!("sqlite:{}", dir.path().join("mistyped.db").display());
    common::on(&missing, &["status"])
        .await
        .assert_error(1, "no SQLite database file");
    assert!(!dir.path().join("mistyped.db").exists());
}

/// Only `lease migrate` claims a Redis namespace: `lease status` on one that holds nothing
/// (a mistyped `?namespace=`) fails naming that command and writes no key.
#[tokio::test(flavor = "multi_thread")]
async fn only_migrate_claims_a_redis_namespace() {
    let base = lease_testserver::redis_url();
    let namespace = common::unique("redis_migrate");
    let url = common::with_namespace(&base, &namespace);
    let refused = common::on(&url, &["status"]).await;
    let verify = RedisConfig::new(&base).namespace(&namespace).migrate(false);
    let still_missing = RedisBackend::connect(verify).await.err();
    let migrated = common::on(&url, &["migrate"]).await;
    let counted = common::on(&url, &["status", "--json"]).await;
    let direct = RedisBackend::connect(RedisConfig::new(&base).namespace(&namespace))
        .await
        .expect("connect");
    direct.delete_namespace().await.expect("delete namespace");
    refused.assert_error(1, "run `lease migrate`");
    assert!(
        matches!(
            still_missing,
            Some(lease::LeaseError::SchemaMismatch { found: None, .. })
        ),
        "{still_missing:?}"
    );
    assert_eq!(migrated.code, Some(0), "{migrated:?}");
    assert_eq!(counted.json()["total"], 0, "{counted:?}");
}

/// Opens `url` through the facade and runs the command checks in a task of their own, so a
/// failed check is returned, not thrown, and the caller cleans up before asserting.
async fn checks_on(url: String) -> Result<(), tokio::task::JoinError> {
    let backend = lease::open(&url).await.expect("open");
    tokio::spawn(async move { common::check_commands(&url, &backend).await }).await
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_schema() {
    let base = lease_testserver::postgres_url();
    let schema = common::unique("pg");
    let url = common::with_namespace(&base, &schema);
    let checked = checks_on(url).await;
    let direct = PostgresBackend::connect(PostgresConfig::new(&base).schema(&schema))
        .await
        .expect("connect");
    direct.drop_schema().await.expect("drop schema");
    checked.expect("the checks");
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_namespace() {
    let base = lease_testserver::redis_url();
    let namespace = common::unique("redis");
    let url = common::with_namespace(&base, &namespace);
    let checked = checks_on(url).await;
    let direct = RedisBackend::connect(RedisConfig::new(&base).namespace(&namespace))
        .await
        .expect("connect");
    direct.delete_namespace().await.expect("delete namespace");
    checked.expect("the checks");
}

/// Only `lease migrate` creates or upgrades a schema: `lease status` on a schema that does
/// not exist (a mistyped `?namespace=`) fails naming that command and creates nothing.
#[tokio::test(flavor = "multi_thread")]
async fn only_migrate_creates_a_postgres_schema() {
    let base = lease_testserver::postgres_url();
    let schema = common::unique("pg_migrate");
    let url = common::with_namespace(&base, &schema);
    let refused = common::on(&url, &["status"]).await;
    let verify = PostgresConfig::new(&base).schema(&schema).migrate(false);
    let still_missing = PostgresBackend::connect(verify.clone()).await.err();
    let migrated = common::on(&url, &["migrate", "--lock-timeout", "2s"]).await;
    let counted = common::on(&url, &["status", "--json"]).await;
    let direct = PostgresBackend::connect(PostgresConfig::new(&base).schema(&schema))
        .await
        .expect("connect");
    direct.drop_schema().await.expect("drop schema");
    refused.assert_error(1, "run `lease migrate`");
    assert!(
        matches!(
            still_missing,
            Some(lease::LeaseError::SchemaMismatch { found: None, .. })
        ),
        "{still_missing:?}"
    );
    assert_eq!(migrated.code, Some(0), "{migrated:?}");
    assert_eq!(counted.json()["total"], 0, "{counted:?}");
}
