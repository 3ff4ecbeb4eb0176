//! The short torture run of CI (issue 6 item 2): each backend for 20 seconds of faults
//! (pause, kill, drop, slow-renew; SQLite skips drop) with 3 runtime processes, then the
//! history checker, which must find no violation; its liveness deadline bounds it (no wall-clock budget: issue 25 item 14).
//! Each run also cancels every 7th execution (history rule 6), pauses the namespace for
//! 1.5 s of every 3 (rule 8), ticks a schedule firing every second in every runtime (rule
//! 10) and, on a backend with priorities and limits, admits half of them under 4
//! concurrency keys limited to 2 live leases each, over 3 priority levels (rules 7 and 9): [`Controls`] says which. The report must show each control acted: a
//! cancel, a pause, an occurrence, and a key certainly at its limit at some claim (the
//! limit bound).
//!
//! PostgreSQL and Redis are the shared servers of the test environment (LEASE_POSTGRES_URL
//! / LEASE_REDIS_URL, else the local defaults): every run uses its own schema / namespace,
//! `drop` kills only the connections of its own runtime processes (found by their
//! sockets), and nothing restarts a shared server (`cargo xtask torture` does restarts on
//! throwaway servers).

mod common;

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// One run at a time: the runs are timed, and the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Which controls a backend's run drives besides the faults (the torture side of the
/// conformance harness's `CANCEL` and `PRIORITIES_AND_LIMITS` consts).
struct Controls {
    /// `--cancel-every 7`: cancels during the faults (history rule 6).
    cancel: bool,
    /// `--pause-every 3000` (history rule 8) and `--schedule` (rule 10).
    pause_and_schedule: bool,
    /// `--keys 4 --key-limit 2 --priorities 3` (history rules 7 and 9).
    keys_and_priorities: bool,
}

const SQLITE: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
};
const POSTGRES: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
};
const REDIS: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
};

fn torture(backend: &str, url: Option<String>, controls: &Controls) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("report.json");
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
    ])
    .arg("--json")
    .arg(&json);
    if controls.cancel {
        cmd.args(["--cancel-every", "7"]);
    }
    if controls.pause_and_schedule {
        cmd.args(["--pause-every", "3000", "--schedule"]);
    }
    if controls.keys_and_priorities {
        cmd.args(["--keys", "4", "--key-limit", "2", "--priorities", "3"]);
    }
    if let Some(url) = url {
        cmd.args(["--url", &url]);
    }
    let stdout = common::run_passing(backend, &mut cmd);
    assert!(stdout.contains("violations: 0"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
    let figure = |name: &str| report["controls"][name].as_u64().unwrap_or(0);
    // The controls ran: the rules had something to check.
    assert_eq!(figure("cancelled") > 0, controls.cancel, "{stdout}");
    assert_eq!(
        figure("pauses") > 0,
        controls.pause_and_schedule,
        "{stdout}"
    );
    assert_eq!(
        figure("scheduled") > 0,
        controls.pause_and_schedule,
        "{stdout}"
    );
    assert_eq!(
        figure("keyed") > 0,
        controls.keys_and_priorities,
        "{stdout}"
    );
    // The limit bound: at some claim a key certainly held as many live leases as its limit.
    assert_eq!(
        figure("key_peak") >= 2,
        controls.keys_and_priorities,
        "{stdout}"
    );
}

#[test]
fn sqlite_survives_the_short_torture_run() {
    torture("sqlite", None, &SQLITE);
}

#[test]
fn postgres_survives_the_short_torture_run() {
    torture(
        "postgres",
        Some(lease_testserver::postgres_url()),
        &POSTGRES,
    );
}

#[test]
fn redis_survives_the_short_torture_run() {
    torture("redis", Some(lease_testserver::redis_url()), &REDIS);
}
