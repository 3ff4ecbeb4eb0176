//! `cargo xtask test-all`: format check, clippy, every backend's tests, a summary.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::cleanup;
use crate::disk;
use crate::matrix::{self, Backend};
use crate::services::{Found, Service, url};
use crate::setup;
use crate::summary::{self, Counts, Row};

/// What `cargo xtask test-all --help` prints after the options.
pub const ABOUT: &str = "\
Runs `cargo fmt --all --check`, `cargo clippy --workspace --all-targets -- -D warnings` (and
on the tidy target, which `--all-targets` leaves out),
`RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --all-features --no-deps`,
`cargo package` of the publishable crates, then each backend's tests, then prints a summary.
With --backend (repeatable) only the named backends run. Exits non-zero if anything failed.

First it sets up what the selected rows need: PostgreSQL and Redis on their default ports
when down (pg_ctlcluster, redis-server), a Docker engine for `containers` (dockerd
--bridge=none --iptables=false), libfaketime, nft and ip for `torture`, Chromium and its driver
for `browser`; as root with apt-get it installs the missing Debian packages (docker.io,
faketime libfaketime, nftables iproute2, chromium chromium-driver),
otherwise the `setup` check fails naming the command to run.
PostgreSQL and Redis are found in this order: LEASE_POSTGRES_URL / LEASE_REDIS_URL; a server
on 127.0.0.1:5432 / 6379; a throwaway server from local binaries (initdb+pg_ctl, run as user
postgres via runuser when root / redis-server); a container through testcontainers, from an
image built out of the local binaries. The `containers` row always starts containers.
A backend whose server cannot be found fails the run: it is never skipped.
XTASK_SKIP_WAYS=local,binaries,containers (any of them) leaves ways out, to try the later ones.";

/// Options of `cargo xtask test-all`.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// Only this backend's row (repeatable, in the order given): a name of the matrix
    /// (memory, json-features, sqlite, postgres, redis, ...).
    #[arg(long = "backend", value_name = "NAME")]
    pub backends: Vec<String>,
}

/// The crates published to a registry; every other member has `publish = false`.
pub const PUBLISHABLE: &[&str] = &[
    "lease-core",
    "lease-runtime",
    "lease-schedule",
    "lease-sqlite",
    "lease-postgres",
    "lease-redis",
    "lease-conformance",
    "execution-leases",
    "lease-cli",
];

/// `cargo package` of [`PUBLISHABLE`]: the manifests, metadata and file lists a registry
/// takes, and path dependencies that all carry versions. `--no-verify`: verifying builds each
/// `.crate` outside this workspace's profile, so every dependency a second time (measured on
/// a loaded 2-core machine: lease-core 3m41s, lease-conformance 5m04s, lease-postgres more
/// than 5 min), while the same sources are built and tested by the rows anyway.
/// `--allow-dirty` so a run on uncommitted work checks that work.
fn package_args() -> Vec<&'static str> {
    let mut args = vec!["package", "--no-verify", "--allow-dirty"];
    for name in PUBLISHABLE {
        args.extend(["-p", name]);
    }
    args
}

/// A cargo command in `root`. Incremental compilation is off: a test-all run builds each
/// crate once per feature set and never edits in between, so the incremental caches (a large
/// share of `target/`) only cost disk; a CI run once filled the disk in its last row.
fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root).env("CARGO_INCREMENTAL", "0");
    cmd
}

fn banner(text: &str) {
    println!("\n==> {text}");
    let _ = std::io::stdout().flush();
}

/// Runs a check (fmt, clippy, doc) with inherited output and extra environment; returns
/// whether it passed and its time.
fn check(root: &Path, label: &str, args: &[&str], env: &[(&str, &str)]) -> (bool, f64) {
    let shown: String = env.iter().map(|(k, v)| format!("{k}=\"{v}\" ")).collect();
    banner(&format!("{label}: {shown}cargo {}", args.join(" ")));
    let started = Instant::now();
    let mut cmd = cargo(root);
    cmd.args(args).envs(env.iter().copied());
    let ok = match cleanup::run_child(&mut cmd) {
        Ok(status) => status.success(),
        Err(e) => {
            eprintln!("xtask: cannot run cargo: {e}");
            false
        }
    };
    (ok, started.elapsed().as_secs_f64())
}

/// The variable the conformance suite reads for where to record its refusal-only cases
/// (`lease_conformance::refusals::REFUSAL_LOG_ENV`; xtask does not build that crate).
const REFUSAL_LOG_ENV: &str = "LEASE_TEST_REFUSAL_LOG";

