//! `lease::open_with` and `lease::destroy`: one way to open a store with options (namespace,
//! policy, clock, pool size) on every backend, the concrete handle beside the shared one,
//! typed errors for options that contradict the URL, and removal of what a URL names.

#![cfg(all(
    feature = "sqlite",
    feature = "postgres",
    feature = "redis",
    feature = "memory"
))]

use std::sync::Arc;
use std::time::Duration;

use lease::{
    Admission, Backend, ClaimRequest, ExecutionId, ManualClock, OpenError, OpenOptions,
    RedeliveryPolicy, Timestamp,
};

fn fresh(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// Every backend's URL, with a fresh namespace each; the temp dir holds the SQLite file.
fn urls(dir: &tempfile::TempDir) -> Vec<(String, String)> {
    vec![
        (
            format!("sqlite:{}", dir.path().join("open_with.db").display()),
            fresh("ow_sqlite"),
        ),
        (lease_testserver::postgres_url(), fresh("ow_postgres")),
        (lease_testserver::redis_url(), fresh("ow_redis")),
    ]
}

/// The options reach the backend: its namespace, its clock; the concrete handle is the
/// backend the URL names; `destroy_with` removes what was admitted.
#[tokio::test]
async fn options_reach_every_backend_and_destroy_removes_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let start = Timestamp::from_millis(1_700_000_000_000);
    for (url, namespace) in urls(&dir) {
        let clock = Arc::new(ManualClock::new(start));
        let options = OpenOptions::new()
            .namespace(&namespace)
            .clock(clock.clone())
            .policy(
                RedeliveryPolicy::new(Duration::from_millis(10), 2, Duration::from_secs(1))
                    .expect("policy"),
            )
            .pool_size(2);
        let opened = lease::open_with(&url, &options).await.expect("open_with");
        assert_eq!(opened.namespace, namespace, "{url}");
        assert_eq!(
            opened.shared.namespace_name().as_deref(),
            Some(namespace.as_str()),
            "{url}"
        );
        assert_eq!(
            opened.shared.now().await.expect("now"),
            start,
            "{url}: the clock option"
        );
        let expected = opened.shared.backend_name();
        let concrete = match &opened.backend {
            Backend::Sqlite { path, .. } => {
                assert!(path.is_some(), "a file URL keeps its path");
                "sqlite"
            }
            Backend::Postgres(_) => "postgres",
            Backend::Redis(_) => "redis",
            _ => "other",
        };
        assert_eq!(concrete, expected, "{url}");
        let id = ExecutionId::new("order-42").expect("id");
        opened
            .shared
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        drop(opened);
        lease::destroy_with(&url, &OpenOptions::new().namespace(&namespace))
            .await
            .expect("destroy");
        let again = lease::open_with(&url, &OpenOptions::new().namespace(&namespace))
            .await
            .expect("reopen");
        assert!(
            again.shared.get(&id).await.expect("get").is_none(),
            "{url}: destroyed"
        );
        lease::destroy_with(&url, &OpenOptions::new().namespace(&namespace))
            .await
            .expect("destroy again");
    }
}

/// SQLite keeps a destroyed namespace's token counter: a holder from before the deletion
/// carries a token below every token of the namespace's next life.
#[tokio::test]
async fn sqlite_destroy_keeps_tokens_rising() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!(
        "sqlite:{}?namespace=orders",
        dir.path().join("t.db").display()
    );
    let id = ExecutionId::new("order-42").expect("id");
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let backend = lease::open(&url).await.expect("open");
        backend
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        let batch = backend
            .claim_due_with_horizon(ClaimRequest {
                now: Timestamp::MAX,
                limit: 1,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        tokens.push(batch.claimed[0].lease.token);
        drop(backend);
        lease::destroy(&url).await.expect("destroy");
    }
    assert!(tokens[1] > tokens[0], "{tokens:?}");
}

#[tokio::test]
async fn a_namespace_in_url_and_options_must_agree() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}?namespace=a", dir.path().join("n.db").display());
    let same = lease::open_with(&url, &OpenOptions::new().namespace("a")).await;
    assert!(same.is_ok(), "equal namespaces agree");
    let Err(e) = lease::open_with(&url, &OpenOptions::new().namespace("b")).await else {
        panic!("two namespaces opened");
    };
    assert!(matches!(e, OpenError::NamespaceConflict { .. }), "{e}");
}

#[tokio::test]
async fn shared_only_refuses_stores_of_this_process() {
    for url in ["sqlite::memory:", "memory:"] {
        let Err(e) = lease::open_with(url, &OpenOptions::new().shared_only(true)).await else {
            panic!("{url} opened as shared");
        };
        assert!(matches!(e, OpenError::NotShared { .. }), "{url}: {e}");
        assert!(
            lease::open_with(url, &OpenOptions::new()).await.is_ok(),
            "{url}"
        );
        lease::destroy(url)
            .await
            .expect("nothing durable to destroy");
    }
}

#[tokio::test]
async fn destroy_of_a_bad_url_is_a_typed_error() {
    let Err(e) = lease::destroy("mysql://u:hunter2@h/db").await else {
        panic!("destroyed an unknown scheme");
    };
    assert!(matches!(e, OpenError::UnknownScheme { .. }), "{e}");
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

/// Bad options are typed errors that open nothing: a PostgreSQL pool of 0 connections.
#[tokio::test]
async fn a_pool_of_zero_is_refused() {
    let url = lease_testserver::postgres_url();
    let options = OpenOptions::new().namespace(fresh("ow_pool")).pool_size(0);
    let Err(e) = lease::open_with(&url, &options).await else {
        panic!("a pool of 0 opened");
    };
    assert!(
        matches!(
            &e,
            OpenError::Backend(lease::LeaseError::InvalidInput { .. })
        ),
        "{e:?}"
    );
}

/// `OpenOptions::migrate(false)` on PostgreSQL: a schema that is not there is
/// `SchemaMismatch` with no version found, and is not created (a later verify still finds
/// none); after an ordinary open created it, the same options open it.
#[tokio::test(flavor = "multi_thread")]
async fn opening_without_migrating_verifies_the_postgres_schema() {
    let url = lease_testserver::postgres_url();
    let options = OpenOptions::new()
        .namespace(fresh("ow_verify"))
        .migrate(false);
    for _ in 0..2 {
        let err = lease::open_with(&url, &options).await.err();
        assert!(
            matches!(
                err,
                Some(OpenError::Backend(lease::LeaseError::SchemaMismatch {
                    found: None,
                    ..
                }))
            ),
            "{err:?}"
        );
    }
    let created = lease::open_with(&url, &options.clone().migrate(true))
        .await
        .expect("migrating open");
    let verified = lease::open_with(&url, &options).await.map(|_| ());
    lease::destroy_with(&url, &options.clone().migrate(true))
        .await
        .expect("destroy");
    drop(created);
    verified.expect("the current schema verifies");
}
