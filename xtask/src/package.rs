//! `cargo xtask package`: every publishable crate packaged as the registry would take it and
//! verified (each `.crate` unpacked and built on its own), in dependency order.
//!
//! Cargo packages the listed members together: it orders them by their dependencies and
//! verifies each against the others' freshly made `.crate` files through a temporary local
//! registry, so a crate that only builds with a sibling's unpublished change, or a file left
//! out of a package, fails here before anything is published. test-all's package row skips
//! the verification (see `test_all::PUBLISHABLE`'s row): each verified build resolves its own
//! features and so builds its dependencies again, several minutes per crate on 2 cores.

use std::path::Path;
use std::process::Command;

use crate::test_all::PUBLISHABLE;

/// The long help of `cargo xtask package`.
pub const ABOUT: &str = "Packages every publishable crate and verifies each package builds \
on its own, in dependency order (cargo package with verification). Slow: every package \
resolves its own features, so its dependencies are built again (in verify/ under the target \
directory, removed afterwards).";

/// Options of `cargo xtask package`: none.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {}

/// `cargo package` with verification of every crate in [`PUBLISHABLE`].
pub fn args() -> Vec<&'static str> {
    let mut args = vec!["package", "--allow-dirty"];
    for name in PUBLISHABLE {
        args.extend(["-p", name]);
    }
    args
}

/// Runs the verified packaging in its own target directory (its builds share nothing with
/// the workspace's: other features, other lock file) and removes that directory after.
pub fn run(root: &Path) -> Result<bool, String> {
    // Under the target directory in use (CARGO_TARGET_DIR when set), so two checkouts or
    // two runs with their own target directories never share or delete each other's.
    let base = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into);
    let target = base.join("verify");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(args())
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .map_err(|e| format!("cargo package: {e}"))?;
    if let Err(e) = std::fs::remove_dir_all(&target) {
        eprintln!("xtask package: could not remove {}: {e}", target.display());
    }
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_every_publishable_crate() {
        let args = args();
        assert!(!args.contains(&"--no-verify"));
        for name in PUBLISHABLE {
            assert!(args.windows(2).any(|w| w == ["-p", *name]), "{name}");
        }
    }
}