/// A fresh file for one row's refusal record (none left from an earlier run).
fn refusal_log(backend: &Backend) -> PathBuf {
    let name = format!("xtask-refusals-{}-{}.log", std::process::id(), backend.name);
    let path = std::env::temp_dir().join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// The refusal-only cases recorded in `path` (none when no case recorded one), and the file
/// removed.
fn take_refusals(path: &Path) -> u64 {
    let record = std::fs::read_to_string(path).unwrap_or_default();
    let _ = std::fs::remove_file(path);
    summary::count_refusals(&record)
}

/// Runs `cargo test` for one backend, echoing its output and counting `test result:` lines.
/// Test names seen go into `names` (for the distinct count).
fn run_backend(
    root: &Path,
    backend: &Backend,
    env: &[(&str, String)],
    names: &mut BTreeSet<String>,
) -> Row {
    let mut args = vec!["test", "--no-fail-fast"];
    args.extend(backend.cargo_test);
    banner(&format!("{}: cargo {}", backend.name, args.join(" ")));
    let started = Instant::now();
    let mut counts = Counts::default();
    let mut cmd = cargo(root);
    cmd.args(&args).stdout(Stdio::piped());
    // Only the row's own servers: a cluster URL exported for the cluster row must not turn
    // the plain redis row into a cluster run.
    for service in Service::ALL.into_iter().chain(Service::ON_REQUEST) {
        cmd.env_remove(service.env_var());
    }
    cmd.env_remove(crate::services::standby::FAILOVER_ENV);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let refusals = refusal_log(backend);
    cmd.env(REFUSAL_LOG_ENV, &refusals);
    let problem = match cmd.spawn() {
        Err(e) => Some(format!("cannot run cargo: {e}")),
        Ok(mut child) => {
            cleanup::set_child(Some(child.id()));
            if let Some(stdout) = child.stdout.take() {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    println!("{line}");
                    if let Some(name) = summary::test_name(&line) {
                        names.insert(name.to_owned());
                    }
                    if let Some(c) = summary::parse_result_line(&line) {
                        counts.add(c);
                    }
                }
            }
            let status = child.wait();
            cleanup::set_child(None);
            match status {
                Ok(s) if s.success() => None,
                Ok(s) if counts.failed > 0 => Some(format!("cargo test {s}")),
                Ok(s) => Some(format!("cargo test {s} with no failed test (build error?)")),
                Err(e) => Some(format!("waiting for cargo: {e}")),
            }
        }
    };
    Row {
        name: backend.name.to_owned(),
        counts,
        refusals: take_refusals(&refusals),
        seconds: started.elapsed().as_secs_f64(),
        problem,
    }
}

/// Finds every server the selected backends need, printing which way each was found.
fn discover(selected: &[Backend]) -> BTreeMap<Service, Result<Found, String>> {
    let mut found = BTreeMap::new();
    let needed: Vec<Service> = selected
        .iter()
        .flat_map(|b| b.services.iter().copied())
        .collect();
    for service in needed {
        if found.contains_key(&service) {
            continue;
        }
        banner(&format!("finding {}", service.name()));
        let started = Instant::now();
        let result = service.discover();
        match &result {
            Ok(f) => println!(
                "{}: found via {} -> {} ({:.1}s)",
                service.name(),
                f.how,
                url::redact(&f.url),
                started.elapsed().as_secs_f64()
            ),
            Err(e) => println!("{}: NOT FOUND: {e}", service.name()),
        }
        found.insert(service, result);
    }
    found
}

