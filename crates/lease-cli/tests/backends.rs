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
    let other = common::with_namespace(&url, "other");
    let empty = common::on(&other, &["status", "--json"]).await.json();
    assert_eq!(
        empty["total"], 0,
        "another namespace of the file is counted apart"
    );
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
    let migrated = common::on(&url, &["migrate"]).await;
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
