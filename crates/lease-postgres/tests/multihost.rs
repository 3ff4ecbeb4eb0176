//! Multi-host URLs, so a client follows a failover to the new primary:
//! `postgres://u@h1:p1,h2:p2/db?target_session_attrs=...`, which sqlx alone does not parse.
//! The failover itself (a primary stopped, its standby promoted) is measured by the torture
//! row (`crates/torture/tests/failover.rs`); here a dead first host and the attribute
//! checks run against the one test server.

mod common;

use lease_core::ExecutionClientExt;
use std::time::{Duration, Instant};

use lease_core::{
    Admission, ClaimRequest, Clock, ExecutionClient, ExecutionId, ManualClock, RedeliveryPolicy,
};
use lease_postgres::{PostgresBackend, PostgresConfig};

/// The test URL with `extra` hosts put before its own, and `query` appended.
fn with_hosts_before(extra: &[String], query: &str) -> String {
    let url = common::url();
    let (scheme, rest) = url.split_once("://").expect("scheme");
    let (userinfo, hostpart) = match rest.rfind('@') {
        Some(at) => (&rest[..=at], &rest[at + 1..]),
        None => ("", rest),
    };
    let sep = if hostpart.contains('?') { '&' } else { '?' };
    format!(
        "{scheme}://{userinfo}{},{hostpart}{}",
        extra.join(","),
        if query.is_empty() {
            String::new()
        } else {
            format!("{sep}{query}")
        }
    )
}

/// A loopback port nothing listens on (bound, then closed).
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

async fn open(url: String) -> (PostgresBackend, String, ManualClock) {
    let clock = ManualClock::starting_now();
    let schema = common::fresh_schema();
    let config = PostgresConfig::new(url)
        .schema(schema.clone())
        .clock(std::sync::Arc::new(clock.clone()))
        .policy(RedeliveryPolicy::default())
        .max_connections(2);
    (
        PostgresBackend::connect(config).await.expect("connect"),
        schema,
        clock,
    )
}

#[tokio::test]
async fn a_dead_first_host_fails_over_to_the_next() {
    let url = with_hosts_before(
        &[format!("127.0.0.1:{}", dead_port())],
        "target_session_attrs=read-write",
    );
    let started = Instant::now();
    let (backend, schema, clock) = open(url).await;
    let body = async move {
        let id = ExecutionId::new("multihost-1").expect("id");
        backend
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        let leases = backend
            .claim_due(ClaimRequest {
                now: clock.now(),
                limit: 1,
                duration: Duration::from_secs(30),
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 1);
        assert!(
            backend
                .renew(&leases[0], Duration::from_secs(30))
                .await
                .is_ok(),
            "renew on the host that took over"
        );
    };
    common::cleaning_up(schema, body).await;
    // The dead host refuses at once; the probe runs after 300 ms, far below the 5 s
    // acquire timeout.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn unsupported_session_attrs_are_invalid_input() {
    let url = with_hosts_before(&["127.0.0.1:1".to_owned()], "target_session_attrs=standby");
    let err = PostgresBackend::connect(PostgresConfig::new(url))
        .await
        .expect_err("standby cannot hold leases");
    assert!(
        matches!(err, lease_core::LeaseError::InvalidInput { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_single_host_with_read_write_attrs_connects_to_a_primary() {
    let url = common::url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let (backend, schema, _clock) = open(format!("{url}{sep}target_session_attrs=primary")).await;
    common::cleaning_up(schema, async move {
        let id = ExecutionId::new("multihost-2").expect("id");
        backend.admit(&Admission::new(id)).await.expect("admit");
    })
    .await;
}
