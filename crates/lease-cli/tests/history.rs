//! `lease limits --workflow W --redelivery ...` and `lease show`'s delivery history, as a
//! process: on the memory reference (one invocation sets and lists, its store lives as
//! long as the process) and on a SQLite file. Where the backend answers `Unsupported`, the
//! command reports it as a line or a typed failure; the same test checks the full output
//! once the backend keeps the data.

mod common;

use std::time::Duration;

use lease::{Admission, ClaimRequest, ExecutionClientExt, ExecutionId, LeaseBackend, LeaseError};

#[tokio::test(flavor = "multi_thread")]
async fn memory_sets_lists_and_removes_a_workflows_redelivery_policy() {
    let set = common::on(
        "memory:",
        &[
            "limits",
            "--workflow",
            "w",
            "--redelivery",
            "1s,2,5m",
            "--json",
        ],
    )
    .await
    .json();
    let want =
        serde_json::json!([{"workflow": "w", "base_ms": 1000, "factor": 2, "cap_ms": 300000}]);
    assert_eq!(set["redelivery_policies"], want, "{set}");
    let table = common::on(
        "memory:",
        &["limits", "--workflow", "w", "--redelivery", "250ms,3,1m"],
    )
    .await;
    let lines = table.words();
    assert!(lines.contains(&vec!["w", "250ms,3,1m"]), "{table:?}");
    let removed = common::on(
        "memory:",
        &["limits", "--workflow", "w", "--remove-redelivery", "--json"],
    )
    .await
    .json();
    assert_eq!(removed["redelivery_policies"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_redelivery_policy_is_a_usage_error() {
    for bad in ["1s,2", "0s,2,1m", "1s,0,1m", "2m,2,1m", "1s,x,1m"] {
        let run = common::on(
            "memory:",
            &["limits", "--workflow", "w", "--redelivery", bad],
        )
        .await;
        assert_eq!(run.code, Some(2), "{bad}: {run:?}");
    }
    common::on("memory:", &["limits", "--redelivery", "1s,2,1m"])
        .await
        .assert_error(2, "--workflow");
}

/// A claim whose lease expires (a short lease, polled with a deadline), then a second claim:
/// `show` lists two deliveries, the first expired and the second marked as its takeover.
#[tokio::test(flavor = "multi_thread")]
async fn sqlite_show_lists_a_takeover() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let b = lease::open(&url).await.expect("open");
    let id = ExecutionId::new("taken").expect("id");
    take_over(&*b, &id).await;
    let shown = common::on(&url, &["show", "taken", "--json"]).await.json();
    let table = common::on(&url, &["show", "taken"]).await;
    let policies = common::on(
        &url,
        &[
            "limits",
            "--workflow",
            "w",
            "--redelivery",
            "1s,2,5m",
            "--json",
        ],
    )
    .await;
    match b.deliveries(&id).await {
        Err(LeaseError::Unsupported { .. }) => {
            assert_eq!(shown["deliveries"], serde_json::Value::Null);
            assert!(
                table.stdout.contains("keeps no delivery history"),
                "{table:?}"
            );
        }
        Ok(_) => {
            let d = &shown["deliveries"]["deliveries"];
            assert_eq!(d.as_array().map(Vec::len), Some(2), "{shown}");
            assert_eq!(d[0]["end"], "expired");
            assert_eq!(d[1]["takeover"], true);
            assert!(table.stdout.contains("takeover of"), "{table:?}");
        }
        Err(e) => panic!("deliveries: {e}"),
    }
    match b.redelivery_policies().await {
        Err(LeaseError::Unsupported { .. }) => {
            policies.assert_error(1, "does not support workflow redelivery")
        }
        Ok(_) => assert_eq!(policies.json()["redelivery_policies"][0]["workflow"], "w"),
        Err(e) => panic!("redelivery_policies: {e}"),
    }
}

/// Claims `id` with a short lease, waits (backend clock, deadline) past its expiry, claims
/// it again.
pub async fn take_over(b: &dyn LeaseBackend, id: &ExecutionId) {
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    let claim = |d| async move {
        let now = b.now().await.expect("now");
        b.claim_due(ClaimRequest {
            now,
            limit: 1,
            duration: d,
        })
        .await
        .expect("claim")
    };
    assert_eq!(claim(Duration::from_millis(50)).await.len(), 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if !claim(Duration::from_secs(300)).await.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no takeover within 10 s"
        );
        tokio::task::yield_now().await;
    }
}
