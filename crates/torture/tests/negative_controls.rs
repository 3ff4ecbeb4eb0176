//! Negative controls run for real (issue 16 item 5, issue 25 item 16): short SQLite runs
//! with one fence deliberately broken must fail, with the right checker reporting it.
//!
//! - `--effects unfenced`: the effect step bypasses the effect helper (the provider called
//!   inside a plain step). No faults are needed: the checker catches a provider call that no
//!   pending `begin` covers, whoever made it.
//! - `--break-control pause` / `priority` / `schedule`: the controller's backend drops its
//!   pauses or stores every priority inverted, or the runtimes' schedulers drop every
//!   fourth occurrence; no faults are needed: the runtimes claim inside the logged pause
//!   windows, or the lowest priority first, or the cursor passes occurrences never
//!   admitted, and history rule 8, 9 or 10 must say so (and only it).
//! - `--app-write unfenced`: the application row is written in a plain transaction outside
//!   the token check, then the step is recorded. Pauses (SIGSTOP past the lease) make stale
//!   holders that wake in an application step's work and write their row after another
//!   holder took the execution over; the application-row checker must report those rows.

use std::process::Command;
use std::sync::Mutex;

/// One run at a time: the runs are timed, and the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `lease-torture run` with `args` (and a temporary work dir), which must fail;
/// returns its report and the report's violations line.
fn failing_run(args: &[&str]) -> (String, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_lease-torture"))
        .arg("run")
        .args(args)
        .arg("--work-dir")
        .arg(dir.path().join("run"))
        .output()
        .expect("run lease-torture");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !out.status.success(),
        "the negative control passed:\n{stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("violations:"))
        .expect("a violations line")
        .to_owned();
    (stdout, line)
}

#[test]
fn the_effect_checker_catches_a_provider_called_around_the_effect() {
    let (stdout, line) = failing_run(&[
        "--duration",
        "2",
        "--processes",
        "2",
        "--concurrency",
        "4",
        "--executions",
        "10",
        "--max-executions",
        "20",
        "--liveness",
        "20",
        "--seed",
        "16",
        "--faults",
        "none",
        "--effects",
        "unfenced",
    ]);
    assert!(stdout.contains("effects (unfenced): 0 effects"), "{stdout}");
    assert!(stdout.contains("call_without_begin"), "{stdout}");
    assert!(stdout.contains("step_without_effect"), "{stdout}");
    assert!(
        line.contains("history 0, application rows 0") && !line.contains("effects 0)"),
        "only the effect checker objects: {line}"
    );
}

/// The real run of the unfenced application write (it used to be only a unit test of the
/// checker on a synthetic history). 15 s of pauses every 400 ms with 300 ms leases: 12 s
/// runs at seeds 25-28 found 2 to 167 application-row violations each (this seed: 167,
/// 116, 144, 2 under load); the same run with `--app-write fenced` finds none.
#[test]
fn the_application_row_checker_catches_an_unfenced_application_write() {
    let (stdout, line) = failing_run(&[
        "--duration",
        "15",
        "--processes",
        "3",
        "--concurrency",
        "8",
        "--executions",
        "40",
        "--max-executions",
        "1500",
        "--lease-ms",
        "300",
        "--fault-every",
        "400",
        "--liveness",
        "30",
        "--seed",
        "26",
        "--faults",
        "pause",
        "--app-write",
        "unfenced",
    ]);
    assert!(stdout.contains("application rows (unfenced):"), "{stdout}");
    assert!(
        !line.contains("application rows 0,"),
        "the application-row checker objects: {line}"
    );
}

/// A short fault-free run with one control broken: it must fail with violations of
/// `kinds` only, each of them reported. The same runs without `--break-control` pass (the
/// CI run drives the controls under faults with no violation).
fn broken_control_is_caught(broken: &str, drive: &[&str], kinds: &[&str]) {
    let mut args = vec![
        "--duration",
        "6",
        "--processes",
        "2",
        "--concurrency",
        "4",
        "--executions",
        "40",
        "--max-executions",
        "400",
        "--liveness",
        "20",
        "--seed",
        "16",
        "--faults",
        "none",
        "--break-control",
        broken,
    ];
    args.extend_from_slice(drive);
    let (stdout, line) = failing_run(&args);
    assert!(
        line.contains("application rows 0, effects 0") && !line.contains("history 0"),
        "only the history checker objects: {line}"
    );
    let reported: Vec<&str> = stdout.lines().filter(|l| l.contains("\"kind\":")).collect();
    let kind_of = |line: &str| kinds.iter().any(|k| line.contains(&format!("\"{k}\"")));
    assert!(
        !reported.is_empty() && reported.iter().all(|l| kind_of(l)),
        "only {kinds:?}: {stdout}"
    );
    for kind in kinds {
        assert!(stdout.contains(&format!("\"{kind}\"")), "{kind}: {stdout}");
    }
}

#[test]
fn rule_8_catches_claims_while_the_namespace_is_paused() {
    broken_control_is_caught(
        "pause",
        &["--pause-every", "1000"],
        &["claimed_while_paused"],
    );
}

#[test]
fn rule_10_catches_scheduled_occurrences_never_admitted() {
    broken_control_is_caught("schedule", &["--schedule"], &["occurrence_missing"]);
}

#[test]
fn rule_9_catches_lower_priorities_claimed_first() {
    broken_control_is_caught(
        "priority",
        &["--priorities", "3"],
        &["lower_priority_claimed"],
    );
}

/// The backend keeps one attempt more than the log says: the failing executions are
/// claimed once more after their attempts ran out, and that delivery's writes and release
/// are accepted; rule 11 must report both.
#[test]
fn rule_11_catches_a_delivery_after_the_attempts_ran_out() {
    broken_control_is_caught(
        "attempts",
        &["--attempt-limit", "2", "--failing-percent", "10"],
        &["claimed_after_attempts", "accepted_after_dead"],
    );
}
