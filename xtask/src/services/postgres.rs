//! Finding a PostgreSQL server for lease-postgres's tests (see the parent module for the
//! order). The URL always names user `postgres` and database `test`, trust auth.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::found::Found;
use super::ways::{Way, first_that_works};
use super::workdir::{log_tail, temp_dir};
use super::{containers, probe, url};
use crate::cleanup;
use crate::process::{is_executable, output_with_timeout, run_ok, which};
use lease_testserver::env_url;

/// The variable naming the server; read by lease-postgres's tests.
pub const ENV: &str = lease_testserver::POSTGRES_ENV;
/// The usual local port.
pub const LOCAL_PORT: u16 = 5432;
/// Where Debian and Ubuntu install the server binaries, one directory per major version.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";
/// Settings for throwaway servers: durability is not needed, speed is.
const FAST_SETTINGS: [&str; 4] = lease_testserver::POSTGRES_FAST_SETTINGS;

/// Finds PostgreSQL: `LEASE_POSTGRES_URL`, then 127.0.0.1:5432, then a throwaway cluster
/// from local binaries, then a container.
pub fn discover() -> Result<Found, String> {
    if let Some(url) = env_url(ENV) {
        return from_env(url);
    }
    first_that_works(
        "PostgreSQL",
        ENV,
        &[
            Way {
                key: "local",
                what: "a server on 127.0.0.1:5432",
                start: || local_server(LOCAL_PORT),
            },
            Way {
                key: "binaries",
                what: "a throwaway cluster from local initdb/pg_ctl",
                start: throwaway_cluster,
            },
            Way {
                key: "containers",
                what: "a container through testcontainers (image built from local binaries)",
                start: containers::postgres,
            },
        ],
    )
}

fn from_env(url: String) -> Result<Found, String> {
    if let Some(ep) = url::endpoint(&url, LOCAL_PORT) {
        probe::postgres(&ep.host, ep.port, Duration::from_secs(5))
            .map_err(|e| format!("{ENV}={} does not answer: {e}", url::redact(&url)))?;
    }
    Ok(Found {
        url,
        how: ENV.to_owned(),
        workdir: None,
        _guard: None,
    })
}

/// A server already answering on `127.0.0.1:port`: the protocol probe, then `pg_isready`
/// and `psql` when installed, to confirm user `postgres` can use database `test` (which is
/// created when missing).
pub fn local_server(port: u16) -> Result<Found, String> {
    probe::postgres("127.0.0.1", port, Duration::from_secs(2))?;
    let url = lease_testserver::postgres_url_on(port);
    let mut confirmed = vec!["protocol probe"];
    if let Some(pg_isready) = which("pg_isready") {
        run_ok(
            Command::new(pg_isready).args([
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-d",
                "test",
                "-t",
                "5",
            ]),
            Duration::from_secs(15),
        )?;
        confirmed.push("pg_isready");
    }
    if let Some(psql) = which("psql") {
        if let Err(e) = select_one(&psql, &url) {
            if !e.contains("does not exist") {
                return Err(e);
            }
            let admin = format!("postgres://postgres@127.0.0.1:{port}/postgres");
            run_ok(
                psql_command(&psql, &admin).args(["-c", "CREATE DATABASE test"]),
                Duration::from_secs(30),
            )?;
            eprintln!("xtask: created database `test` on 127.0.0.1:{port}");
            select_one(&psql, &url)?;
        }
        confirmed.push("psql");
    }
    Ok(Found {
        url,
        how: format!(
            "a server answering on 127.0.0.1:{port} ({})",
            confirmed.join(", ")
        ),
        workdir: None,
        _guard: None,
    })
}

pub(super) fn psql_command(psql: &Path, url: &str) -> Command {
    let mut cmd = Command::new(psql);
    cmd.args([
        "-X",
        "-A",
        "-t",
        "-q",
        "-w",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        url,
    ])
    .env("PGCONNECT_TIMEOUT", "5");
    cmd
}

