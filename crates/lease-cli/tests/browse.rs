//! `lease list` and the rate and ordering columns of `lease limits`, as a process against
//! each backend (SQLite in a temporary file; PostgreSQL and Redis in a fresh schema or
//! namespace, removed afterwards). A backend that answers `Unsupported` for a capability
//! (read directly first) must make the command fail with one line naming the backend and
//! exit status 1; one that has it must list and change exactly what was stored.

mod common;

use std::sync::Arc;

use lease::postgres::{PostgresBackend, PostgresConfig};
use lease::redis::{RedisBackend, RedisConfig};
use lease::{
    Admission, ConcurrencyKey, ExecutionFilter, ExecutionId, LeaseBackend, LeaseError, WorkflowName,
};

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

/// `common::fill`'s five executions, then three of workflow `report`, two of them with key
/// `k1`: admitted in this order, so listed newest first the other way round.
async fn fill(b: &Arc<dyn LeaseBackend>) {
    common::fill(b).await;
    for (name, key) in [
        ("rep-1", Some("k1")),
        ("rep-2", None),
        ("rep-3", Some("k1")),
    ] {
        let mut admission =
            Admission::new(id(name)).workflow(WorkflowName::new("report").expect("workflow"));
        if let Some(key) = key {
            admission = admission.concurrency_key(ConcurrencyKey::new(key).expect("key"));
        }
        b.admit(&admission).await.expect("admit");
    }
}

/// The ids of a `list --json` answer, in order.
fn ids(listed: &serde_json::Value) -> Vec<String> {
    listed["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .map(|r| r["id"].as_str().expect("an id").to_owned())
        .collect()
}

/// `list` where the backend lists executions, else its one-line refusal naming the backend.
async fn check_list(url: &str, b: &Arc<dyn LeaseBackend>) {
    match b
        .list_executions(&ExecutionFilter::default(), None, 1)
        .await
    {
        Err(LeaseError::Unsupported { .. }) => {
            let want = format!(
                "the {} backend does not support listing executions",
                b.backend_name()
            );
            common::on(url, &["list"]).await.assert_error(1, &want);
        }
        other => {
            other.expect("a page");
            check_listing(url).await;
        }
    }
}

async fn check_listing(url: &str) {
    let all = common::on(url, &["list", "--json"]).await.json();
    let newest_first = [
        "rep-3", "rep-2", "rep-1", "queued", "flaky", "busy", "bad-1", "done-1",
    ];
    assert_eq!(ids(&all), newest_first, "{all}");
    assert!(all["next"].is_null(), "{all}");
    check_pages(url, &newest_first).await;
    let run = |args: &'static [&'static str]| async move {
        let mut all = vec!["list", "--json"];
        all.extend_from_slice(args);
        ids(&common::on(url, &all).await.json())
    };
    assert_eq!(run(&["--status", "completed"]).await, ["done-1"]);
    assert_eq!(
        run(&["--workflow", "report"]).await,
        ["rep-3", "rep-2", "rep-1"]
    );
    assert_eq!(run(&["--key", "k1"]).await, ["rep-3", "rep-1"]);
    let both = run(&[
        "--workflow",
        "report",
        "--key",
        "k1",
        "--status",
        "admitted",
    ])
    .await;
    assert_eq!(both, ["rep-3", "rep-1"]);
    assert!(run(&["--status", "dead"]).await.is_empty());
    let table = common::on(url, &["list", "--status", "running"]).await;
    let lines = table.words();
    assert_eq!(lines[0][..3], ["ID", "STATUS", "WORKFLOW"], "{table:?}");
    assert_eq!(lines[1][..2], ["busy", "running"], "{table:?}");
    assert_eq!(lines.len(), 2, "no next page: {table:?}");
    let none = common::on(url, &["list", "--workflow", "nope"]).await;
    assert_eq!(none.stdout, "no executions\n", "{none:?}");
    common::on(url, &["list", "--after", "not-a-cursor-of-this-store"])
        .await
        .assert_error(2, "cursor");
}

/// `--limit 3` pages through everything once, in order, each page naming the next.
async fn check_pages(url: &str, newest_first: &[&str]) {
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..newest_first.len() {
        let mut args = vec!["list", "--json", "--limit", "3"];
        if let Some(cursor) = &after {
            args.extend(["--after", cursor.as_str()]);
        }
        let page = common::on(url, &args).await.json();
        seen.extend(ids(&page));
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, newest_first);
    let first = common::on(url, &["list", "--limit", "3"]).await;
    let last = first.stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("more: lease list --limit 3 --after "),
        "{first:?}"
    );
}

