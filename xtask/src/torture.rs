//! `cargo xtask torture`: nemesis runs of each backend. For each selected
//! backend it finds a server the way test-all does (or, for the `restart` fault, starts a
//! throwaway one it may restart), then runs `cargo run -p lease-torture -- run` with the
//! server's URL, the restart command and every other argument, and prints a summary.
//!
//! The `restart` fault never touches a shared server: PostgreSQL restarts need a throwaway
//! cluster from local initdb/pg_ctl (`pg_ctl restart -m immediate`, a crash and recovery),
//! Redis restarts a throwaway `redis-server` started here with `appendonly yes` and
//! `appendfsync always` (SIGKILL, then start again). A Redis without persistence loses the
//! token counter on restart, which would break fencing: the torture run must not pass there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cleanup::{self, Guard};
use crate::process::{run_ok, which};
use crate::services::{Found, Service, cluster_failover, postgres, probe, standby, url};

/// What `cargo xtask torture --help` prints after the options.
pub const ABOUT: &str = "\
Runs lease-torture for each backend (all three by default): runtime processes running
multi-step workflows under a seeded fault schedule, then the history checker; exits non-zero
on any violation. --release builds lease-torture optimised (the long manual runs).
ARGS are passed to `lease-torture run`:
  --processes N --concurrency N --executions N --duration SECS --seed N
  --faults pause,kill,drop,slow-renew,restart,failover,partition,loss,latency|all
  (default all) --fault-every MS --lease-ms MS --liveness SECS --keep --json FILE
  --timeline FILE
  --clock-skew (every runtime under libfaketime: clock off by up to an hour, 0.5x-2x)
  --netns (each runtime in its own network namespace: partition, loss and latency need it;
  root, ip and nft)
  --app-write fenced|unfenced --effects helper|unfenced (unfenced: negative controls)
  --cancel-every N (history rule 6); --keys N --keyed-percent PCT --key-limit N
  --priorities N (history rule 7; every backend but a partitioned Redis namespace)
  --attempt-limit N --failing-percent PCT --workflow-attempt-limit N (rule 11);
  --rate STARTS/MS --ordered-keys N
  (rules 12 and 13; a backend without them runs on, its report naming the rules NOT JUDGED)
  --break-control pause,priority,schedule,attempts,rate,ordering (negative controls)
  --replication sync|async|min-replicas|wait --failover-lag on|off
  (`cargo run -p lease-torture -- run --help` describes each; durations also take 90s, 2m)
With `restart` (or all), PostgreSQL runs on a throwaway cluster from local initdb/pg_ctl
(synchronous_commit on) and Redis on a throwaway redis-server with appendonly yes,
appendfsync always; without it the servers are found as test-all finds them. With
`failover` named in --faults, PostgreSQL runs on a throwaway primary with a streaming
standby (services::standby; --replication sync by default, async is the negative control)
and Redis on a throwaway 3-primary cluster (services::cluster_failover), and
the run gets its failover script. SQLite skips drop, restart, failover, --clock-skew and the
network faults.";

/// The backends `--backend` names.
const BACKENDS: [&str; 3] = ["sqlite", "postgres", "redis"];

/// Options of `cargo xtask torture`.
#[derive(Debug, PartialEq, Eq, clap::Args)]
pub struct Options {
    /// sqlite | postgres | redis | all (repeatable or comma-separated; default all).
    #[arg(long = "backend", value_name = "NAME", value_delimiter = ',',
          value_parser = ["sqlite", "postgres", "redis", "all"])]
    pub backends: Vec<String>,
    /// Build and run lease-torture optimised (`cargo run --release`): the long manual runs
    /// use it, so a run's executions are not bounded by a debug build's speed.
    #[arg(long)]
    pub release: bool,
    /// Arguments of `lease-torture run`, passed as given.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<String>,
}

impl Options {
    /// The selected backends in the order given, each once (all three for none or `all`).
    pub fn selected(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for name in &self.backends {
            // clap lets through only the three names and `all`.
            let chosen: &[&'static str] = match BACKENDS.iter().find(|b| *b == name) {
                Some(b) => std::slice::from_ref(b),
                None => &BACKENDS,
            };
            for b in chosen {
                if !names.contains(b) {
                    names.push(b);
                }
            }
        }
        if names.is_empty() {
            names.extend(BACKENDS);
        }
        names
    }
}

/// The value of the last `--faults` argument (`all` when there is none).
fn faults_arg(args: &[String]) -> String {
    let mut faults = "all".to_owned();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--faults" {
            if let Some(v) = it.next() {
                faults = v.clone();
            }
        } else if let Some(v) = arg.strip_prefix("--faults=") {
            faults = v.to_owned();
        }
    }
    faults
}

/// Whether the `--faults` argument asks for server restarts (default `all` does).
pub fn wants_restart(args: &[String]) -> bool {
    let faults = faults_arg(args);
    faults == "all" || faults.split(',').any(|f| f.trim() == "restart")
}

