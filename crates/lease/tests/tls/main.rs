//! TLS through `lease::open` URLs, against real servers started here with
//! a CA and server certificate made at test time:
//!
//! - PostgreSQL: `sslmode=verify-full&sslrootcert=CA` connects to a cluster with `ssl=on`;
//!   the wrong CA, and `sslmode=require` against the same cluster with `ssl=off`, fail.
//! - Redis: `rediss://...?sslrootcert=CA` connects to redis-server's `--tls-port`; the wrong
//!   CA, and `rediss://` to its plain port, fail.
//!
//! Every failure is a typed [`LeaseError::Unavailable`] that arrives within [`BOUND`]: a TLS
//! problem never hangs a caller.

mod certs;
mod servers;

use std::time::{Duration, Instant};

use lease::{Admission, ExecutionId, LeaseError, OpenError};

use crate::certs::Pki;
use crate::servers::{Postgres, Redis};

/// The longest a refused TLS connection may take to fail: the backends' connect and acquire
/// timeouts are 5 s, and Redis tries three times (measured: about 15 s for a plain Redis
/// port behind `rediss://`, under 1 s for a certificate that does not verify).
const BOUND: Duration = Duration::from_secs(30);

/// Opens `url`, admits an execution and reads it back.
async fn open_and_use(url: &str) {
    let backend = lease::open(url)
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"));
    let id = ExecutionId::new("order-42").expect("id");
    backend
        .admit(&Admission::new(id.clone()))
        .await
        .expect("admit");
    assert!(backend.get(&id).await.expect("get").is_some());
}

/// Opening `url` fails with `Unavailable` within [`BOUND`]; returns the message.
async fn refused(url: &str) -> String {
    let started = Instant::now();
    let result = tokio::time::timeout(BOUND, lease::open(url))
        .await
        .unwrap_or_else(|_| panic!("open {url} hung for {BOUND:?}"));
    let err = match result {
        Ok(_) => panic!("open {url} connected"),
        Err(err) => err,
    };
    assert!(
        matches!(err, OpenError::Backend(LeaseError::Unavailable { .. })),
        "{url}: {err:?}"
    );
    let message = format!("{err}: {:?}", std::error::Error::source(&err));
    println!("{url}: refused in {:.2?}: {message}", started.elapsed());
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_verify_full_with_the_right_ca_only() {
    let (pg, pki) = Postgres::init();
    pg.start(None);
    open_and_use(&pg.url("sslmode=disable")).await;
    let plain = refused(&pg.url("sslmode=require")).await;
    assert!(plain.to_lowercase().contains("tls"), "{plain}");

    pg.start(Some(&pki));
    let verify = |ca: &std::path::Path| {
        pg.url(&format!(
            "sslmode=verify-full&sslrootcert={}&namespace=tls_check",
            ca.display()
        ))
    };
    open_and_use(&verify(&pki.ca)).await;
    refused(&verify(&pki.wrong_ca)).await;
    // The system roots do not hold the test CA either.
    refused(&pg.url("sslmode=verify-full&sslrootcert=system")).await;
    // No CA at all is libpq's ~/.postgresql/root.crt, or an error, as in libpq: a
    // `verify-full` with no CA to check against must not connect unverified.
    if !std::path::Path::new(&std::env::var("HOME").unwrap_or_default())
        .join(".postgresql/root.crt")
        .exists()
    {
        let err = lease::open(&pg.url("sslmode=verify-full"))
            .await
            .err()
            .expect("verify-full without a CA connected");
        assert!(
            matches!(err, OpenError::Backend(LeaseError::InvalidInput { .. })),
            "{err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_tls_with_the_right_ca_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pki = Pki::create(dir.path());
    let redis = Redis::start(&pki, dir);
    let tls_url = |port: u16, ca: &std::path::Path| {
        format!(
            "rediss://127.0.0.1:{port}/0?sslrootcert={}&namespace=tls_check",
            ca.display()
        )
    };
    open_and_use(&format!("redis://127.0.0.1:{}/0", redis.port)).await;
    open_and_use(&tls_url(redis.tls_port, &pki.ca)).await;
    refused(&tls_url(redis.tls_port, &pki.wrong_ca)).await;
    refused(&tls_url(redis.port, &pki.ca)).await;
    // The system roots do not hold the test CA either.
    refused(&format!("rediss://127.0.0.1:{}/0", redis.tls_port)).await;
}

#[tokio::test]
async fn redis_root_certificate_file_that_cannot_be_read_is_an_invalid_url() {
    let err = lease::open("rediss://127.0.0.1:1/0?sslrootcert=/nonexistent/ca.pem")
        .await
        .err()
        .expect("no file, no backend");
    assert!(
        matches!(&err, OpenError::InvalidUrl { reason, .. } if reason.contains("/nonexistent/ca.pem")),
        "{err:?}"
    );
}
