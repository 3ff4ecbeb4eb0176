//! What test-all sets up before its rows run: the shared PostgreSQL and
//! Redis on their default ports when they are down and startable, a Docker engine for the
//! `containers` row, the tools of the torture row (libfaketime, nft, ip), and Chromium with
//! its driver for the `browser` row. As root with
//! apt-get it installs the Debian packages that are missing and says so; otherwise it fails
//! naming the one command to run. [`plan`] is the decision, [`apply`] carries it out.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::matrix::Backend;
use crate::process::{run_ok, which};
use crate::services::{Service, probe};

/// What the selected rows need.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// PostgreSQL on 127.0.0.1:5432.
    pub postgres: bool,
    /// Redis on 127.0.0.1:6379.
    pub redis: bool,
    /// A Docker engine (the `containers` row).
    pub docker: bool,
    /// libfaketime and nft/ip (the `torture` row's clock-skew and network-fault tests).
    pub torture_tools: bool,
    /// Chromium and chromedriver (the `browser` row).
    pub browser: bool,
}

impl Needs {
    /// The needs of `backends`.
    pub fn of(backends: &[Backend]) -> Needs {
        let uses = |s: Service| backends.iter().any(|b| b.services.contains(&s));
        Needs {
            postgres: uses(Service::Postgres),
            redis: uses(Service::Redis),
            docker: uses(Service::PostgresContainer) || uses(Service::RedisContainer),
            torture_tools: backends.iter().any(|b| b.name == "torture"),
            browser: backends.iter().any(|b| b.name == "browser"),
        }
    }
}

/// What this machine has now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct State {
    /// PostgreSQL answers on 127.0.0.1:5432.
    pub postgres_up: bool,
    /// `pg_ctlcluster` and one cluster under /etc/postgresql.
    pub postgres_startable: bool,
    /// Redis answers on 127.0.0.1:6379.
    pub redis_up: bool,
    /// `redis-server` is on PATH.
    pub redis_startable: bool,
    /// `docker info` succeeds.
    pub docker_up: bool,
    /// `dockerd` is on PATH.
    pub dockerd_installed: bool,
    /// libfaketimeMT.so.1 is installed.
    pub faketime: bool,
    /// `nft` and `ip` are on PATH.
    pub nft_and_ip: bool,
    /// `chromium` and `chromedriver` are on PATH.
    pub browser: bool,
    /// Running as root.
    pub root: bool,
    /// `apt-get` is on PATH.
    pub apt: bool,
}

/// One set-up step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `pg_ctlcluster <version> main start`.
    StartPostgres,
    /// `redis-server --daemonize yes` on 127.0.0.1:6379 without persistence.
    StartRedis,
    /// `apt-get install -y` of these Debian packages.
    Install(Vec<&'static str>),
    /// `dockerd --bridge=none --iptables=false` in the background.
    StartDockerd,
}

/// The steps to take and what cannot be done here, each naming the command to run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Steps in order.
    pub steps: Vec<Step>,
    /// Problems, each naming the one command that fixes it.
    pub problems: Vec<String>,
}

