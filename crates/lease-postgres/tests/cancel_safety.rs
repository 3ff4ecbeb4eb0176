//! A call cancelled while its transaction's `BEGIN` is in flight leaves no pooled
//! connection inside a transaction. sqlx 0.9.0 counts a transaction only once the reply to
//! `BEGIN` has arrived (transact-rs/sqlx#4393): a caller dropped in between (a delivery
//! cancelled at its deadline) used to return the connection to the pool inside a
//! transaction nobody rolls back, and the next borrower's statements (a claim) ran inside
//! it, reported success and were rolled back later. The backend runs those attempts
//! detached; this cancels store waiter registrations at every point up to their reply and
//! checks, on the pool's one connection, that the next statement runs in a transaction of
//! its own.

mod common;

use lease_core::{Admission, ExecutionClient, ExecutionId, StoreClient, StoreId, StoreKey};
use lease_postgres::{PostgresBackend, PostgresConfig};

/// Polls `fut` until it is done or `yields` scheduler turns have passed, then drops it.
async fn cancel_after<F: std::future::Future>(fut: F, yields: usize) -> bool {
    let mut fut = std::pin::pin!(fut);
    for _ in 0..yields {
        if futures::poll!(fut.as_mut()).is_ready() {
            return true;
        }
        tokio::task::yield_now().await;
    }
    false
}

/// True when the next statement on the pool runs outside any transaction left open:
/// `SAVEPOINT` is refused outside a transaction block and accepted inside one.
async fn pool_is_clean(b: &PostgresBackend) -> bool {
    match sqlx::raw_sql("SAVEPOINT cancel_probe")
        .execute(b.pool())
        .await
    {
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains("transaction block"), "probe: {text}");
            true
        }
        Ok(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_during_begin_leaves_no_connection_in_a_transaction() {
    let schema = common::fresh_schema();
    let config = PostgresConfig::new(common::url())
        .schema(schema.clone())
        .max_connections(1);
    common::cleaning_up(schema, async move {
        let b = PostgresBackend::connect(config).await.expect("connect");
        let waiter = ExecutionId::new("waiter").expect("id");
        b.admit(&Admission::new(waiter.clone()))
            .await
            .expect("admit");
        let store = StoreId::new("s").expect("store");
        let key = StoreKey::new("k").expect("key");
        b.get_or_create(&store, &[]).await.expect("store");
        let (mut cancelled, mut finished) = (0, 0);
        // Every turn up to 400, then doubling until one registration finishes: on a loaded
        // machine 400 turns can pass before the server answers once.
        let mut yields = 0usize;
        while yields < 400 || finished == 0 {
            assert!(
                yields < 1 << 24,
                "no registration finished within {yields} turns"
            );
            if cancel_after(b.watch_entry(&store, &key, &waiter), yields).await {
                finished += 1;
            } else {
                cancelled += 1;
            }
            assert!(
                pool_is_clean(&b).await,
                "after a registration cancelled at turn {yields}, the next statement ran \
                 inside a transaction left open"
            );
            yields = if yields < 400 { yields + 1 } else { yields * 2 };
        }
        assert!(
            cancelled > 0 && finished > 0,
            "cancelled {cancelled}, finished {finished}"
        );
    })
    .await;
}
