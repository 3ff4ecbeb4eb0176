//! A throwaway PostgreSQL primary with one streaming standby on loopback,
//! for the torture `failover` fault: `initdb` + `pg_ctl` of the local binaries for the
//! primary, `pg_basebackup -R` for the standby, both on free ports of 127.0.0.1. The URL
//! names both hosts (`postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/test?
//! target_session_attrs=read-write`), so a client follows the primary across a failover.
//!
//! The pair's dir holds an executable `failover` script (`standby_failover.sh` behind a
//! generated header): it stops the primary with `-m immediate`, promotes the standby and
//! builds a new standby on the old primary's port. `LEASE_POSTGRES_STANDBY_URL` names the
//! pair, `LEASE_POSTGRES_STANDBY_FAILOVER` its script.
//!
//! The standby is synchronous (`synchronous_standby_names = '*'`,
//! `synchronous_commit = on`); a client switches it to asynchronous with
//! `ALTER SYSTEM SET synchronous_standby_names = ''` and `pg_reload_conf()` on the primary
//! (the torture run's `--replication async`, its negative control). The setting lives in
//! `postgresql.auto.conf`, which `pg_basebackup` copies, so it survives the rebuilds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::found::{Found, failover_pair_from_env, failover_script_of};
use super::postgres::{as_user, cluster_user, find_bin_dir, psql_command, stop_cluster};
use super::probe;
use super::workdir::{log_tail, temp_dir};
use crate::cleanup;
use crate::process::{is_executable, run_ok, which};

/// The variable naming the pair's multi-host URL.
pub const ENV: &str = "LEASE_POSTGRES_STANDBY_URL";
/// The variable naming the pair's failover script.
pub const FAILOVER_ENV: &str = "LEASE_POSTGRES_STANDBY_FAILOVER";
/// The failover script's body (its header sets the pair's paths).
const SCRIPT: &str = include_str!("standby_failover.sh");

/// Server options of both nodes, after `-p PORT`: loopback only, a private socket dir, and
/// the throwaway speed settings except `synchronous_commit` (which stays on: the pair
/// exists to measure what a commit's acknowledgement promises). fsync stays off: the
/// fault stops a server process, it never loses the machine's page cache.
pub fn server_options(socket_dir: &Path) -> String {
    format!(
        "-k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
         -c max_connections=200 -c wal_level=replica -c max_wal_senders=10 -c hot_standby=on",
        socket_dir.display()
    )
}

/// Lines appended to the primary's `postgresql.conf` (copied to every standby).
const REPLICATION_CONF: &str = "\n# lease-xtask standby pair\n\
synchronous_commit = on\n\
wal_sender_timeout = 5s\n\
wal_receiver_status_interval = 1s\n";
/// Appended to both nodes' `postgresql.conf` once the standby streams (earlier, the
/// primary's own `createdb` would wait for a standby that does not exist yet).
const SYNC_CONF: &str = "synchronous_standby_names = '*'\n";

/// `LEASE_POSTGRES_STANDBY_URL` and `LEASE_POSTGRES_STANDBY_FAILOVER` when both are set,
/// else a throwaway pair.
pub fn discover() -> Result<Found, String> {
    if let Some(found) = failover_pair_from_env(ENV, FAILOVER_ENV) {
        return Ok(found);
    }
    throwaway_pair().map_err(|e| format!("{ENV} not set; a throwaway pair: {e}"))
}

