//! `lease ui`'s activity page over a real socket, on a SQLite file: the charts count what
//! happened after the console started (known admissions, completions, a failure and two
//! takeovers), from the status counts it samples.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lease::WorkflowRunOutcome;
use lease::{Admission, ClaimRequest, ExecutionClientExt as _, ExecutionId, Json, LeaseBackend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The longest the charts may take to show what was done (samples every second).
const DEADLINE: Duration = Duration::from_secs(30);

/// `GET path` with `headers`; the status line and the whole answer.
async fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (String, String) {
    let authority = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(authority).await.expect("connect");
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(common::RUN_LIMIT, stream.read_to_end(&mut raw))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.lines().next().unwrap_or_default().to_owned();
    (status, text)
}

/// How many samples the page says it drew from.
fn samples(page: &str) -> u32 {
    let at = page.find("data-samples=\"").expect("a sample count") + 14;
    let digits: String = page[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().expect("a number")
}

/// Trades the printed token for a session cookie (`name=value`).
async fn session(console: &common::Console) -> String {
    let path = console.url.trim_start_matches(&console.base).to_owned();
    let (status, answer) = get(&console.base, &path, &[]).await;
    assert!(status.contains(" 303 "), "{answer}");
    let at = answer
        .to_ascii_lowercase()
        .find("set-cookie: ")
        .expect("a cookie")
        + 12;
    let line = answer[at..].lines().next().unwrap_or_default();
    line.split(';').next().unwrap_or_default().to_owned()
}

/// Admits `ids`, claims them and acknowledges each with `outcome` (nothing else is due).
async fn run(b: &Arc<dyn LeaseBackend>, ids: &[&str], outcome: &WorkflowRunOutcome) {
    for id in ids {
        let id = ExecutionId::new(*id).expect("id");
        b.admit(&Admission::new(id)).await.expect("admit");
    }
    let leases = b
        .claim_due(ClaimRequest {
            now: b.now().await.expect("now"),
            limit: ids.len(),
            duration: Duration::from_secs(60),
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), ids.len(), "{leases:?}");
    for lease in &leases {
        assert!(!b.acknowledge(lease, outcome).await.expect("ack").is_lost());
    }
}

/// Admits `ids`, claims them with a short lease, lets it run out and claims them again (two
/// takeovers, polled with a deadline: the lease's expiry and the redelivery delay pass on
/// the real clock), then completes them (nothing else is due meanwhile).
async fn take_over(b: &Arc<dyn LeaseBackend>, ids: &[&str], outcome: &WorkflowRunOutcome) {
    for id in ids {
        let id = ExecutionId::new(*id).expect("id");
        b.admit(&Admission::new(id)).await.expect("admit");
    }
    let claim = |duration| async move {
        let request = ClaimRequest {
            now: b.now().await.expect("now"),
            limit: ids.len(),
            duration,
        };
        b.claim_due(request).await.expect("claim")
    };
    let first = claim(Duration::from_millis(100)).await;
    assert_eq!(first.len(), ids.len(), "{first:?}");
    let deadline = Instant::now() + DEADLINE;
    let mut taken = Vec::new();
    while taken.len() < ids.len() {
        assert!(Instant::now() < deadline, "never taken over: {taken:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        taken.extend(claim(Duration::from_secs(60)).await);
    }
    for lease in &taken {
        assert!(lease.token > first[0].token, "{lease:?}");
        assert!(!b.acknowledge(lease, outcome).await.expect("ack").is_lost());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_charts_count_what_happened_since_the_console_started() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let b = lease::open(&url).await.expect("open");
    let console = common::console(&url, &["--sample-every", "1s"], &[]).await;
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let (status, first) = get(&console.base, "/activity", &with).await;
    assert!(status.contains(" 200 "), "{first}");
    assert!(first.contains("id=\"chart-statuses\""), "{first}");
    assert!(first.contains("id=\"nav-activity\""), "{first}");
    // Act only after the first sample, so everything below is growth the charts must show.
    let deadline = Instant::now() + DEADLINE;
    while samples(&get(&console.base, "/activity", &with).await.1) == 0 {
        assert!(Instant::now() < deadline, "no first sample");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ok = WorkflowRunOutcome::Completed(Json::parse("test", "true").expect("json"));
    let bad = WorkflowRunOutcome::Failed(Json::parse("test", "\"no\"").expect("json"));
    run(&b, &["a-1", "a-2", "a-3"], &ok).await;
    run(&b, &["b-1"], &bad).await;
    take_over(&b, &["t-1", "t-2"], &ok).await;
    assert_eq!(b.status_counts().await.expect("counts").takeovers, 2);
    b.admit(&Admission::new(ExecutionId::new("c-1").expect("id")))
        .await
        .expect("admit");

    let want = [
        "Admitted per minute: 7 in the last hour",
        "Completed per minute: 5 in the last hour",
        "Failed per minute: 1 in the last hour",
        "Died (out of attempts) per minute: 0 in the last hour",
        "Taken over (lease expired) per minute: 2 in the last hour",
    ];
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (_, page) = get(&console.base, "/activity", &with).await;
        if want.iter().all(|w| page.contains(w)) {
            assert!(
                page.contains("data-status=\"running\" data-value=\"0\""),
                "{page}"
            );
            assert!(
                page.contains("data-status=\"admitted\" data-value=\"1\""),
                "{page}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the charts never showed {want:?}: {page}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sampling_interval_out_of_range_is_refused() {
    for bad in ["500ms", "2min", "soon"] {
        let run = common::lease(&["--url", "sqlite::memory:", "ui", "--sample-every", bad]).await;
        run.assert_error(2, "--sample-every");
    }
}
