//! `lease dead`, `lease retry` and the last error in `failing` and `show`, as a process
//! against SQLite in a temporary file (the backend with attempt limits).

mod common;

use std::time::Duration;

use lease::{
    Admission, AttemptLimit, AttemptScope, ClaimRequest, ErrorNote, ExecutionClientExt,
    ExecutionId, ExecutionStatus, Release,
};

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_lists_and_retry_readmits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let b = lease::open(&url).await.expect("open");
    b.set_attempt_limit(
        &AttemptScope::Default,
        Some(AttemptLimit::new(1).expect("1")),
    )
    .await
    .expect("limit");
    for name in ["doomed", "alive"] {
        b.admit(&Admission::new(id(name))).await.expect("admit");
    }
    let leases = b
        .claim_due(ClaimRequest {
            now: b.now().await.expect("now"),
            limit: 10,
            duration: Duration::from_secs(300),
        })
        .await
        .expect("claim");
    let doomed = leases
        .iter()
        .find(|l| l.execution_id == id("doomed"))
        .expect("doomed claimed");
    let how = Release::Failed(ErrorNote::new("error", "card\ndeclined"));
    assert!(
        !b.release_with(doomed, &how)
            .await
            .expect("release")
            .is_lost()
    );

    let dead = common::on(&url, &["dead", "--json"]).await.json();
    assert_eq!(dead.as_array().map(Vec::len), Some(1), "{dead}");
    assert_eq!(dead[0]["id"], "doomed");
    assert_eq!(dead[0]["last_error"]["message"], "card\ndeclined");
    let table = common::on(&url, &["dead"]).await;
    assert_eq!(table.words()[1][..2], ["doomed", "1"], "{table:?}");
    assert!(table.stdout.contains("error: card declined"), "{table:?}");
    let failing = common::on(&url, &["failing"]).await;
    assert!(
        failing.stdout.contains("error: card declined"),
        "{failing:?}"
    );
    let shown = common::on(&url, &["show", "doomed"]).await;
    assert!(shown.stdout.contains("last error"), "{shown:?}");
    assert!(shown.stdout.contains("attempt 1"), "{shown:?}");

    common::on(&url, &["retry", "alive"])
        .await
        .assert_error(1, "not dead");
    common::on(&url, &["retry", "doomed", "--input", "{oops"])
        .await
        .assert_error(2, "--input");
    let retried = common::on(&url, &["retry", "doomed", "--input", r#"{"card":"new"}"#]).await;
    assert_eq!(retried.code, Some(0), "{retried:?}");
    assert_eq!(retried.stdout, "re-admitted doomed\n");
    let record = b.get(&id("doomed")).await.expect("get").expect("record");
    assert_eq!(record.status, ExecutionStatus::Admitted);
    assert_eq!(record.unacknowledged_deliveries, 0);
    assert_eq!(
        record.input.map(|i| i.to_string()),
        Some(r#"{"card":"new"}"#.into())
    );
    assert_eq!(
        common::on(&url, &["dead"]).await.stdout,
        "no dead executions\n"
    );
}
