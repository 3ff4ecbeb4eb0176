//! The short torture run of CI: each backend for 20 seconds of faults
//! (pause, kill, drop, slow-renew; SQLite skips drop) with 3 runtime processes, then the
//! history checker, which must find no violation; its liveness deadline bounds it (no
//! wall-clock budget, which a loaded machine would break without anything being wrong).
//! Each run also cancels every 7th execution (history rule 6), pauses the namespace for
//! 1.5 s of every 3 (rule 8), ticks a schedule firing every second in every runtime (rule
//! 10) and, on a backend with priorities and limits, admits half of them under 4
//! concurrency keys limited to 2 live leases each, over 3 priority levels (rules 7 and 9),
//! with an attempt limit of 3 and a tenth of the executions failing every delivery until
//! they die (rule 11), a start rate on every key (rule 12) and one ordered key (rule 13):
//! [`Controls`] says which. The report must show each control acted: a cancel, a pause, an
//! occurrence, a key certainly at its limit at some claim (the limit bound), an execution
//! that used every attempt and died; and a backend without rates or ordered keys must say
//! in its report that rules 12 and 13 were not judged.
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
/// capabilities each backend declares: cancel, pause, priorities and concurrency limits).
struct Controls {
    /// `--cancel-every 7`: cancels during the faults (history rule 6).
    cancel: bool,
    /// `--pause-every 3000` (history rule 8) and `--schedule` (rule 10).
    pause_and_schedule: bool,
    /// `--keys 4 --key-limit 2 --priorities 3` (history rules 7 and 9).
    keys_and_priorities: bool,
    /// `--attempt-limit 3 --failing-percent 10` (history rule 11).
    attempts: bool,
    /// The backend has rates and ordered keys: `--rate` and `--ordered-keys` (history rules
    /// 12 and 13, always passed) are judged; otherwise the report must name both rules as
    /// not judged.
    rates_and_ordering: bool,
}

const SQLITE: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
    attempts: true,
    rates_and_ordering: true,
};
const POSTGRES: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
    attempts: true,
    rates_and_ordering: true,
};
const REDIS: Controls = Controls {
    cancel: true,
    pause_and_schedule: true,
    keys_and_priorities: true,
    attempts: true,
    rates_and_ordering: true,
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
        cmd.args(["--rate", RATE, "--ordered-keys", "1"]);
    }
    if controls.attempts {
        cmd.args(["--attempt-limit", "3", "--failing-percent", "10"]);
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
    // The attempt bound: some execution used all 3 attempts, and the failing ones died.
    assert_eq!(figure("attempt_peak") >= 3, controls.attempts, "{stdout}");
    assert_eq!(figure("dead") > 0, controls.attempts, "{stdout}");
    if controls.keys_and_priorities {
        rates_and_ordering_judged_or_named(&report, controls, &stdout);
    }
}

/// The rate every key gets (`--rate`): 4 claims per second.
const RATE: &str = "4/1000";

/// Rules 12 and 13 ran (the rate bound reached: some key used its whole rate in a window),
/// or the report names both as not judged.
fn rates_and_ordering_judged_or_named(report: &Value, controls: &Controls, stdout: &str) {
    let not_judged: Vec<&str> = report["controls"]["not_judged"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let named = |rule: &str| not_judged.iter().any(|n| n.starts_with(rule));
    if controls.rates_and_ordering {
        assert!(not_judged.is_empty(), "{stdout}");
        assert!(
            report["controls"]["rate_peak"].as_u64() >= Some(4),
            "{stdout}"
        );
        assert_eq!(
            report["controls"]["ordered_keys"].as_u64(),
            Some(1),
            "{stdout}"
        );
    } else {
        assert!(named("rule 12") && named("rule 13"), "{stdout}");
        assert!(stdout.contains("NOT JUDGED: rule 12"), "{stdout}");
    }
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
