//! The anchors row's tools: each job queue's runner installed before the row runs, and the
//! command that runs one of them. The Node runners (`crates/bench/anchors/node`, pinned
//! versions, committed lockfile: BullMQ, graphile-worker, pg-boss) are copied to
//! `<target>/anchors/node` and `npm ci` runs there when the lockfile changed; the Rust
//! runners (`crates/bench/anchors/apalis`, `crates/bench/anchors/awa`, each its own
//! workspace and lockfile) are built with `--locked` into `<target>/anchors/<name>`;
//! River's Rust port is `cargo install riverqueue-cli --locked` at a pinned version into
//! `<target>/anchors/river`. `<target>` is `CARGO_TARGET_DIR` when set, else the
//! workspace's `target`.
//!
//! A tool that cannot be installed (no `node`, `npm` or `cargo`, a failed build) fails the
//! rows of the systems that need it, with the reason; the other systems still run. A Rust
//! runner newer than its sources is not rebuilt, so no `cargo` runs while the measured row
//! has the machine's other builds paused (a paused `cargo` may hold the package cache lock).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::SystemTime;

use crate::anchors::System;
use crate::error::{BenchError, Result};

/// River's Rust port, the version measured.
pub const RIVER_VERSION: &str = "0.5.0";

/// The Node runners' files, copied to the install directory.
const NODE_FILES: [&str; 6] = [
    "package.json",
    "package-lock.json",
    "common.js",
    "bullmq.js",
    "graphile.js",
    "pgboss.js",
];

fn setup(text: impl Into<String>) -> BenchError {
    BenchError::Setup(text.into())
}

/// Where the runners are installed: `$CARGO_TARGET_DIR/anchors`, else `<workspace>/target/anchors`.
pub fn anchors_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("anchors"),
        _ => crate::args::workspace_root().join("target/anchors"),
    }
}

/// The installed runners: each one's path, or why it could not be installed.
pub struct Tools {
    /// The Node runners' directory (BullMQ, graphile-worker, pg-boss).
    pub node_dir: std::result::Result<PathBuf, String>,
    /// The apalis runner.
    pub apalis: std::result::Result<PathBuf, String>,
    /// The awa runner.
    pub awa: std::result::Result<PathBuf, String>,
    /// The `riverqueue` binary.
    pub river: std::result::Result<PathBuf, String>,
}

/// The tool a system needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// Nothing beyond this binary.
    None,
    /// Node.js and the Node runners.
    Node,
    /// The apalis runner.
    Apalis,
    /// The awa runner.
    Awa,
    /// `riverqueue`.
    River,
}

/// The tool `system` needs.
pub fn tool_of(system: System) -> Tool {
    match system {
        System::Lease | System::LeaseTuned | System::Bound32 | System::Bound500 => Tool::None,
        System::BullMq
        | System::BullMqTuned
        | System::Graphile
        | System::Graphile32
        | System::Graphile500
        | System::PgBoss
        | System::PgBossBatch => Tool::Node,
        System::Awa | System::AwaTuned => Tool::Awa,
        System::River => Tool::River,
        System::Apalis => Tool::Apalis,
    }
}

impl Tools {
    /// The path of the tool `system` needs, or the reason it is missing.
    pub fn path(&self, system: System) -> Result<Option<&Path>> {
        let found = match tool_of(system) {
            Tool::None => return Ok(None),
            Tool::Node => &self.node_dir,
            Tool::Apalis => &self.apalis,
            Tool::Awa => &self.awa,
            Tool::River => &self.river,
        };
        found
            .as_deref()
            .map(Some)
            .map_err(|why| setup(format!("{} was not installed: {why}", system.name())))
    }
}

/// The hint of a missing program.
fn hint(program: &str) -> &'static str {
    match program {
        "cargo" => "the Rust toolchain",
        "node" | "npm" => "Node.js 20 and npm: apt-get install nodejs npm",
        _ => "it on PATH",
    }
}

/// Runs `program args` in `dir`, failing with the tool's name when it is missing.
fn run_tool(program: &str, args: &[&str], dir: &Path, env: &[(&str, &Path)]) -> Result<()> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).current_dir(dir).stdout(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let status = cmd.status().map_err(|e| {
        setup(format!(
            "`{program}` could not be run ({e}): the anchors row needs it ({})",
            hint(program)
        ))
    })?;
    if !status.success() {
        return Err(setup(format!(
            "`{program} {}` in {} failed ({status})",
            args.join(" "),
            dir.display()
        )));
    }
    Ok(())
}

/// Copies the Node runners to `<anchors>/node` and runs `npm ci` when the lockfile is not
/// the one installed there; checks that `node` runs.
fn install_node(root: &Path, anchors: &Path) -> Result<PathBuf> {
    let source = root.join("crates/bench/anchors/node");
    let dir = anchors.join("node");
    std::fs::create_dir_all(&dir).map_err(|e| setup(format!("{}: {e}", dir.display())))?;
    for name in NODE_FILES {
        std::fs::copy(source.join(name), dir.join(name))
            .map_err(|e| setup(format!("copy {name}: {e}")))?;
    }
    let lock = std::fs::read(dir.join("package-lock.json"))
        .map_err(|e| setup(format!("package-lock.json: {e}")))?;
    let stamp = dir.join("node_modules/.lease-bench-lock");
    if std::fs::read(&stamp).ok().as_deref() != Some(lock.as_slice()) {
        eprintln!("lease-bench: npm ci in {}", dir.display());
        run_tool(
            "npm",
            &["ci", "--no-audit", "--no-fund", "--loglevel=error"],
            &dir,
            &[],
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| setup(format!("{}: {e}", stamp.display())))?;
    }
    run_tool("node", &["--version"], &dir, &[])?;
    Ok(dir)
}

