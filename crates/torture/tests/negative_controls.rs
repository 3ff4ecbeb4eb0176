//! Negative controls run for real (issue 16 item 5): a short SQLite run whose effect step
//! bypasses the effect helper (`--effects unfenced`: the provider called inside a plain
//! step) must fail, with the effect checker reporting it. No faults are needed: the checker
//! catches a provider call that no pending `begin` covers, whoever made it.

use std::process::Command;

#[test]
fn the_effect_checker_catches_a_provider_called_around_the_effect() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_lease-torture"))
        .args([
            "run",
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
        ])
        .arg("--work-dir")
        .arg(dir.path().join("run"))
        .output()
        .expect("run lease-torture");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !out.status.success(),
        "the negative control passed:\n{stdout}"
    );
    assert!(stdout.contains("effects (unfenced): 0 effects"), "{stdout}");
    assert!(stdout.contains("call_without_begin"), "{stdout}");
    assert!(stdout.contains("step_without_effect"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("violations:"))
        .expect("a violations line");
    assert!(
        line.contains("history 0, application rows 0") && !line.contains("effects 0)"),
        "only the effect checker objects: {line}"
    );
}
