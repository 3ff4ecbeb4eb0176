//! Disk space around a test-all run: the free space of the target directory's file system
//! and the target directory's own size, printed at the start and in the summary. A CI run
//! once died with "database or disk is full" in its last row (stop 30), so a run states what
//! it had and what it used.

use std::path::Path;
use std::process::Command;

/// Below this much free space a full run may not fit (a clean test-all builds the workspace
/// under a dozen feature sets); the run goes on, with a warning naming the figure.
pub const WARN_BELOW_GIB: f64 = 25.0;

const GIB: f64 = (1u64 << 30) as f64;

/// Free bytes on the file system holding `path` (`df -Pk`), or `None` when `df` fails.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let output = Command::new("df").arg("-Pk").arg(path).output().ok()?;
    if !output.status.success() {
        return None;
    }
    parse_df_available_kib(&String::from_utf8_lossy(&output.stdout)).map(|kib| kib * 1024)
}

/// The `Available` column (KiB) of `df -Pk`'s one data line.
fn parse_df_available_kib(text: &str) -> Option<u64> {
    let line = text.lines().nth(1)?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Bytes of the files under `dir` (not following symbolic links); 0 when it is missing.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_bytes(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}

/// One line: the free space where `root` lives and the size of `root/target`; a warning
/// line too when the free space is under [`WARN_BELOW_GIB`].
pub fn report(root: &Path) -> String {
    let target = dir_bytes(&root.join("target")) as f64 / GIB;
    match free_bytes(root) {
        Some(free) => {
            let free = free as f64 / GIB;
            let mut line = format!("disk: {free:.1} GiB free, target/ {target:.1} GiB");
            if free < WARN_BELOW_GIB {
                line.push_str(&format!(
                    "\nWARNING: under {WARN_BELOW_GIB:.0} GiB free: a clean run may fill the disk"
                ));
            }
            line
        }
        None => format!("disk: free space unknown (df failed), target/ {target:.1} GiB"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_available_column_of_df() {
        let text = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                    /dev/vda         264091648 12000000  83886080      13% /\n";
        assert_eq!(parse_df_available_kib(text), Some(83_886_080));
        assert_eq!(parse_df_available_kib("Filesystem only\n"), None);
    }

    #[test]
    fn sizes_a_directory_tree() {
        let dir = std::env::temp_dir().join(format!("xtask-disk-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("temp dir");
        std::fs::write(dir.join("a"), [0u8; 100]).expect("file a");
        std::fs::write(dir.join("sub/b"), [0u8; 23]).expect("file b");
        assert_eq!(dir_bytes(&dir), 123);
        std::fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(dir_bytes(&dir), 0);
    }

    #[test]
    fn free_space_of_this_directory_is_known() {
        assert!(free_bytes(Path::new(env!("CARGO_MANIFEST_DIR"))).is_some());
    }
}
