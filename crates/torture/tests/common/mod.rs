//! What the torture integration tests share.

use std::process::Command;

/// Runs a prepared `lease-torture run` command, prints its output, requires success; returns
/// its standard output. No wall-clock budget (a loaded machine would break it without
/// anything being wrong): the run's own `--liveness`
/// deadline ends it.
pub fn run_passing(backend: &str, cmd: &mut Command) -> String {
    let out = cmd.output().expect("run lease-torture");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{backend}: torture run failed ({}):\n{stdout}",
        out.status
    );
    stdout
}
