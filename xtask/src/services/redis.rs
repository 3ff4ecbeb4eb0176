//! Finding a Redis server for lease-redis's tests (see the parent module for the order).

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::found::Found;
use super::ways::{Way, first_that_works};
use super::workdir::{log_tail, temp_dir};
use super::{containers, probe, url};
use crate::cleanup;
use crate::process::which;
use lease_testserver::env_url;

/// The variable naming the server; read by lease-redis's tests.
pub const ENV: &str = lease_testserver::REDIS_ENV;
/// The usual local port.
pub const LOCAL_PORT: u16 = 6379;

/// Finds Redis: `LEASE_REDIS_URL`, then 127.0.0.1:6379, then a throwaway `redis-server`
/// from a local binary, then a container.
pub fn discover() -> Result<Found, String> {
    if let Some(url) = env_url(ENV) {
        if let Some(ep) = url::endpoint(&url, LOCAL_PORT) {
            probe::redis(&ep.host, ep.port, Duration::from_secs(5))
                .map_err(|e| format!("{ENV}={} does not answer: {e}", url::redact(&url)))?;
        }
        return Ok(Found {
            url,
            how: ENV.to_owned(),
            workdir: None,
            _guard: None,
        });
    }
    first_that_works(
        "Redis",
        ENV,
        &[
            Way {
                key: "local",
                what: "a server on 127.0.0.1:6379",
                start: || local_server(LOCAL_PORT),
            },
            Way {
                key: "binaries",
                what: "a throwaway redis-server from a local binary",
                start: throwaway_server,
            },
            Way {
                key: "containers",
                what: "a container through testcontainers (image built from local binaries)",
                start: containers::redis,
            },
        ],
    )
}

/// A server already answering `PING` on `127.0.0.1:port`.
pub fn local_server(port: u16) -> Result<Found, String> {
    probe::redis("127.0.0.1", port, Duration::from_secs(2))?;
    Ok(Found {
        url: lease_testserver::redis_url_on(port),
        how: format!("a server answering PING on 127.0.0.1:{port}"),
        workdir: None,
        _guard: None,
    })
}

/// The arguments of a throwaway `redis-server`: loopback only, no persistence.
pub fn server_args(port: u16, dir: &std::path::Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &dir.to_string_lossy(),
        "--logfile",
        &dir.join("redis.log").to_string_lossy(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Starts `redis-server` from PATH on a free port of 127.0.0.1 with persistence off, as a
/// child process in a fresh temp dir; killed and the dir removed when the guard drops.
pub fn throwaway_server() -> Result<Found, String> {
    let binary = which("redis-server").ok_or("no redis-server on PATH")?;
    let started = Instant::now();
    let port = probe::free_port()?;
    let dir = temp_dir("redis")?;
    let child = Command::new(&binary)
        .args(server_args(port, &dir))
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()));
    let child: Arc<Mutex<Option<Child>>> = Arc::new(Mutex::new(child.ok()));
    let guard = {
        let (child, dir) = (Arc::clone(&child), dir.clone());
        cleanup::register(
            format!(
                "stop the throwaway redis-server on port {port}, remove {}",
                dir.display()
            ),
            move || {
                if let Some(mut c) = child.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                let _ = std::fs::remove_dir_all(&dir);
            },
        )
    };
    let log = dir.join("redis.log");
    let alive = || {
        let mut guard = child.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_mut().map(Child::try_wait) {
            None => Err(format!("cannot start {}", binary.display())),
            Some(Ok(None)) => Ok(()),
            Some(Ok(Some(status))) => Err(format!(
                "redis-server exited ({status}){}",
                log_tail(&log, 10)
            )),
            Some(Err(e)) => Err(format!("waiting for redis-server: {e}")),
        }
    };
    probe::wait_until(
        Duration::from_secs(30),
        || probe::redis("127.0.0.1", port, Duration::from_secs(2)),
        alive,
    )?;
    Ok(Found {
        url: lease_testserver::redis_url_on(port),
        how: format!(
            "a throwaway {} in {} on port {port}, ready in {:.1}s",
            binary.display(),
            dir.display(),
            started.elapsed().as_secs_f64()
        ),
        workdir: Some(dir),
        _guard: Some(guard),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throwaway_args_disable_persistence_and_bind_loopback() {
        let args = server_args(7001, std::path::Path::new("/tmp/r"));
        assert_eq!(
            args.join(" "),
            "--port 7001 --bind 127.0.0.1 --save  --appendonly no --daemonize no \
             --dir /tmp/r --logfile /tmp/r/redis.log"
        );
    }

    /// Starts a real throwaway redis-server, PINGs it, stops it, and checks the port is
    /// closed and the dir gone. Needs `redis-server` on PATH, which CI has.
    #[test]
    fn throwaway_server_starts_and_is_removed() {
        let found = throwaway_server().expect("throwaway redis");
        eprintln!("{}", found.how);
        let ep = url::endpoint(&found.url, 6379).expect("endpoint");
        probe::redis(&ep.host, ep.port, Duration::from_secs(5)).expect("PONG");
        let dir = found.workdir.clone().expect("workdir");
        assert!(dir.exists());
        drop(found);
        assert!(!dir.exists(), "{} left behind", dir.display());
        assert!(probe::redis(&ep.host, ep.port, Duration::from_secs(2)).is_err());
    }
}
