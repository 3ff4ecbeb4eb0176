//! The temp dirs of throwaway servers, and the tail of their logs for error messages.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Creates a fresh, uniquely named directory under the system temp dir.
pub(super) fn temp_dir(kind: &str) -> Result<PathBuf, String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "lease-xtask-{kind}-{}-{seq}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The last `n` lines of a log file, for error messages.
pub(super) fn log_tail(path: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(n)..].join("\n    ");
    if tail.is_empty() {
        String::new()
    } else {
        format!("\n  last lines of {}:\n    {tail}", path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dirs_are_fresh() {
        let a = temp_dir("test").expect("a");
        let b = temp_dir("test").expect("b");
        assert_ne!(a, b);
        std::fs::remove_dir(&a).expect("rm a");
        std::fs::remove_dir(&b).expect("rm b");
    }
}
