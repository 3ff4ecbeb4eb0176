//! The short torture run of CI (issue 6 item 2): each backend for 20 seconds of faults
//! (pause, kill, drop, slow-renew; SQLite skips drop) with 3 runtime processes, then the
//! history checker, which must find no violation; its liveness deadline bounds it (no wall-clock budget: issue 25 item 14).
//!
//! PostgreSQL and Redis are the shared servers of the test environment (LEASE_POSTGRES_URL
//! / LEASE_REDIS_URL, else the local defaults): every run uses its own schema / namespace,
//! `drop` kills only the connections of its own runtime processes (found by their
//! sockets), and nothing restarts a shared server (`cargo xtask torture` does restarts on
//! throwaway servers).

mod common;

use std::process::Command;
use std::sync::Mutex;

/// One run at a time: the runs are timed, and the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn torture(backend: &str, url: Option<String>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lease-torture"));
    cmd.args([
        "run",
        "--duration",
        "20",
        "--processes",
        "3",
        "--concurrency",
        "6",
        "--executions",
        "40",
        "--lease-ms",
        "1000",
        "--fault-every",
        "1200",
        "--liveness",
        "30",
        "--seed",
        "20260",
        "--faults",
        "pause,kill,drop,slow-renew",
    ]);
    if let Some(url) = url {
        cmd.args(["--url", &url]);
    }
    let stdout = common::run_passing(backend, &mut cmd);
    assert!(stdout.contains("violations: 0"), "{stdout}");
}

#[test]
fn sqlite_survives_the_short_torture_run() {
    torture("sqlite", None);
}

#[test]
fn postgres_survives_the_short_torture_run() {
    torture("postgres", Some(lease_testserver::postgres_url()));
}

#[test]
fn redis_survives_the_short_torture_run() {
    torture("redis", Some(lease_testserver::redis_url()));
}