/// Decides what to do for `needs` on a machine in `state`.
pub fn plan(needs: Needs, state: State) -> Plan {
    let mut plan = Plan::default();
    if needs.postgres && !state.postgres_up && state.postgres_startable {
        plan.steps.push(Step::StartPostgres);
    }
    if needs.redis && !state.redis_up && state.redis_startable {
        plan.steps.push(Step::StartRedis);
    }
    let docker_missing = needs.docker && !state.docker_up;
    let mut packages = Vec::new();
    if docker_missing && !state.dockerd_installed {
        packages.push("docker.io");
    }
    if needs.torture_tools && !state.faketime {
        packages.extend(["faketime", "libfaketime"]);
    }
    if needs.torture_tools && !state.nft_and_ip {
        packages.extend(["nftables", "iproute2"]);
    }
    if needs.browser && !state.browser {
        packages.extend(["chromium", "chromium-driver"]);
    }
    let can_install = state.root && state.apt;
    if !packages.is_empty() {
        if can_install {
            plan.steps.push(Step::Install(packages));
        } else {
            plan.problems.push(format!(
                "missing Debian packages {}: run `sudo apt-get install -y {}`",
                packages.join(", "),
                packages.join(" ")
            ));
        }
    }
    if docker_missing {
        if state.root && (state.dockerd_installed || can_install) {
            plan.steps.push(Step::StartDockerd);
        } else if state.dockerd_installed || !can_install {
            plan.problems.push(
                "no Docker engine answers: run `sudo dockerd --bridge=none --iptables=false &`"
                    .to_owned(),
            );
        }
    }
    if needs.torture_tools && !state.root {
        plan.problems.push(
            "the network-fault torture test needs root (network namespaces): run \
             `sudo cargo xtask test-all`"
                .to_owned(),
        );
    }
    plan
}

fn on_path(name: &str) -> bool {
    which(name).is_some()
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    which(program)
        .is_some_and(|p| run_ok(Command::new(p).args(args), Duration::from_secs(20)).is_ok())
}

/// The one PostgreSQL cluster version under /etc/postgresql, if there is exactly one.
fn postgres_version() -> Option<String> {
    let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    (versions.len() == 1).then(|| versions.remove(0))
}

fn faketime_installed() -> bool {
    std::fs::read_dir("/usr/lib").is_ok_and(|dirs| {
        dirs.flatten()
            .any(|d| d.path().join("faketime/libfaketimeMT.so.1").exists())
    })
}

fn postgres_up() -> bool {
    probe::postgres("127.0.0.1", 5432, Duration::from_secs(2)).is_ok()
}

fn redis_up() -> bool {
    probe::redis("127.0.0.1", 6379, Duration::from_secs(2)).is_ok()
}

fn docker_up() -> bool {
    succeeds("docker", &["info"])
}

/// Looks at this machine.
pub fn state() -> State {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    State {
        postgres_up: postgres_up(),
        postgres_startable: on_path("pg_ctlcluster") && postgres_version().is_some(),
        redis_up: redis_up(),
        redis_startable: on_path("redis-server"),
        docker_up: docker_up(),
        dockerd_installed: on_path("dockerd"),
        faketime: faketime_installed(),
        nft_and_ip: on_path("nft") && on_path("ip"),
        browser: on_path("chromium") && on_path("chromedriver"),
        root,
        apt: on_path("apt-get"),
    }
}

fn wait(what: &str, seconds: u64, up: fn() -> bool) -> Result<(), String> {
    probe::wait_until(
        Duration::from_secs(seconds),
        || {
            up().then_some(())
                .ok_or_else(|| format!("{what} does not answer"))
        },
        || Ok(()),
    )
}

fn install(packages: &[&str]) -> Result<(), String> {
    let get = |args: &[&str]| {
        run_ok(
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            Duration::from_secs(900),
        )
    };
    let mut args = vec!["install", "-y", "-q"];
    args.extend(packages);
    get(&args)
        .or_else(|_| get(&["update", "-q"]).and_then(|_| get(&args)))
        .map(drop)
}

