//! `lease::open`: the backend is chosen by URL scheme; a scheme whose feature is off, or an
//! unknown one, is a typed error.

use lease::OpenError;
#[cfg(any(feature = "sqlite", feature = "memory"))]
use lease::{Admission, ExecutionId, ExecutionStatus};

#[cfg(any(feature = "sqlite", feature = "memory"))]
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
