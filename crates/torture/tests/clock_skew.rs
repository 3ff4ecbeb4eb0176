//! The short clock-skew runs of CI: PostgreSQL and Redis for 20 seconds
//! of faults (pause, kill, drop, slow-renew) with every runtime incarnation under
//! libfaketime (`--clock-skew`: offset up to an hour either way, rate 0.5x to 2x). Only the
//! backend's clock decides claimability, so the history checker must find 0 violations and
//! every execution must complete (liveness). The controller compares each runtime's clock
//! samples with the skew it drew, so the test also fails when the skew did not take effect
//! (libfaketime not preloaded, or the logs' clock faked too): the report must show every
//! sampled incarnation as drawn, offsets of many minutes, and slow and fast rates.
//!
//! Servers as in `tests/ci.rs` (LEASE_POSTGRES_URL / LEASE_REDIS_URL, else the local
//! defaults; own schema / namespace). libfaketime comes from Debian's `faketime` and
//! `libfaketime` packages (`cargo xtask test-all` installs them as root); without it the
//! test fails, naming it, wherever it runs (a test that passes without having run hides
//! the gap). No wall-clock budget is asserted (a loaded machine would break it without
//! anything being wrong): the run's own liveness deadline bounds it.

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// One run at a time: the runs are timed, and the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the skewed torture run; fails, naming libfaketime, when it is missing.
fn run(backend: &str, url: &str) -> Value {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tag = format!("lease-torture-skew-{backend}-{}", std::process::id());
    let json = std::env::temp_dir().join(format!("{tag}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_lease-torture"))
        .args(["run", "--url", url, "--clock-skew", "--seed", "1404"])
        // The faults of tests/ci.rs, with the default lease (1500 ms).
        .args(
            "--faults pause,kill,drop,slow-renew --fault-every 1200 --duration 20 \
             --liveness 30 --processes 3 --concurrency 6 --executions 40"
                .split_whitespace(),
        )
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run lease-torture");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        !stderr.contains("--clock-skew needs libfaketime"),
        "{backend}: the clock-skew run needs libfaketime (Debian packages faketime and \
         libfaketime; `cargo xtask test-all` installs them as root):\n{stderr}"
    );
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); exit {}:\n{stdout}", out.status));
    let _ = std::fs::remove_file(&json);
    assert!(
        out.status.success(),
        "{backend}: torture run failed ({}):\n{stdout}",
        out.status
    );
    serde_json::from_str(&text).expect("report JSON")
}

fn number(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

/// Safety, liveness, and the skew visibly applied.
fn check(backend: &str, report: &Value) {
    assert_eq!(number(report, "violations"), 0.0, "{backend}: {report}");
    assert_eq!(
        number(report, "done"),
        number(report, "admitted"),
        "{backend}: not every execution completed"
    );
    assert!(number(report, "admitted") > 0.0);
    let skew = &report["clock_skew"];
    assert_eq!(number(skew, "mismatched"), 0.0, "{backend}: {skew}");
    let incarnations = skew["incarnations"].as_array().expect("incarnations");
    let seen = |pick: &dyn Fn(&Value) -> bool| incarnations.iter().filter(|i| pick(i)).count();
    let as_drawn = seen(&|i| i["as_drawn"] == Value::Bool(true));
    assert!(
        as_drawn >= 3 && number(skew, "rate_measured") >= 3.0,
        "{backend}: too few incarnations confirmed: {skew}"
    );
    let far = seen(&|i| {
        i["observed_offset_s"]
            .as_f64()
            .is_some_and(|o| o.abs() > 600.0)
    });
    let slow = seen(&|i| i["observed_rate"].as_f64().is_some_and(|r| r < 0.9));
    let fast = seen(&|i| i["observed_rate"].as_f64().is_some_and(|r| r > 1.1));
    assert!(
        far >= 2 && slow >= 1 && fast >= 1,
        "{backend}: the observed clocks were not skewed enough ({far} far, {slow} slow, \
         {fast} fast): {skew}"
    );
}

#[test]
fn postgres_survives_skewed_runtime_clocks() {
    let url = lease_testserver::postgres_url();
    check("postgres", &run("postgres", &url));
}

#[test]
fn redis_survives_skewed_runtime_clocks() {
    let url = lease_testserver::redis_url();
    check("redis", &run("redis", &url));
}
