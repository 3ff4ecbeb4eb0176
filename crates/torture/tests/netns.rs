//! The short network-fault run of CI: PostgreSQL and Redis for 20 seconds
//! each with every runtime in its own network namespace (`--netns`) under partitions,
//! packet loss and added latency, then the checkers. Each run must find no violation,
//! complete every execution, inject every kind, and show that a partition cost the cut-off
//! runtime leases (taken over by another runtime).
//!
//! Needs root, `ip` (iproute2) and `nft` (nftables; `cargo xtask test-all` installs them as
//! root with apt). A missing tool or permission fails the test, naming it, wherever it runs
//! (the test never passes without having run).

mod common;

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// One run at a time: the runs are timed, and the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Why the namespace mode cannot run here, if it cannot.
fn missing() -> Option<String> {
    for (tool, arg) in [("ip", "-V"), ("nft", "--version"), ("id", "-u")] {
        match Command::new(tool).arg(arg).output() {
            Ok(o) if o.status.success() => {
                if tool == "id" && String::from_utf8_lossy(&o.stdout).trim() != "0" {
                    return Some("--netns needs root".to_owned());
                }
            }
            Ok(o) => return Some(format!("`{tool} {arg}` failed: {}", o.status)),
            Err(e) => {
                return Some(format!(
                    "no `{tool}` ({e}): install iproute2 and nftables (`cargo xtask test-all` does as root)"
                ));
            }
        }
    }
    None
}

fn count(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn torture(backend: &str, url: String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = missing() {
        panic!("{backend}: the network-fault run cannot run here: {why}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lease-torture"));
    cmd.args(["run", "--url", &url, "--netns"])
        .args(["--duration", "20", "--processes", "3", "--concurrency", "6"])
        .args([
            "--executions",
            "40",
            "--lease-ms",
            "1000",
            "--fault-every",
            "1000",
        ])
        .args(["--liveness", "30", "--seed", "140203"])
        .args(["--faults", "partition,loss,latency"])
        .arg("--work-dir")
        .arg(dir.path().join("work"))
        .arg("--json")
        .arg(&json);
    let stdout = common::run_passing(backend, &mut cmd);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    let r: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(count(&r, &["violations"]), 0, "{stdout}");
    assert_eq!(
        count(&r, &["done"]),
        count(&r, &["admitted"]),
        "liveness: {stdout}"
    );
    for kind in ["partition", "loss", "latency"] {
        assert!(
            count(&r, &["faults", kind]) > 0,
            "no {kind} fault: {stdout}"
        );
    }
    assert!(
        count(&r, &["network", "partition_takeovers"]) > 0,
        "no lease of a cut-off runtime was taken over: {stdout}"
    );
    assert_eq!(
        count(&r, &["late_side_effects", "accepted_after_takeover"]),
        0,
        "{stdout}"
    );
}

#[test]
fn postgres_survives_partitions_loss_and_latency() {
    torture("postgres", lease_testserver::postgres_url());
}

#[test]
fn redis_survives_partitions_loss_and_latency() {
    torture("redis", lease_testserver::redis_url());
}
