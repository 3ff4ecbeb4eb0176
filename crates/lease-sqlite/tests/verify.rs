//! The verifying open (`SqliteConfig::migrate(false)`, what read-only tools use): an older
//! file, no file, an empty file or an empty namespace is refused and left as it was; after
//! a migrating open the same file opens.

use lease_core::{Admission, ExecutionClient, ExecutionId, LeaseError};
use lease_sqlite::migrate::{APPLICATION_ID, PRODUCT, SCHEMA_VERSION};
use lease_sqlite::{SqliteBackend, SqliteConfig};
use rusqlite::Connection;

/// A file at schema version `SCHEMA_VERSION - 1`: the crate's own migrations but the last,
/// applied as the migrating open would have applied them then.
fn older_file(path: &std::path::Path) {
    let conn = Connection::open(path).expect("raw open");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("wal");
    conn.pragma_update(None, "application_id", APPLICATION_ID)
        .expect("application_id");
    let older = SCHEMA_VERSION - 1;
    for version in 1..=older {
        let file = format!("{}/src/migrate/v{version}.sql", env!("CARGO_MANIFEST_DIR"));
        let sql = std::fs::read_to_string(&file).expect("migration file");
        conn.execute_batch(&sql).expect("apply migration");
    }
    conn.execute(
        "INSERT INTO lease_meta VALUES ('product', ?1), ('schema_version', ?2)",
        [PRODUCT.to_owned(), older.to_string()],
    )
    .expect("marker");
}

/// Everything a verifying open could have changed: the schema objects and the marker.
fn schema_of(path: &std::path::Path) -> Vec<(String, String)> {
    let conn = Connection::open(path).expect("raw open");
    let mut statement = conn
        .prepare("SELECT name, coalesce(sql, '') FROM sqlite_master ORDER BY name")
        .expect("prepare");
    let mut objects: Vec<(String, String)> = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    if let Ok(version) = conn.query_row(
        "SELECT value FROM lease_meta WHERE key = 'schema_version'",
        [],
        |r| r.get::<_, String>(0),
    ) {
        objects.push(("schema_version".to_owned(), version));
    }
    objects
}

fn verifying(path: &std::path::Path) -> SqliteConfig {
    SqliteConfig::file(path).migrate(false)
}

#[tokio::test]
async fn a_verifying_open_refuses_an_older_file_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("older.db");
    older_file(&path);
    let before = schema_of(&path);
    let refused = SqliteBackend::open(verifying(&path)).await.err();
    let expected = u32::try_from(SCHEMA_VERSION).expect("version");
    assert!(
        matches!(
            &refused,
            Some(LeaseError::SchemaMismatch { found: Some(found), expected: e, .. })
                if *found + 1 == expected && *e == expected
        ),
        "{refused:?}"
    );
    assert_eq!(schema_of(&path), before, "the older file was changed");

    SqliteBackend::open(SqliteConfig::file(&path))
        .await
        .expect("a migrating open upgrades it");
    let verified = SqliteBackend::open(verifying(&path))
        .await
        .expect("then it verifies");
    verified
        .admit(&Admission::new(ExecutionId::new("a").expect("id")))
        .await
        .expect("and works");
}

#[tokio::test]
async fn a_verifying_open_creates_no_file_and_no_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.db");
    let refused = SqliteBackend::open(verifying(&missing)).await.err();
    assert!(
        matches!(
            refused,
            Some(LeaseError::SchemaMismatch { found: None, .. })
        ),
        "{refused:?}"
    );
    assert!(!missing.exists(), "a verifying open created the file");

    let empty = dir.path().join("empty.db");
    Connection::open(&empty)
        .expect("raw open")
        .execute_batch("CREATE TABLE theirs (x);")
        .expect("another application's table");
    let before = schema_of(&empty);
    let refused = SqliteBackend::open(verifying(&empty)).await.err();
    assert!(
        matches!(
            refused,
            Some(LeaseError::SchemaMismatch { found: None, .. })
        ),
        "{refused:?}"
    );
    assert_eq!(
        schema_of(&empty),
        before,
        "a verifying open created the schema"
    );
}

#[tokio::test]
async fn a_verifying_open_refuses_a_namespace_that_holds_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ns.db");
    let used = SqliteBackend::open(SqliteConfig::file(&path).namespace("billing"))
        .await
        .expect("open");
    used.admit(&Admission::new(ExecutionId::new("a").expect("id")))
        .await
        .expect("admit");
    SqliteBackend::open(verifying(&path).namespace("billing"))
        .await
        .expect("a used namespace verifies");
    SqliteBackend::open(verifying(&path))
        .await
        .expect("the default namespace verifies, empty or not");
    let refused = SqliteBackend::open(verifying(&path).namespace("biling"))
        .await
        .err();
    assert!(
        matches!(&refused, Some(LeaseError::InvalidInput { field, .. }) if *field == "namespace"),
        "{refused:?}"
    );
}