/// The failover script of a pair found by [`discover`]: `LEASE_POSTGRES_STANDBY_FAILOVER`,
/// else `failover` in the throwaway pair's dir.
pub fn failover_script(found: &Found) -> Option<String> {
    failover_script_of(found, FAILOVER_ENV)
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The script written into the pair's dir: a header naming the pair, then the body.
pub fn script(dir: &Path, bin: &Path, as_root: bool) -> String {
    format!(
        "#!/bin/sh\nPAIR_DIR={}\nPG_BIN={}\nPAIR_AS={}\nPAIR_OPTS={}\n{SCRIPT}",
        shell_quote(&dir.to_string_lossy()),
        shell_quote(&bin.to_string_lossy()),
        if as_root {
            shell_quote("runuser -u postgres --")
        } else {
            "''".to_owned()
        },
        shell_quote(&server_options(dir)),
    )
}

/// Starts the pair and waits until the standby streams synchronously.
pub fn throwaway_pair() -> Result<Found, String> {
    let bin = find_bin_dir()?;
    let user = cluster_user()?;
    let started = Instant::now();
    let ports = [probe::free_port()?, probe::free_port()?];
    if ports[0] == ports[1] {
        return Err("the same free port twice".to_owned());
    }
    let dir = temp_dir("pg-pair")?;
    let guard = {
        let (bin, dir) = (bin.clone(), dir.clone());
        cleanup::register(
            format!(
                "stop the throwaway PostgreSQL pair on ports {ports:?}, remove {}",
                dir.display()
            ),
            move || {
                for node in ["a", "b"] {
                    stop_cluster(&bin, user, &dir.join(node));
                }
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    };
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))
    };
    write("a.port", &format!("{}\n", ports[0]))?;
    write("b.port", &format!("{}\n", ports[1]))?;
    write("primary", "a\n")?;
    if let Some(user) = user {
        run_ok(
            Command::new("chown").args(["-R", user]).arg(&dir),
            Duration::from_secs(30),
        )?;
    }
    let a = dir.join("a");
    run_ok(
        as_user(user, &bin.join("initdb"))
            .arg("-D")
            .arg(&a)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8"])
            .args(["--no-locale", "--no-sync"])
            .current_dir(&dir),
        Duration::from_secs(180),
    )?;
    let conf = a.join("postgresql.conf");
    let mut text =
        std::fs::read_to_string(&conf).map_err(|e| format!("{}: {e}", conf.display()))?;
    text.push_str(REPLICATION_CONF);
    std::fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))?;
    start_node(&bin, user, &dir, "a", ports[0])?;
    let createdb = Some(bin.join("createdb"))
        .filter(|p| is_executable(p))
        .or_else(|| which("createdb"))
        .ok_or("no createdb next to pg_ctl or on PATH")?;
    run_ok(
        Command::new(createdb)
            .args(["-h", "127.0.0.1", "-p", &ports[0].to_string()])
            .args(["-U", "postgres", "-w", "test"]),
        Duration::from_secs(60),
    )?;
    run_ok(
        as_user(user, &bin.join("pg_basebackup"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &ports[0].to_string(),
                "-U",
                "postgres",
            ])
            .arg("-D")
            .arg(dir.join("b"))
            .args(["-R", "-X", "stream", "-c", "fast"])
            .current_dir(&dir),
        Duration::from_secs(120),
    )?;
    start_node(&bin, user, &dir, "b", ports[1])?;
    for node in ["a", "b"] {
        let conf = dir.join(node).join("postgresql.conf");
        let mut text =
            std::fs::read_to_string(&conf).map_err(|e| format!("{}: {e}", conf.display()))?;
        text.push_str(SYNC_CONF);
        std::fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))?;
        run_ok(
            as_user(user, &bin.join("pg_ctl"))
                .arg("-D")
                .arg(dir.join(node))
                .arg("reload")
                .current_dir(&dir),
            Duration::from_secs(30),
        )?;
    }
    let psql = which("psql").ok_or("no psql on PATH")?;
    let primary = format!("postgres://postgres@127.0.0.1:{}/postgres", ports[0]);
    probe::wait_until(
        Duration::from_secs(60),
        || {
            let state = run_ok(
                psql_command(&psql, &primary).args([
                    "-c",
                    "SELECT string_agg(sync_state, ',') FROM pg_stat_replication",
                ]),
                Duration::from_secs(10),
            )?;
            if state.trim() == "sync" {
                Ok(())
            } else {
                Err(format!("standby sync_state {:?}", state.trim()))
            }
        },
        || Ok(()),
    )
    .map_err(|e| format!("{e}{}", log_tail(&dir.join("b.log"), 10)))?;
    let script_path = dir.join("failover");
    std::fs::write(&script_path, script(&dir, &bin, user.is_some()))
        .map_err(|e| format!("{}: {e}", script_path.display()))?;
    run_ok(
        Command::new("chmod").arg("+x").arg(&script_path),
        Duration::from_secs(10),
    )?;
    Ok(Found {
        url: url(ports),
        how: format!(
            "a throwaway primary and synchronous standby from {} in {} on ports {} and {}, \
             ready in {:.1}s",
            bin.display(),
            dir.display(),
            ports[0],
            ports[1],
            started.elapsed().as_secs_f64()
        ),
        workdir: Some(dir),
        _guard: Some(guard),
    })
}

