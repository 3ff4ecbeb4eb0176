//! Runs the `lease` binary as a process, and the store every backend's test fills.

#![allow(dead_code, missing_docs)]

use lease::ExecutionClientExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use lease::{
    Admission, ClaimRequest, ExecutionId, ExecutionLease, Json, LeaseBackend, StepKey, StepWrite,
    WorkflowRunOutcome,
};

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The stdout as JSON (panics with the run on anything else).
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.code, Some(0), "{self:?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    /// The stdout of a successful run as lines of whitespace-separated words (a table).
    pub fn words(&self) -> Vec<Vec<&str>> {
        assert_eq!(self.code, Some(0), "{self:?}");
        self.stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect()
    }

    /// Asserts a failure with `code` and one error line containing `text`, nothing on stdout.
    pub fn assert_error(&self, code: i32, text: &str) {
        assert_eq!(self.code, Some(code), "{self:?}");
        assert!(self.stdout.is_empty(), "{self:?}");
        assert_eq!(self.stderr.lines().count(), 1, "one line: {self:?}");
        assert!(self.stderr.starts_with("lease: error: "), "{self:?}");
        assert!(self.stderr.contains(text), "{text:?} not in {self:?}");
    }
}

/// Longest any run may take: a hang is a failure, not a stuck test.
pub const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Runs `lease ARGS` (with no `LEASE_URL` from the environment) to its end.
pub async fn lease(args: &[&str]) -> Run {
    lease_with_env(args, None).await
}

/// Runs `lease ARGS` with `LEASE_URL` set to `url` (or removed) to its end.
pub async fn lease_with_env(args: &[&str], url: Option<&str>) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lease"));
    match url {
        Some(url) => command.env("LEASE_URL", url),
        None => command.env_remove("LEASE_URL"),
    };
    let child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn lease");
    let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("lease {args:?} ran past {RUN_LIMIT:?}"))
        .expect("wait for lease");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `lease --url URL ARGS`.
pub async fn on(url: &str, args: &[&str]) -> Run {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    lease(&all).await
}

fn id(s: &str) -> ExecutionId {
    ExecutionId::new(s).expect("id")
}

async fn claim(b: &dyn LeaseBackend, want: &str) -> ExecutionLease {
    let leases = b
        .claim_due(ClaimRequest {
            now: b.now().await.expect("now"),
            limit: 10,
            duration: Duration::from_secs(300),
        })
        .await
        .expect("claim");
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].execution_id.as_str(), want);
    leases.into_iter().next().expect("one lease")
}