fn select_one(psql: &Path, url: &str) -> Result<(), String> {
    let out = run_ok(
        psql_command(psql, url).args(["-c", "SELECT 1"]),
        Duration::from_secs(30),
    )?;
    if out.trim() == "1" {
        Ok(())
    } else {
        Err(format!("psql answered {out:?} to SELECT 1"))
    }
}

/// The directory holding `initdb` and `pg_ctl`: the newest `/usr/lib/postgresql/*/bin`,
/// else wherever the `initdb` on PATH really lives.
pub fn find_bin_dir() -> Result<PathBuf, String> {
    let mut versions: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(DEBIAN_LIB)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = parse_version(&entry.file_name().to_string_lossy())?;
            let bin = entry.path().join("bin");
            has_cluster_tools(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    if let Some(initdb) = which("initdb") {
        let real = initdb.canonicalize().unwrap_or(initdb);
        if let Some(bin) = real.parent().filter(|b| has_cluster_tools(b)) {
            return Ok(bin.to_path_buf());
        }
    }
    Err(format!(
        "no initdb and pg_ctl under {DEBIAN_LIB}/*/bin or on PATH"
    ))
}

fn has_cluster_tools(bin: &Path) -> bool {
    is_executable(&bin.join("initdb")) && is_executable(&bin.join("pg_ctl"))
}

/// `"15"` -> `[15]`, `"9.6"` -> `[9, 6]`; `None` for anything else.
pub fn parse_version(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|p| p.parse().ok()).collect()
}

/// The user to run the cluster as: `None` when xtask is not root; `postgres` through
/// `runuser` when it is root (initdb refuses to run as root).
pub(super) fn cluster_user() -> Result<Option<&'static str>, String> {
    let uid = run_ok(Command::new("id").arg("-u"), Duration::from_secs(10))?;
    if uid.trim() != "0" {
        return Ok(None);
    }
    if which("runuser").is_none() {
        return Err("running as root, initdb refuses root, and there is no `runuser` to run it as user `postgres`".to_owned());
    }
    run_ok(
        Command::new("id").args(["-u", "postgres"]),
        Duration::from_secs(10),
    )
    .map_err(|_| {
        "running as root, initdb refuses root, and there is no `postgres` user to run it as (create one: useradd --system postgres)".to_owned()
    })?;
    Ok(Some("postgres"))
}