/// The multi-host URL of a pair on `ports`.
pub fn url(ports: [u16; 2]) -> String {
    format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/test?target_session_attrs=read-write",
        ports[0], ports[1]
    )
}

fn start_node(
    bin: &Path,
    user: Option<&str>,
    dir: &Path,
    node: &str,
    port: u16,
) -> Result<(), String> {
    let log: PathBuf = dir.join(format!("{node}.log"));
    run_ok(
        as_user(user, &bin.join("pg_ctl"))
            .arg("-D")
            .arg(dir.join(node))
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "120", "-o"])
            .arg(format!("-p {port} {}", server_options(dir)))
            .arg("start")
            .current_dir(dir),
        Duration::from_secs(180),
    )
    .map(|_| ())
    .map_err(|e| format!("{e}{}", log_tail(&log, 10)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_both_hosts_and_wants_a_writable_one() {
        assert_eq!(
            url([5433, 5434]),
            "postgres://postgres@127.0.0.1:5433,127.0.0.1:5434/test?target_session_attrs=read-write"
        );
        let s = script(
            Path::new("/tmp/p'q"),
            Path::new("/usr/lib/postgresql/15/bin"),
            true,
        );
        assert!(s.starts_with("#!/bin/sh\nPAIR_DIR='/tmp/p'\\''q'\n"), "{s}");
        assert!(s.contains("PAIR_AS='runuser -u postgres --'"), "{s}");
        assert!(
            s.contains("pg_ctl\" -D \"$PAIR_DIR/$primary\" -m immediate"),
            "{s}"
        );
        assert!(!server_options(Path::new("/tmp")).contains("synchronous_commit"));
    }

    /// Starts a real pair, fails it over once (the standby takes over, a new standby is
    /// built on the old port and streams synchronously again), then removes it.
    #[test]
    fn throwaway_pair_fails_over_and_is_removed() {
        let found = throwaway_pair().expect("pair");
        eprintln!("{}", found.how);
        let script = failover_script(&found).expect("script");
        let dir = found.workdir.clone().expect("dir");
        run_ok(Command::new("sh").arg(&script), Duration::from_secs(120)).expect("failover");
        assert_eq!(
            std::fs::read_to_string(dir.join("primary"))
                .expect("primary")
                .trim(),
            "b"
        );
        let psql = which("psql").expect("psql");
        let port = std::fs::read_to_string(dir.join("b.port")).expect("port");
        let new_primary = format!("postgres://postgres@127.0.0.1:{}/test", port.trim());
        probe::wait_until(
            Duration::from_secs(60),
            || {
                let s = run_ok(
                    psql_command(&psql, &new_primary).args([
                        "-c",
                        "SELECT pg_is_in_recovery()::text || ',' || \
                         coalesce(string_agg(sync_state, ','), '') FROM pg_stat_replication",
                    ]),
                    Duration::from_secs(10),
                )?;
                if s.trim() == "false,sync" {
                    Ok(())
                } else {
                    Err(s)
                }
            },
            || Ok(()),
        )
        .expect("the new primary has a synchronous standby again");
        drop(found);
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
}