fn start_dockerd(root: &Path) -> Result<(), String> {
    let dir = root.join("target/ci");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let log_path = dir.join("dockerd.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("dockerd.log: {e}"))?;
    let err = log.try_clone().map_err(|e| format!("dockerd.log: {e}"))?;
    println!(
        "setup: starting dockerd --bridge=none --iptables=false (log: {})",
        log_path.display()
    );
    Command::new("dockerd")
        .args(["--bridge=none", "--iptables=false"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start dockerd: {e}"))?;
    wait("the Docker engine", 60, docker_up)
}

fn apply_step(root: &Path, step: &Step) -> Result<(), String> {
    match step {
        Step::StartPostgres => {
            let version = postgres_version().ok_or("no single PostgreSQL cluster")?;
            println!("setup: starting PostgreSQL {version} (pg_ctlcluster)");
            run_ok(
                Command::new("pg_ctlcluster").args([
                    "--skip-systemctl-redirect",
                    &version,
                    "main",
                    "start",
                ]),
                Duration::from_secs(60),
            )?;
            wait("PostgreSQL", 60, postgres_up)
        }
        Step::StartRedis => {
            println!("setup: starting redis-server on 127.0.0.1:6379");
            run_ok(
                Command::new("redis-server").args([
                    "--daemonize",
                    "yes",
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    "6379",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]),
                Duration::from_secs(30),
            )?;
            wait("Redis", 30, redis_up)
        }
        Step::Install(packages) => {
            println!(
                "setup: installing the Debian packages {} (apt-get, as root)",
                packages.join(" ")
            );
            install(packages)
        }
        Step::StartDockerd => start_dockerd(root),
    }
}

/// Sets up what `backends` need; returns the problems left (empty when all is set up).
pub fn apply(root: &Path, backends: &[Backend]) -> Vec<String> {
    let plan = plan(Needs::of(backends), state());
    let mut problems = plan.problems;
    for step in &plan.steps {
        if let Err(e) = apply_step(root, step) {
            problems.push(format!("{step:?}: {e}"));
        }
    }
    for p in &problems {
        println!("setup: {p}");
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Needs = Needs {
        postgres: true,
        redis: true,
        docker: true,
        torture_tools: true,
        browser: true,
    };

    fn fresh_root() -> State {
        State {
            postgres_startable: true,
            redis_startable: true,
            root: true,
            apt: true,
            ..State::default()
        }
    }

    #[test]
    fn a_fresh_root_machine_starts_servers_installs_and_starts_dockerd() {
        let p = plan(ALL, fresh_root());
        assert_eq!(
            p.steps,
            [
                Step::StartPostgres,
                Step::StartRedis,
                Step::Install(vec![
                    "docker.io",
                    "faketime",
                    "libfaketime",
                    "nftables",
                    "iproute2",
                    "chromium",
                    "chromium-driver"
                ]),
                Step::StartDockerd,
            ]
        );
        assert!(p.problems.is_empty(), "{:?}", p.problems);
    }

    #[test]
    fn a_ready_machine_needs_nothing() {
        let ready = State {
            postgres_up: true,
            redis_up: true,
            docker_up: true,
            dockerd_installed: true,
            faketime: true,
            nft_and_ip: true,
            browser: true,
            ..fresh_root()
        };
        assert_eq!(plan(ALL, ready), Plan::default());
    }

    #[test]
    fn an_installed_engine_is_started_not_installed() {
        let s = State {
            dockerd_installed: true,
            ..fresh_root()
        };
        let needs = Needs {
            docker: true,
            ..Needs::default()
        };
        assert_eq!(plan(needs, s).steps, [Step::StartDockerd]);
    }

    #[test]
    fn without_root_each_problem_names_one_command() {
        let s = State {
            root: false,
            ..fresh_root()
        };
        let p = plan(ALL, s);
        assert_eq!(p.steps, [Step::StartPostgres, Step::StartRedis]);
        assert_eq!(p.problems.len(), 3, "{:?}", p.problems);
        assert!(p.problems[0].contains(
            "`sudo apt-get install -y docker.io faketime libfaketime nftables iproute2 chromium \
             chromium-driver`"
        ));
        assert!(p.problems[1].contains("`sudo dockerd --bridge=none --iptables=false &`"));
        assert!(p.problems[2].contains("`sudo cargo xtask test-all`"));
    }

    #[test]
    fn rows_that_need_nothing_get_nothing() {
        let memory = crate::matrix::select(&["memory".into(), "sqlite".into()]).expect("rows");
        assert_eq!(Needs::of(&memory), Needs::default());
        assert_eq!(plan(Needs::of(&memory), State::default()), Plan::default());
        let all = crate::matrix::select(&[]).expect("rows");
        assert_eq!(Needs::of(&all), ALL);
    }
}