/// Installs the Node runners alone (the peers' pickup and bulk rows need nothing else):
/// their directory, or why they could not be installed.
pub fn install_node_runners() -> std::result::Result<PathBuf, String> {
    install_node(&crate::args::workspace_root(), &anchors_dir()).map_err(|e| e.to_string())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Whether `binary` exists and is newer than each of `sources`.
pub fn is_fresh(binary: &Path, sources: &[PathBuf]) -> bool {
    let Some(built) = modified(binary) else {
        return false;
    };
    sources
        .iter()
        .all(|s| modified(s).is_some_and(|m| m <= built))
}

/// Builds the Rust runner `crates/bench/anchors/<name>` (binary `bin`) in its own target
/// dir, unless it is newer than its sources.
fn install_rust(root: &Path, anchors: &Path, name: &str, bin: &str) -> Result<PathBuf> {
    let crate_dir = root.join("crates/bench/anchors").join(name);
    let target = anchors.join(name);
    let binary = target.join("release").join(bin);
    let sources = ["Cargo.toml", "Cargo.lock", "src/main.rs"].map(|f| crate_dir.join(f));
    if is_fresh(&binary, &sources) {
        return Ok(binary);
    }
    let manifest = crate_dir.join("Cargo.toml").to_string_lossy().into_owned();
    eprintln!(
        "lease-bench: building the {name} runner into {}",
        target.display()
    );
    run_tool(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "--quiet",
            "--manifest-path",
            &manifest,
        ],
        root,
        &[("CARGO_TARGET_DIR", &target)],
    )?;
    Ok(binary)
}

/// Installs `riverqueue-cli` [`RIVER_VERSION`] (PostgreSQL only) unless it is there.
fn install_river(root: &Path, anchors: &Path) -> Result<PathBuf> {
    let dir = anchors.join("river");
    let binary = dir.join("bin/riverqueue");
    if binary.exists() {
        return Ok(binary);
    }
    let dir_text = dir.to_string_lossy().into_owned();
    let target = anchors.join("river-target");
    eprintln!("lease-bench: cargo install riverqueue-cli {RIVER_VERSION} into {dir_text}");
    run_tool(
        "cargo",
        &[
            "install",
            "riverqueue-cli",
            "--version",
            RIVER_VERSION,
            "--locked",
            "--quiet",
            "--no-default-features",
            "--features",
            "postgres",
            "--root",
            &dir_text,
        ],
        root,
        &[("CARGO_TARGET_DIR", &target)],
    )?;
    Ok(binary)
}

/// Installs the tools `systems` need; each one that fails is kept as its reason.
pub fn install(systems: &[System]) -> Tools {
    let root = crate::args::workspace_root();
    let anchors = anchors_dir();
    let needs = |t: Tool| systems.iter().any(|s| tool_of(*s) == t);
    let or_skip = |t: Tool, f: &dyn Fn() -> Result<PathBuf>| {
        if needs(t) {
            f().map_err(|e| e.to_string())
        } else {
            Err("not selected".to_owned())
        }
    };
    Tools {
        node_dir: or_skip(Tool::Node, &|| install_node(&root, &anchors)),
        apalis: or_skip(Tool::Apalis, &|| {
            install_rust(&root, &anchors, "apalis", "lease-bench-anchor-apalis")
        }),
        awa: or_skip(Tool::Awa, &|| {
            install_rust(&root, &anchors, "awa", "lease-bench-anchor-awa")
        }),
        river: or_skip(Tool::River, &|| install_river(&root, &anchors)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_fails_its_systems_with_the_reason() {
        let tools = Tools {
            node_dir: Err("`npm` could not be run".into()),
            apalis: Ok(PathBuf::from("/x/apalis")),
            awa: Err("not selected".into()),
            river: Ok(PathBuf::from("/x/riverqueue")),
        };
        let e = tools.path(System::PgBoss).expect_err("no node");
        assert!(e.to_string().contains("`npm` could not be run"), "{e}");
        assert!(e.to_string().contains("pg-boss"), "{e}");
        assert!(tools.path(System::Graphile500).is_err());
        assert!(tools.path(System::AwaTuned).is_err());
        assert_eq!(
            tools.path(System::River).ok().flatten(),
            Some(Path::new("/x/riverqueue"))
        );
        assert_eq!(tools.path(System::Lease).ok(), Some(None), "needs nothing");
        assert_eq!(tools.path(System::Bound500).ok(), Some(None));
    }

    #[test]
    fn running_a_missing_program_names_it() {
        let e =
            run_tool("lease-bench-no-such-program", &[], Path::new("."), &[]).expect_err("missing");
        assert!(e.to_string().contains("lease-bench-no-such-program"), "{e}");
    }

    #[test]
    fn a_binary_older_than_a_source_is_rebuilt() {
        let dir = std::env::temp_dir().join(format!("lease-fresh-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (source, binary) = (dir.join("main.rs"), dir.join("bin"));
        std::fs::write(&source, "a").expect("source");
        assert!(
            !is_fresh(&binary, std::slice::from_ref(&source)),
            "no binary"
        );
        std::fs::write(&binary, "b").expect("binary");
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let file = std::fs::File::options()
            .write(true)
            .open(&source)
            .expect("open");
        file.set_modified(old).expect("age the source");
        assert!(is_fresh(&binary, std::slice::from_ref(&source)));
        let file = std::fs::File::options()
            .write(true)
            .open(&binary)
            .expect("open");
        file.set_modified(old - std::time::Duration::from_secs(1))
            .expect("age the binary");
        assert!(!is_fresh(&binary, &[source]), "source newer");
        assert!(
            !is_fresh(&binary, &[dir.join("gone.rs")]),
            "a source missing"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