/// Runs the whole sequence; returns true when everything passed.
pub fn run(root: &Path, options: &Options) -> Result<bool, String> {
    let selected = matrix::select(&options.backends)?;
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let started = Instant::now();
    println!(
        "xtask test-all: backends {}{}",
        selected
            .iter()
            .map(|b| b.name)
            .collect::<Vec<_>>()
            .join(", "),
        if ci { " (CI)" } else { "" }
    );

    // The servers, Docker engine and tools the rows need, before the first row runs.
    banner("setup");
    let setup_started = Instant::now();
    let setup_ok = setup::apply(root, &selected).is_empty();
    println!("{}", disk::report(root));
    let mut checks = vec![("setup", setup_ok, setup_started.elapsed().as_secs_f64())];

    let services = discover(&selected);

    let deny_doc_warnings: &[(&str, &str)] = &[("RUSTDOCFLAGS", "-D warnings")];
    for (label, args, env) in [
        ("fmt", &["fmt", "--all", "--check"][..], &[][..]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ][..],
            &[][..],
        ),
        // The tidy target has `test = false` (test-all runs it as its own row), so
        // `--all-targets` leaves it out: linted by name.
        (
            "clippy-tidy",
            &[
                "clippy", "-p", "xtask", "--test", "tidy", "--", "-D", "warnings",
            ][..],
            &[][..],
        ),
        // Every public item's docs build without a warning (broken links included).
        (
            "doc",
            &["doc", "--workspace", "--all-features", "--no-deps"][..],
            deny_doc_warnings,
        ),
        // The publishable crates package: manifests, metadata, file lists and versioned path
        // dependencies as crates.io would take them. Not built from the `.crate` files
        // (`--no-verify`, see `package_args`): the rows build and test the same sources.
        ("package", &package_args()[..], &[][..]),
    ] {
        let (ok, secs) = check(root, label, args, env);
        checks.push((label, ok, secs));
    }

    let mut rows = Vec::new();
    let mut names = BTreeSet::new();
    for backend in &selected {
        let mut env = Vec::new();
        let mut missing = Vec::new();
        for service in backend.services {
            match services.get(service) {
                Some(Ok(found)) => {
                    env.push((service.env_var(), found.url.clone()));
                    env.extend(service.extra_env(found));
                }
                Some(Err(_)) | None => missing.push(service.name()),
            }
        }
        if missing.is_empty() {
            rows.push(run_backend(root, backend, &env, &mut names));
        } else {
            rows.push(Row {
                name: backend.name.to_owned(),
                counts: Counts::default(),
                refusals: 0,
                seconds: 0.0,
                problem: Some(format!("no {} server (see above)", missing.join(", "))),
            });
        }
    }
    drop(services);

    banner("summary");
    for (label, ok, secs) in &checks {
        println!(
            "{label:<11} {:>6}  {secs:.1}s",
            if *ok { "ok" } else { "FAILED" }
        );
    }
    println!();
    print!("{}", summary::table(&rows));
    let failed_checks = checks.iter().filter(|(_, ok, _)| !ok).count() as u64;
    let all_ok = failed_checks == 0 && rows.iter().all(|r| r.failures() == 0);
    if rows
        .iter()
        .any(|r| r.problem.as_deref().is_some_and(|p| p.starts_with("no ")))
        && !ci
    {
        let others: Vec<_> = rows
            .iter()
            .filter(|r| r.problem.is_none())
            .map(|r| format!("--backend {}", r.name))
            .collect();
        println!(
            "\nA server was not found. Start one (see above), or leave its backend out: \
             cargo xtask test-all {}",
            others.join(" ")
        );
    }
    println!("\n{}", disk::report(root));
    println!("total time {:.1}s", started.elapsed().as_secs_f64());
    let runs: u64 = rows.iter().map(|r| r.counts.passed + r.counts.failed).sum();
    println!("{}", summary::distinct_line(runs, names.len()));
    println!("{}", summary::refusals_line(&rows));
    println!("{}", summary::totals_line(&rows, failed_checks));
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The conformance suite records refusal-only cases under the variable this sets.
    #[test]
    fn the_refusal_log_variable_is_the_suites() {
        let suite = include_str!("../../crates/conformance/src/refusals.rs");
        assert!(
            suite.contains(&format!("REFUSAL_LOG_ENV: &str = \"{REFUSAL_LOG_ENV}\"")),
            "crates/conformance/src/refusals.rs names another variable"
        );
    }

    #[test]
    fn a_row_counts_the_distinct_refusals_its_cases_recorded() {
        let row = matrix::select(&["memory".into()]).expect("row")[0];
        let path = refusal_log(&row);
        assert_eq!(take_refusals(&path), 0, "no record: no refusal");
        std::fs::write(&path, "H\ta\nH\ta\nH\tb\n").expect("write");
        assert_eq!(take_refusals(&path), 2);
        assert!(!path.exists(), "the record is removed");
    }

    #[test]
    fn package_check_names_every_publishable_member() {
        let args = package_args();
        for name in PUBLISHABLE {
            assert!(args.windows(2).any(|w| w == ["-p", *name]), "{name}");
        }
        // Every member is either in the list or marked `publish = false`.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let dirs = std::fs::read_dir(root.join("crates")).expect("crates/");
        let mut manifests: Vec<_> = dirs
            .flatten()
            .map(|d| d.path().join("Cargo.toml"))
            .collect();
        manifests.push(root.join("xtask/Cargo.toml"));
        for manifest in manifests {
            let text = std::fs::read_to_string(&manifest).expect("member manifest");
            let name = text
                .lines()
                .find_map(|l| l.strip_prefix("name = \"")?.strip_suffix('"'))
                .expect("package name");
            let unpublished = text.lines().any(|l| l.trim() == "publish = false");
            assert_eq!(
                PUBLISHABLE.contains(&name),
                !unpublished,
                "{}: listed in PUBLISHABLE exactly when published",
                manifest.display()
            );
        }
    }
}