async fn check_limits(url: &str, b: &Arc<dyn LeaseBackend>) {
    common::on(url, &["limits", "--rate", "10/1s"])
        .await
        .assert_error(2, "--key");
    common::on(url, &["limits", "--key", "k1", "--rate", "0/1s"])
        .await
        .assert_error(2, "--rate");
    common::on(url, &["limits", "--key", "k1", "--ordered", "--unordered"])
        .await
        .assert_error(2, "--unordered");
    let set = common::on(url, &["limits", "--key", "k1", "--set", "2"]).await;
    assert_eq!(
        set.words()[2],
        ["k1", "2", rate_cell(b).await, order_cell(b).await]
    );
    match b.rate_limits().await {
        Err(LeaseError::Unsupported { .. }) => {
            let want = format!(
                "the {} backend does not support rate limits",
                b.backend_name()
            );
            common::on(url, &["limits", "--key", "k1", "--rate", "10/1s"])
                .await
                .assert_error(1, &want);
            let json = common::on(url, &["limits", "--json"]).await.json();
            assert!(json["rate_limits"].is_null(), "{json}");
        }
        other => {
            other.expect("rate limits");
            check_rates(url).await;
        }
    }
    match b.key_ordering().await {
        Err(LeaseError::Unsupported { .. }) => {
            let want = format!(
                "the {} backend does not support ordered keys",
                b.backend_name()
            );
            common::on(url, &["limits", "--default", "--ordered"])
                .await
                .assert_error(1, &want);
        }
        other => {
            other.expect("key ordering");
            check_ordering(url).await;
        }
    }
}

/// What the RATE and ORDERED columns show for a key without a policy of its own.
async fn rate_cell(b: &Arc<dyn LeaseBackend>) -> &'static str {
    match b.rate_limits().await {
        Err(LeaseError::Unsupported { .. }) => "unsupported",
        _ => "-",
    }
}

async fn order_cell(b: &Arc<dyn LeaseBackend>) -> &'static str {
    match b.key_ordering().await {
        Err(LeaseError::Unsupported { .. }) => "unsupported",
        _ => "-",
    }
}

async fn check_rates(url: &str) {
    let set = common::on(url, &["limits", "--key", "k2", "--rate", "10/1s"]).await;
    assert!(
        set.words().contains(&vec!["k2", "-", "10/1s", "-"]),
        "{set:?}"
    );
    let default = common::on(url, &["limits", "--default", "--rate", "5/min", "--json"])
        .await
        .json();
    assert_eq!(
        default["rate_limits"]["default"],
        serde_json::json!({"starts": 5, "period_ms": 60_000})
    );
    assert_eq!(default["rate_limits"]["keys"][0][0], "k2", "{default}");
    let removed = common::on(url, &["limits", "--key", "k2", "--remove-rate", "--json"])
        .await
        .json();
    assert_eq!(removed["rate_limits"]["keys"], serde_json::json!([]));
    let table = common::on(url, &["limits"]).await;
    assert_eq!(
        table.words()[1][..3],
        ["(default)", "unlimited", "5/1m"],
        "{table:?}"
    );
}

async fn check_ordering(url: &str) {
    let marked = common::on(url, &["limits", "--key", "k3", "--ordered"]).await;
    let words = marked.words();
    let row = words.iter().find(|w| w[0] == "k3").expect("a k3 row");
    assert_eq!(row[3], "yes", "{marked:?}");
    let json = common::on(url, &["limits", "--key", "k3", "--unordered", "--json"])
        .await
        .json();
    assert_eq!(json["key_ordering"]["keys"], serde_json::json!([]));
    assert_eq!(json["key_ordering"]["default"], false);
}

async fn check_all(url: String, b: Arc<dyn LeaseBackend>) {
    fill(&b).await;
    check_list(&url, &b).await;
    check_limits(&url, &b).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sqlite_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    check_all(url, backend).await;
}

/// Runs the checks in a task of their own, so a failure is returned and the caller cleans up.
async fn checks_on(url: String) -> Result<(), tokio::task::JoinError> {
    let backend = lease::open(&url).await.expect("open");
    tokio::spawn(check_all(url, backend)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_schema() {
    let base = lease_testserver::postgres_url();
    let schema = common::unique("pg_browse");
    let checked = checks_on(common::with_namespace(&base, &schema)).await;
    let direct = PostgresBackend::connect(PostgresConfig::new(&base).schema(&schema))
        .await
        .expect("connect");
    direct.drop_schema().await.expect("drop schema");
    checked.expect("the checks");
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_namespace() {
    let base = lease_testserver::redis_url();
    let namespace = common::unique("redis_browse");
    let checked = checks_on(common::with_namespace(&base, &namespace)).await;
    let direct = RedisBackend::connect(RedisConfig::new(&base).namespace(&namespace))
        .await
        .expect("connect");
    direct.delete_namespace().await.expect("delete namespace");
    checked.expect("the checks");
}