/// Whether `--faults` names `failover` (`all` does not: the failover servers are a pair or a
/// cluster, not the restartable single server).
pub fn wants_failover(args: &[String]) -> bool {
    faults_arg(args).split(',').any(|f| f.trim() == "failover")
}

/// A server for one run: its URL, the restart and failover commands (throwaway servers
/// only), and whatever keeps it alive.
struct Server {
    url: Option<String>,
    restart: Option<String>,
    failover: Option<String>,
    // Before `_found`: a failover cluster's guard of restarted nodes must run before the
    // cluster's own guard removes its dir.
    _guard: Option<Guard>,
    _found: Option<Found>,
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A throwaway PostgreSQL cluster (services::postgres) that `pg_ctl restart -m immediate`
/// may crash and recover. Its commits are made durable against that crash: the throwaway
/// settings turn `synchronous_commit` off, which could lose the last commits (a claim, a
/// step) in an immediate stop, so the database sets it back on.
fn postgres_restartable() -> Result<Server, String> {
    let found = postgres::throwaway_cluster()?;
    let dir = found
        .workdir
        .clone()
        .ok_or("throwaway cluster without a dir")?;
    let psql = which("psql").ok_or("no psql on PATH")?;
    run_ok(
        Command::new(psql).args([
            "-X",
            "-q",
            "-w",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            &found.url,
            "-c",
            "ALTER DATABASE test SET synchronous_commit = on",
        ]),
        Duration::from_secs(30),
    )?;
    let bin = postgres::find_bin_dir()?;
    let root = run_ok(Command::new("id").arg("-u"), Duration::from_secs(10))?.trim() == "0";
    let pg_ctl = format!(
        "{}{} -D {} -l {} -m immediate -w -t 60 restart",
        if root { "runuser -u postgres -- " } else { "" },
        shell_quote(&bin.join("pg_ctl").to_string_lossy()),
        shell_quote(&dir.join("data").to_string_lossy()),
        shell_quote(&dir.join("postgres.log").to_string_lossy()),
    );
    eprintln!("postgres: {} (restartable)", found.how);
    Ok(Server {
        url: Some(found.url.clone()),
        restart: Some(format!("cd / && {pg_ctl} >/dev/null")),
        failover: None,
        _found: Some(found),
        _guard: None,
    })
}

/// The arguments of a restartable throwaway `redis-server`: persistence on, every write
/// fsynced before its reply, so a SIGKILL loses no acknowledged write (the token counter
/// above all).
pub fn redis_args(port: u16, dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy();
    vec![
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--save".into(),
        String::new(),
        "--appendonly".into(),
        "yes".into(),
        "--appendfsync".into(),
        "always".into(),
        "--daemonize".into(),
        "yes".into(),
        "--dir".into(),
        d.to_string(),
        "--pidfile".into(),
        format!("{d}/redis.pid"),
        "--logfile".into(),
        format!("{d}/redis.log"),
    ]
}

fn redis_restartable() -> Result<Server, String> {
    let binary = which("redis-server").ok_or("no redis-server on PATH")?;
    let port = probe::free_port()?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "lease-xtask-torture-redis-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let pidfile = dir.join("redis.pid");
    let guard = {
        let (dir, pidfile) = (dir.clone(), pidfile.clone());
        cleanup::register(
            format!(
                "stop the throwaway redis-server on port {port}, remove {}",
                dir.display()
            ),
            move || {
                if let Ok(pid) = std::fs::read_to_string(&pidfile) {
                    let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
                }
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    };
    let args = redis_args(port, &dir);
    run_ok(Command::new(&binary).args(&args), Duration::from_secs(30))?;
    probe::wait_until(
        Duration::from_secs(30),
        || probe::redis("127.0.0.1", port, Duration::from_secs(2)),
        || Ok(()),
    )?;
    let start = std::iter::once(binary.to_string_lossy().into_owned())
        .chain(args)
        .map(|a| shell_quote(&a))
        .collect::<Vec<_>>()
        .join(" ");
    let pid = shell_quote(&pidfile.to_string_lossy());
    // SIGKILL (the socket closes at once, even if nobody reaps the process), then start
    // again and wait until it answers (it replays the append-only file first).
    let restart = format!(
        "kill -KILL \"$(cat {pid})\"; sleep 0.2; {start} && \
         for i in $(seq 1 300); do redis-cli -p {port} ping 2>/dev/null | grep -q PONG && exit 0; sleep 0.1; done; exit 1"
    );
    eprintln!(
        "redis: a throwaway {} on port {port} in {} (appendonly yes, appendfsync always; restartable)",
        binary.display(),
        dir.display()
    );
    Ok(Server {
        url: Some(format!("redis://127.0.0.1:{port}")),
        restart: Some(restart),
        failover: None,
        _found: None,
        _guard: Some(guard),
    })
}

/// A throwaway PostgreSQL primary with a streaming standby and its failover script.
fn postgres_pair() -> Result<Server, String> {
    let found = standby::throwaway_pair()?;
    let script = standby::failover_script(&found).ok_or("pair without a failover script")?;
    eprintln!("postgres: {}", found.how);
    Ok(Server {
        url: Some(found.url.clone()),
        restart: None,
        failover: Some(format!("sh {}", shell_quote(&script))),
        _found: Some(found),
        _guard: None,
    })
}

/// The partitions of a torture run's namespace on the failover cluster: as many as the
/// cluster has primaries, so the controller spreads them one per primary.
const CLUSTER_PARTITIONS: u16 = 3;

/// A throwaway Redis Cluster with its failover script. The namespace has
/// [`CLUSTER_PARTITIONS`] partitions (`?partitions=` on the URL); the controller picks a
/// namespace whose partitions land on the three primaries and names the script its home key
/// and each partition's, which it fails over in turn, so every failover hits the run.
fn redis_cluster() -> Result<Server, String> {
    let c = cluster_failover::throwaway()?;
    eprintln!("redis: {}", c.found.how);
    Ok(Server {
        url: Some(with_partitions(&c.found.url, CLUSTER_PARTITIONS)),
        restart: None,
        failover: Some(format!("sh {}", shell_quote(&c.script.to_string_lossy()))),
        _guard: None,
        _found: Some(c.found),
    })
}

/// `url` with `partitions=N` added to its query.
fn with_partitions(url: &str, partitions: u16) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}partitions={partitions}")
}

fn server_for(backend: &str, restart: bool, failover: bool) -> Result<Server, String> {
    let discovered = |service: Service| -> Result<Server, String> {
        let found = service.discover()?;
        eprintln!(
            "{}: found via {} -> {}",
            service.name(),
            found.how,
            url::redact(&found.url)
        );
        Ok(Server {
            url: Some(found.url.clone()),
            restart: None,
            failover: None,
            _found: Some(found),
            _guard: None,
        })
    };
    match (backend, restart) {
        ("postgres", _) if failover => postgres_pair(),
        ("redis", _) if failover => redis_cluster(),
        ("postgres", true) => postgres_restartable(),
        ("redis", true) => redis_restartable(),
        ("postgres", false) => discovered(Service::Postgres),
        ("redis", false) => discovered(Service::Redis),
        _ => Ok(Server {
            url: None,
            restart: None,
            failover: None,
            _found: None,
            _guard: None,
        }),
    }
}

/// Runs the command; returns whether every backend's run passed.
pub fn run(root: &Path, options: &Options) -> bool {
    let rest = &options.args;
    let restart = wants_restart(rest);
    let failover = wants_failover(rest);
    let mut results = Vec::new();
    for backend in options.selected() {
        println!("\n==> torture: {backend}");
        let started = Instant::now();
        let server = match server_for(backend, restart, failover) {
            Ok(s) => s,
            Err(e) => {
                println!("{backend}: no server: {e}");
                results.push((backend, false, 0.0));
                continue;
            }
        };
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.current_dir(root)
            .args(["run", "--quiet", "-p", "lease-torture"]);
        if options.release {
            cmd.arg("--release");
        }
        cmd.args(["--", "run"]);
        if let Some(u) = &server.url {
            cmd.args(["--url", u]);
        }
        if let Some(r) = &server.restart {
            cmd.args(["--restart-cmd", r]);
        }
        if let Some(f) = &server.failover {
            cmd.args(["--failover-cmd", f]);
        }
        cmd.args(rest);
        let ok = match cleanup::run_child(&mut cmd) {
            Ok(status) => status.success(),
            Err(e) => {
                println!("cannot run cargo: {e}");
                false
            }
        };
        drop(server);
        results.push((backend, ok, started.elapsed().as_secs_f64()));
    }
    println!("\n==> torture summary");
    for (backend, ok, secs) in &results {
        println!(
            "{backend:<9} {:>6}  {secs:.1}s",
            if *ok { "ok" } else { "FAILED" }
        );
    }
    results.iter().all(|(_, ok, _)| *ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn restart_is_asked_for_by_default_and_by_name() {
        assert!(wants_restart(&[]));
        assert!(wants_restart(&args(&["--faults", "pause,restart"])));
        assert!(!wants_restart(&args(&["--faults=pause,kill"])));
    }

    #[test]
    fn failover_is_asked_for_only_by_name() {
        assert!(!wants_failover(&[]));
        assert!(!wants_failover(&args(&["--faults", "all"])));
        assert!(wants_failover(&args(&["--faults=kill,failover"])));
    }

    #[test]
    fn the_failover_cluster_url_asks_for_partitions() {
        assert_eq!(
            with_partitions("redis+cluster://a:1", 3),
            "redis+cluster://a:1?partitions=3"
        );
        assert_eq!(
            with_partitions("redis+cluster://a:1?x=y", 2),
            "redis+cluster://a:1?x=y&partitions=2"
        );
    }

    #[test]
    fn restartable_redis_persists_every_write() {
        let a = redis_args(7001, Path::new("/tmp/r")).join(" ");
        assert!(a.contains("--appendonly yes --appendfsync always"), "{a}");
    }
}