/// Fills a store: `done-1` completed with steps `charge` (attempt 1), `email` and `ship`, `bad-1` failed, `busy` running,
/// `flaky` released once (admitted, one unacknowledged delivery), `queued` admitted.
pub async fn fill(b: &Arc<dyn LeaseBackend>) {
    let b = &**b;
    let json = |t: &str| Json::parse("test", t).expect("json");
    b.admit(&Admission::new(id("done-1"))).await.expect("admit");
    let lease = claim(b, "done-1").await;
    let charge = StepWrite {
        step_key: StepKey::new("charge").expect("key"),
        step_attempt: 1,
        done: true,
        response: json(r#"{"receipt":"r-1"}"#),
    };
    assert!(!b.write_step(&lease, &charge).await.expect("step").is_lost());
    for key in ["ship", "email"] {
        let step = StepWrite {
            step_key: StepKey::new(key).expect("key"),
            step_attempt: 0,
            ..charge.clone()
        };
        assert!(!b.write_step(&lease, &step).await.expect("step").is_lost());
    }
    let done = WorkflowRunOutcome::Completed(json("true"));
    assert!(!b.acknowledge(&lease, &done).await.expect("ack").is_lost());
    b.admit(&Admission::new(id("bad-1"))).await.expect("admit");
    let lease = claim(b, "bad-1").await;
    let failed = WorkflowRunOutcome::Failed(json(r#""card declined""#));
    assert!(!b.acknowledge(&lease, &failed).await.expect("ack").is_lost());
    b.admit(&Admission::new(id("busy"))).await.expect("admit");
    claim(b, "busy").await;
    b.admit(&Admission::new(id("flaky"))).await.expect("admit");
    let lease = claim(b, "flaky").await;
    assert!(!b.release(&lease).await.expect("release").is_lost());
    b.admit(&Admission::new(id("queued"))).await.expect("admit");
}

/// Waits (polling the backend clock, with a deadline) until it has passed every instant
/// `fill` recorded, so a cutoff of "now" lies after the terminal acknowledgements.
pub async fn clock_passes(b: &Arc<dyn LeaseBackend>) {
    let start = b.now().await.expect("now");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while b.now().await.expect("now") <= start {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backend clock stands still"
        );
        tokio::task::yield_now().await;
    }
}

/// Every command on a store `fill` filled, at `url`: tables, `--json`, exit codes.
pub async fn check_commands(url: &str, backend: &Arc<dyn LeaseBackend>) {
    fill(backend).await;
    let status = on(url, &["status", "--json"]).await.json();
    let want = serde_json::json!({"admitted": 2, "running": 1, "suspended": 0,
        "completed": 1, "failed": 1, "cancelled": 0, "dead": 0, "corrupt": 0, "takeovers": 0,
        "total": 5});
    assert_eq!(status, want);
    let table = on(url, &["status"]).await;
    let lines = table.words();
    assert_eq!(lines[0], ["STATUS", "COUNT"]);
    assert!(lines.contains(&vec!["admitted", "2"]), "{table:?}");
    assert!(lines.contains(&vec!["total", "5"]), "{table:?}");
    assert!(lines.contains(&vec!["takeovers", "0"]), "{table:?}");

    check_failing(url).await;
    check_live(url, backend).await;
    check_show(url).await;
    assert_eq!(
        on(url, &["corrupt", "--json"]).await.json(),
        serde_json::json!([])
    );
    assert_eq!(on(url, &["corrupt"]).await.stdout, "no corrupt records\n");
    check_purge(url, backend).await;
}

async fn check_failing(url: &str) {
    let failing = on(url, &["failing", "--json"]).await.json();
    let failing = failing.as_array().expect("array");
    assert_eq!(failing.len(), 1, "{failing:?}");
    assert_eq!(failing[0]["id"], "flaky");
    assert_eq!(failing[0]["unacknowledged_deliveries"], 1);
    let table = on(url, &["failing"]).await;
    let row: Vec<&str> = table
        .stdout
        .lines()
        .nth(1)
        .expect("a row")
        .split_whitespace()
        .collect();
    assert_eq!(&row[..3], ["flaky", "1", "admitted"], "{table:?}");
    assert_eq!(
        on(url, &["failing", "--min", "2"]).await.stdout,
        "no failing executions\n"
    );
    on(url, &["failing", "--limit", "0"])
        .await
        .assert_error(2, "--limit");
}

/// `live` lists the one live lease (`busy`) with its token.
async fn check_live(url: &str, backend: &Arc<dyn LeaseBackend>) {
    let busy = backend.get(&id("busy")).await.expect("get").expect("busy");
    let live = on(url, &["live", "--json"]).await.json();
    let live = live.as_array().expect("array");
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["id"], "busy");
    assert_eq!(live[0]["token"], busy.token.get());
    let table = on(url, &["live"]).await;
    let lines = table.words();
    assert_eq!(
        lines[0],
        [
            "ID", "TOKEN", "EXPIRES", "IN", "EXPIRES", "AT", "WORKFLOW", "KEY"
        ]
    );
    assert_eq!(
        &lines[1][..2],
        ["busy", &busy.token.to_string()],
        "{table:?}"
    );
    on(url, &["live", "--limit", "0"])
        .await
        .assert_error(2, "--limit");
}

async fn check_show(url: &str) {
    let shown = on(url, &["show", "done-1", "--json"]).await.json();
    assert_eq!(shown["record"]["status"], "completed");
    assert_eq!(shown["steps"][0]["step_key"], "charge");
    assert_eq!(shown["steps"][0]["response"]["receipt"], "r-1");
    check_show_pages(url).await;
    let table = on(url, &["show", "bad-1"]).await;
    assert_eq!(table.code, Some(0), "{table:?}");
    assert!(table.stdout.contains("failed"), "{table:?}");
    assert!(table.stdout.contains("no step records"), "{table:?}");
    on(url, &["show", "nope"])
        .await
        .assert_error(1, "no execution \"nope\"");
    on(url, &["show", ""]).await.assert_error(2, "execution id");
}

/// `show` prints one bounded page of steps and how to get the next, so an execution with
/// many steps never floods the terminal.
async fn check_show_pages(url: &str) {
    let first = on(url, &["show", "done-1", "--limit", "2", "--json"])
        .await
        .json();
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| format!("{}/{}", s["step_key"], s["step_attempt"]))
            .collect()
    };
    assert_eq!(keys(&first), ["\"charge\"/1", "\"email\"/0"], "{first}");
    assert_eq!(first["more"], true, "{first}");
    assert_eq!(first["next"]["step_key"], "email", "{first}");
    let table = on(url, &["show", "done-1", "--limit", "2"]).await;
    assert!(
        table
            .stdout
            .contains("--after email --after-attempt 0 --limit 2"),
        "{table:?}"
    );
    let rest = on(
        url,
        &[
            "show",
            "done-1",
            "--after",
            "email",
            "--after-attempt",
            "0",
            "--limit",
            "2",
            "--json",
        ],
    )
    .await
    .json();
    assert_eq!(keys(&rest), ["\"ship\"/0"], "{rest}");
    assert_eq!(rest["more"], false, "{rest}");
    let all = on(url, &["show", "done-1"]).await;
    assert!(!all.stdout.contains("--after"), "{all:?}");
    on(url, &["show", "done-1", "--limit", "0"])
        .await
        .assert_error(2, "--limit");
    on(url, &["show", "done-1", "--limit", "1001"])
        .await
        .assert_error(2, "--limit");
    on(url, &["show", "done-1", "--after-attempt", "1"])
        .await
        .assert_error(2, "--after");
}

