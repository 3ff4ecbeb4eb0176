//! `lease::open`: the backend is chosen by URL scheme; a scheme whose feature is off, or an
//! unknown one, is a typed error.

// With no backend feature on, only the error cases below remain.
#![cfg_attr(
    not(any(
        feature = "sqlite",
        feature = "postgres",
        feature = "redis",
        feature = "memory"
    )),
    allow(dead_code, unused_imports)
)]

use lease::{Admission, ExecutionId, ExecutionStatus, OpenError};

async fn admit_and_read(url: &str) {
    let backend = lease::open(url).await.expect("open");
    let id = ExecutionId::new("order-42").expect("id");
    backend
        .admit(&Admission::new(id.clone()))
        .await
        .expect("admit");
    let record = backend.get(&id).await.expect("get").expect("exists");
    assert_eq!(record.status, ExecutionStatus::Admitted);
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_memory_url_opens_a_private_database() {
    admit_and_read("sqlite::memory:").await;
    let other = lease::open("sqlite::memory:").await.expect("open");
    let id = ExecutionId::new("order-42").expect("id");
    assert!(
        other.get(&id).await.expect("get").is_none(),
        "in-memory databases are private"
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_file_url_persists_across_opens() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("open.db");
    let url = format!("sqlite:{}", path.display());
    admit_and_read(&url).await;
    let again = lease::open(&format!("sqlite://{}", path.display()))
        .await
        .expect("reopen");
    let id = ExecutionId::new("order-42").expect("id");
    assert!(again.get(&id).await.expect("get").is_some());
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_namespaces_in_one_file_are_separate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ns.db");
    admit_and_read(&format!("sqlite:{}?namespace=billing", path.display())).await;
    let shipping = lease::open(&format!("sqlite:{}?namespace=shipping", path.display()))
        .await
        .expect("open");
    let id = ExecutionId::new("order-42").expect("id");
    assert!(shipping.get(&id).await.expect("get").is_none());
}

/// A name no other run uses, for a schema or namespace of its own.
#[cfg(any(feature = "postgres", feature = "redis"))]
fn fresh_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    format!("lease_facade_{}_{nanos}", std::process::id())
}

/// `base` with `?namespace=name` (or `&namespace=name`) appended.
#[cfg(any(feature = "postgres", feature = "redis"))]
fn with_namespace(base: &str, name: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}namespace={name}")
}

/// Whether `order-42`, admitted through the URL, is found by a direct connection.
#[cfg(any(feature = "postgres", feature = "redis"))]
async fn has_order_42(direct: &impl lease::ExecutionClient) -> lease::Result<bool> {
    let id = ExecutionId::new("order-42").expect("id");
    Ok(direct.get(&id).await?.is_some())
}

/// Opens `?namespace=<fresh schema>` on the test server (`LEASE_POSTGRES_URL`, else the
/// local default; unreachable fails), checks the execution landed in that schema, and
/// drops the schema.
#[cfg(feature = "postgres")]
#[tokio::test]
async fn postgres_url_opens_the_schema_named_by_namespace() {
    use lease::postgres::{PostgresBackend, PostgresConfig};

    let (base, schema) = (lease_testserver::postgres_url(), fresh_name());
    admit_and_read(&with_namespace(&base, &schema)).await;
    let direct = PostgresBackend::connect(PostgresConfig::new(&base).schema(&schema))
        .await
        .expect("connect");
    let found = has_order_42(&direct).await;
    direct.drop_schema().await.expect("drop schema");
    assert!(found.expect("get"), "execution not in schema {schema}");
}

/// Opens `?namespace=<fresh namespace>` on the test server (`LEASE_REDIS_URL`, else the
/// local default; unreachable fails), checks the execution landed in that namespace, and
/// deletes the namespace.
#[cfg(feature = "redis")]
#[tokio::test]
async fn redis_url_opens_the_namespace_named_by_namespace() {
    use lease::redis::{RedisBackend, RedisConfig};

    let (base, namespace) = (lease_testserver::redis_url(), fresh_name());
    admit_and_read(&with_namespace(&base, &namespace)).await;
    let direct = RedisBackend::connect(RedisConfig::new(&base).namespace(&namespace))
        .await
        .expect("connect");
    let found = has_order_42(&direct).await;
    direct.delete_namespace().await.expect("delete namespace");
    assert!(
        found.expect("get"),
        "execution not in namespace {namespace}"
    );
}

#[cfg(feature = "memory")]
#[tokio::test]
async fn memory_url_opens_the_reference_backend() {
    admit_and_read("memory:").await;
}

#[cfg(not(feature = "memory"))]
#[tokio::test]
async fn memory_url_without_its_feature_is_a_typed_error() {
    let err = lease::open("memory:").await.err().expect("feature off");
    assert!(matches!(
        err,
        OpenError::FeatureDisabled {
            feature: "memory",
            ..
        }
    ));
}

#[cfg(not(feature = "postgres"))]
#[tokio::test]
async fn postgres_url_without_its_feature_is_a_typed_error() {
    let err = lease::open(lease_testserver::DEFAULT_POSTGRES_URL)
        .await
        .err()
        .expect("feature off");
    assert!(
        matches!(
            err,
            OpenError::FeatureDisabled {
                feature: "postgres",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("enable feature \"postgres\""),
        "{err}"
    );
}

#[cfg(not(feature = "redis"))]
#[tokio::test]
async fn redis_url_without_its_feature_is_a_typed_error() {
    let err = lease::open(lease_testserver::DEFAULT_REDIS_URL)
        .await
        .err()
        .expect("feature off");
    assert!(
        matches!(
            err,
            OpenError::FeatureDisabled {
                feature: "redis",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_and_malformed_urls_are_typed_errors() {
    let err = lease::open("mysql://localhost/test")
        .await
        .err()
        .expect("unknown");
    assert!(matches!(err, OpenError::UnknownScheme { ref scheme } if scheme == "mysql"));
    let err = lease::open("leases.db").await.err().expect("no scheme");
    assert!(matches!(err, OpenError::InvalidUrl { .. }));
    let err = lease::open("sqlite:").await.err().expect("no path");
    assert!(matches!(err, OpenError::InvalidUrl { .. }));
}
