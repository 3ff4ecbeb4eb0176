//! What the torture integration tests share.

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs a prepared `lease-torture run` command, prints its output, requires success; returns
/// its standard output and how long it took.
pub fn run_passing(backend: &str, cmd: &mut Command) -> (String, Duration) {
    let started = Instant::now();
    let out = cmd.output().expect("run lease-torture");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "{backend}: torture run failed ({}):\n{stdout}",
        out.status
    );
    (stdout, elapsed)
}