/// `program` as a command, run as `user` through `runuser` when one is given.
pub(super) fn as_user(user: Option<&str>, program: &Path) -> Command {
    match user {
        Some(user) => {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", user, "--"]).arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// The `pg_ctl -o` server options of a throwaway cluster.
pub fn server_options(port: u16, socket_dir: &Path) -> String {
    let mut opts = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1",
        socket_dir.display()
    );
    for setting in FAST_SETTINGS {
        opts.push_str(" -c ");
        opts.push_str(setting);
    }
    opts
}

/// Starts a throwaway cluster from local binaries: `initdb` (trust auth, user `postgres`)
/// in a fresh temp dir, `pg_ctl start` on a free port of 127.0.0.1, `createdb test`. As
/// root, initdb and pg_ctl run as user `postgres` through `runuser`. The cluster is stopped
/// (`pg_ctl stop -m immediate`) and its dir removed when the returned guard drops.
pub fn throwaway_cluster() -> Result<Found, String> {
    let bin = find_bin_dir()?;
    let user = cluster_user()?;
    let started = Instant::now();
    let port = probe::free_port()?;
    let dir = temp_dir("pg")?;
    let data = dir.join("data");
    let log = dir.join("postgres.log");
    let guard = {
        let (bin, data, dir) = (bin.clone(), data.clone(), dir.clone());
        cleanup::register(
            format!(
                "stop the throwaway PostgreSQL on port {port}, remove {}",
                dir.display()
            ),
            move || {
                stop_cluster(&bin, user, &data);
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    };
    if let Some(user) = user {
        run_ok(
            Command::new("chown").args(["-R", user]).arg(&dir),
            Duration::from_secs(30),
        )?;
    }
    run_ok(
        as_user(user, &bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ])
            .current_dir(&dir),
        Duration::from_secs(180),
    )?;
    run_ok(
        as_user(user, &bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args([
                "-w",
                "-t",
                "120",
                "-o",
                &server_options(port, &dir),
                "start",
            ])
            .current_dir(&dir),
        Duration::from_secs(180),
    )
    .map_err(|e| format!("{e}{}", log_tail(&log, 10)))?;
    let createdb = Some(bin.join("createdb"))
        .filter(|p| is_executable(p))
        .or_else(|| which("createdb"))
        .ok_or("no createdb next to pg_ctl or on PATH")?;
    run_ok(
        Command::new(createdb).args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-w",
            "test",
        ]),
        Duration::from_secs(60),
    )?;
    probe::postgres("127.0.0.1", port, Duration::from_secs(5))?;
    let as_whom = user.map_or(String::new(), |u| format!(", as user {u} via runuser"));
    Ok(Found {
        url: lease_testserver::postgres_url_on(port),
        how: format!(
            "a throwaway cluster from {} in {} on port {port}{as_whom}, ready in {:.1}s",
            bin.display(),
            dir.display(),
            started.elapsed().as_secs_f64()
        ),
        workdir: Some(dir),
        _guard: Some(guard),
    })
}

/// Stops a throwaway cluster: `pg_ctl stop -m immediate`, or SIGKILL to the postmaster
/// named in `postmaster.pid` when that fails.
pub(super) fn stop_cluster(bin: &Path, user: Option<&str>, data: &Path) {
    let pid_file = data.join("postmaster.pid");
    if !pid_file.exists() {
        return;
    }
    let stopped = output_with_timeout(
        as_user(user, &bin.join("pg_ctl"))
            .arg("-D")
            .arg(data)
            .args(["-m", "immediate", "-w", "-t", "30", "stop"])
            .current_dir("/"),
        Duration::from_secs(60),
    )
    .is_ok_and(|out| out.status.success());
    if !stopped {
        let pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|text| text.lines().next().map(str::to_owned));
        if let Some(pid) = pid {
            let _ = Command::new("kill").args(["-KILL", pid.trim()]).status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_numerically() {
        assert_eq!(parse_version("15"), Some(vec![15]));
        assert_eq!(parse_version("9.6"), Some(vec![9, 6]));
        assert_eq!(parse_version("common"), None);
        let mut v = [
            parse_version("9.6"),
            parse_version("16"),
            parse_version("10"),
        ];
        v.sort();
        assert_eq!(v.last(), Some(&Some(vec![16])));
    }

    #[test]
    fn server_options_listen_on_loopback_with_a_private_socket_dir() {
        assert_eq!(
            server_options(54321, Path::new("/tmp/x")),
            "-p 54321 -k /tmp/x -c listen_addresses=127.0.0.1 -c fsync=off \
             -c full_page_writes=off -c synchronous_commit=off -c max_connections=200"
        );
    }

    /// Starts a real throwaway cluster from local binaries, checks it answers, stops it and
    /// checks its directory is gone. Needs initdb/pg_ctl (and, as root, runuser and a
    /// `postgres` user), which CI has (.ci/run needs them too).
    #[test]
    fn throwaway_cluster_starts_and_is_removed() {
        let found = throwaway_cluster().expect("throwaway cluster");
        eprintln!("{}", found.how);
        let ep = url::endpoint(&found.url, 5432).expect("endpoint");
        probe::postgres(&ep.host, ep.port, Duration::from_secs(5)).expect("answers");
        if let Some(psql) = which("psql") {
            select_one(&psql, &found.url).expect("database test exists");
        }
        let dir = found.workdir.clone().expect("workdir");
        assert!(dir.exists());
        drop(found);
        assert!(!dir.exists(), "{} left behind", dir.display());
        assert!(probe::postgres(&ep.host, ep.port, Duration::from_secs(2)).is_err());
    }
}
