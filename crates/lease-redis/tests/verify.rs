//! The verifying connect (`RedisConfig::migrate(false)`, what read-only tools use): a
//! namespace of an older key layout, or none, is refused and left as it was; after a
//! migrating connect it opens.

mod common;

use lease_core::{Admission, ExecutionClient, ExecutionId, LeaseError};
use lease_redis::RedisBackend;

/// Every key whose name starts with the namespace's prefixes, so nothing of it is missed
/// whether or not it is partitioned.
async fn keys_of(namespace: &str) -> Vec<String> {
    let mut conn = common::admin().await;
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("lease:{{{namespace}*"))
        .query_async(&mut conn)
        .await
        .expect("keys");
    keys.sort();
    keys
}

#[tokio::test]
async fn a_verifying_connect_to_a_missing_namespace_writes_nothing() {
    let namespace = common::random_namespace();
    let _cleanup = common::Cleanup(format!("lease:{{{namespace}}}:"));
    let refused = RedisBackend::connect(common::config(&namespace).migrate(false))
        .await
        .err();
    assert!(
        matches!(
            refused,
            Some(LeaseError::SchemaMismatch { found: None, .. })
        ),
        "{refused:?}"
    );
    assert_eq!(keys_of(&namespace).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_verifying_connect_refuses_an_older_layout_until_it_is_migrated() {
    let namespace = common::random_namespace();
    let b = RedisBackend::connect(common::config(&namespace))
        .await
        .expect("connect");
    let _cleanup = common::Cleanup::of(&b);
    b.admit(&Admission::new(ExecutionId::new("a").expect("id")))
        .await
        .expect("admit");
    let meta = format!("{}meta", b.key_prefix());
    let mut admin = common::admin().await;
    let () = redis::cmd("HSET")
        .arg(&meta)
        .arg("layout")
        .arg("1")
        .query_async(&mut admin)
        .await
        .expect("back to layout 1");
    let before = common::snapshot(&b).await;

    let refused = RedisBackend::connect(common::config(&namespace).migrate(false))
        .await
        .err();
    assert!(
        matches!(
            refused,
            Some(LeaseError::SchemaMismatch { found: Some(1), expected, .. }) if expected > 1
        ),
        "{refused:?}"
    );
    assert_eq!(common::snapshot(&b).await, before, "the namespace changed");

    RedisBackend::connect(common::config(&namespace))
        .await
        .expect("a migrating connect upgrades it");
    let verified = RedisBackend::connect(common::config(&namespace).migrate(false))
        .await
        .expect("then it verifies");
    assert!(
        verified
            .get(&ExecutionId::new("a").expect("id"))
            .await
            .expect("read")
            .is_some()
    );
}