async fn check_purge(url: &str, backend: &Arc<dyn LeaseBackend>) {
    on(url, &["purge", "--older-than", "1h"])
        .await
        .assert_error(2, "--force");
    on(url, &["purge", "--older-than", "soon"])
        .await
        .assert_error(2, "soon");
    assert_eq!(
        on(url, &["status", "--json"]).await.json()["total"],
        5,
        "refusals purge nothing"
    );
    let none = on(url, &["purge", "--older-than", "30d", "--json"])
        .await
        .json();
    assert_eq!(none["purged"], 0);
    clock_passes(backend).await;
    let dry = on(
        url,
        &[
            "purge",
            "--older-than",
            "0s",
            "--force",
            "--dry-run",
            "--json",
        ],
    )
    .await;
    assert_eq!(dry.json()["terminal"], 2);
    let purged = on(
        url,
        &["purge", "--older-than", "0s", "--force", "--batch", "1"],
    )
    .await;
    assert_eq!(purged.code, Some(0), "{purged:?}");
    assert!(
        purged.stdout.starts_with("purged 2 terminal executions"),
        "{purged:?}"
    );
    assert!(
        purged.stdout.contains("(3 batches of at most 1)"),
        "{purged:?}"
    );
    let after = on(url, &["status", "--json"]).await.json();
    assert_eq!(
        (after["total"].clone(), after["completed"].clone()),
        (3.into(), 0.into())
    );
    on(url, &["show", "done-1"])
        .await
        .assert_error(1, "no execution");
}

/// The console process and the address it serves.
pub struct Console {
    pub child: tokio::process::Child,
    /// `http://127.0.0.1:PORT` (`https://` under TLS).
    pub base: String,
    /// The address it printed, with `?access_token=` when it drew the token.
    pub url: String,
    /// The line it printed.
    pub line: String,
    /// The lines it writes to stderr (each also echoed to this test's stderr).
    pub log: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// Starts `lease --url URL ui ARGS` (on `--listen 127.0.0.1:0` unless `ARGS` name another)
/// with `env` and reads its address.
pub async fn console(url: &str, args: &[&str], env: &[(&str, &str)]) -> Console {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_lease"));
    command.args(["--url", url, "ui"]).args(args);
    if !args.contains(&"--listen") {
        command.args(["--listen", "127.0.0.1:0"]);
    }
    command
        .env_remove("LEASE_UI_TOKEN")
        .envs(env.iter().copied());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn lease ui");
    let log = forward_stderr(child.stderr.take().expect("stderr"));
    let stdout = child.stdout.take().expect("stdout");
    let lines = tokio::io::BufReader::new(stdout);
    let line = tokio::time::timeout(
        RUN_LIMIT,
        tokio::io::AsyncBufReadExt::lines(lines).next_line(),
    )
    .await
    .expect("lease ui prints its address in time")
    .expect("read lease ui's output")
    .expect("lease ui printed a line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let base = match url[scheme_end..].find('/') {
        Some(i) => url[..scheme_end + i].to_owned(),
        None => url.clone(),
    };
    Console {
        child,
        base,
        url,
        line,
        log,
    }
}

/// Echoes the console's stderr to this test's and hands each line to the test.
fn forward_stderr(
    stderr: tokio::process::ChildStderr,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (send, receive) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
            let _ = send.send(line);
        }
    });
    receive
}

/// A schema / namespace name no other test or run uses.
pub fn unique(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("lease_cli_{test}_{}_{nanos}", std::process::id())
}

/// `base` with `namespace=NAME` added to its query.
pub fn with_namespace(base: &str, namespace: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}namespace={namespace}")
}
