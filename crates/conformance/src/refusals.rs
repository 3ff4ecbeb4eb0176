//! The record of cases that, on the harness at hand, only checked that a capability is
//! refused (or, for wake-ups, absent): a run over a backend without cancel, retention,
//! pause... passes those cases without exercising the behaviour they are named for, and
//! `cargo xtask test-all` counts them apart so a summary never passes them off as behaviour.

use std::io::Write as _;
use std::path::Path;

/// The variable naming the file the record is appended to; unset, nothing is recorded.
pub const REFUSAL_LOG_ENV: &str = "LEASE_TEST_REFUSAL_LOG";

/// Appends `harness<TAB>test` to the file named by [`REFUSAL_LOG_ENV`], if set. One short
/// line per `write` on a file opened to append, so tests running in parallel (threads or
/// processes) never interleave their lines.
pub(crate) fn record(harness: &str, test: &str) {
    if let Some(path) = std::env::var_os(REFUSAL_LOG_ENV) {
        // The run asked for the record: a case it cannot keep must not pass unnoticed.
        if let Err(e) = append(Path::new(&path), harness, test) {
            panic!("cannot append to {REFUSAL_LOG_ENV}={}: {e}", path.display());
        }
    }
}

fn append(path: &Path, harness: &str, test: &str) -> std::io::Result<()> {
    let line = format!("{harness}\t{test}\n");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(line.as_bytes()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_record_is_one_line() {
        let name = format!("lease-refusals-test-{}.log", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&path);
        super::append(&path, "Minimal", "cancel_twice").expect("append");
        super::append(&path, "Minimal", "pause_x").expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(text, "Minimal\tcancel_twice\nMinimal\tpause_x\n");
    }
}
