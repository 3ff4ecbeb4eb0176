//! Without an injected clock, time is the database's `clock_timestamp()`: one clock for
//! every process sharing the schema, so a process whose own clock runs fast cannot take
//! live leases early.

mod common;

use lease_core::ExecutionClientExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lease_core::{
    Admission, ClaimRequest, ExecutionClient, ExecutionId, ExecutionStatus, Fenced, Timestamp,
};
use lease_postgres::{PostgresBackend, PostgresConfig};

fn system_now() -> i64 {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    i64::try_from(ms).expect("fits")
}

#[test]
fn database_clock_drives_claims_and_renewals() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let schema = common::fresh_schema();
    let config = PostgresConfig::new(common::url())
        .schema(schema.clone())
        .max_connections(2);
    rt.block_on(common::cleaning_up(schema, async move {
        let backend = PostgresBackend::connect(config).await.expect("connect");
        let peer = backend.peer().await.expect("peer");

        // The database and this machine share a clock here (same host): within a second.
        let db_now = backend.now().await.expect("now").as_millis();
        assert!(
            (db_now - system_now()).abs() < 1_000,
            "db {db_now} vs system"
        );
        // The clock moves: clock_timestamp(), not the transaction's now().
        let later = peer.now().await.expect("now").as_millis();
        assert!(later >= db_now);

        let id = ExecutionId::new("clocked").expect("id");
        let admitted = backend
            .admit(&Admission::new(id.clone()))
            .await
            .expect("admit");
        let due = admitted.due_at.expect("due").as_millis();
        assert!((due - db_now).abs() < 1_000);

        // A caller whose clock runs an hour fast cannot claim with its own time: the claim
        // uses min(request.now, database now).
        let lease_ms = 60_000;
        let fast = Timestamp::from_millis(system_now() + 3_600_000);
        let leases = peer
            .claim_due(ClaimRequest {
                now: fast,
                limit: 1,
                duration: Duration::from_millis(lease_ms as u64),
            })
            .await
            .expect("claim");
        assert_eq!(leases.len(), 1);
        let expires = leases[0].expires_at.as_millis();
        assert!(
            expires - system_now() <= lease_ms + 1_000,
            "expiry {expires} derived from the fast caller's clock"
        );
        // A live lease is not claimable by the fast caller either.
        let again = backend
            .claim_due(ClaimRequest {
                now: fast,
                limit: 1,
                duration: Duration::from_millis(lease_ms as u64),
            })
            .await
            .expect("claim");
        assert!(again.is_empty());

        // Renewal extends from the database's now.
        let before = system_now();
        let renewed = backend
            .renew(&leases[0], Duration::from_secs(120))
            .await
            .expect("renew");
        let Fenced::Accepted(renewed) = renewed else {
            panic!("renewal lost: {renewed:?}");
        };
        let ext = renewed.expires_at.as_millis();
        assert!(
            ext >= before + 119_000 && ext <= system_now() + 121_000,
            "{ext}"
        );
        let record = backend.get(&id).await.expect("get").expect("record");
        assert_eq!(record.status, ExecutionStatus::Running);
        assert_eq!(record.lease_expires_at, Some(renewed.expires_at));

        backend.drop_schema().await.expect("drop");
        backend.close().await;
        peer.close().await;
    }));
}
