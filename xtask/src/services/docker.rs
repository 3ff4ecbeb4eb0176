//! Throwaway servers in containers through the `docker` CLI.
//!
//! This replaces the testcontainers crate to keep xtask light: `docker run -d` with a
//! random loopback host port, `docker port` to find it, `docker rm -f` afterwards.

use std::process::Command;
use std::time::Duration;

use crate::cleanup::{self, Guard};
use crate::process::{output_with_timeout, run_ok, which};

/// A running container, removed when dropped.
#[derive(Debug)]
pub struct Container {
    /// The container id.
    pub id: String,
    /// The host port (on 127.0.0.1) mapped to the container port.
    pub host_port: u16,
    /// Removes the container.
    pub guard: Guard,
}

/// Ok when the `docker` CLI exists and a Docker engine answers `docker info`.
pub fn engine_answers() -> Result<(), String> {
    let docker = which("docker").ok_or("no `docker` command on PATH")?;
    let out = output_with_timeout(
        Command::new(docker).args(["info", "--format", "{{.ServerVersion}}"]),
        Duration::from_secs(20),
    )?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!(
            "`docker info` failed: {}",
            err.lines().next().unwrap_or("no engine").trim()
        ))
    }
}

/// The `docker run` arguments for `image` with `container_port` published on a random
/// loopback port, environment `env` and extra server arguments `cmd`.
pub fn run_args(
    image: &str,
    container_port: u16,
    env: &[(&str, &str)],
    cmd: &[&str],
) -> Vec<String> {
    let mut args = vec![
        "run".to_owned(),
        "--detach".to_owned(),
        "--rm".to_owned(),
        "--label".to_owned(),
        "lease-xtask=1".to_owned(),
        "--publish".to_owned(),
        format!("127.0.0.1::{container_port}"),
    ];
    for (k, v) in env {
        args.push("--env".to_owned());
        args.push(format!("{k}={v}"));
    }
    args.push(image.to_owned());
    args.extend(cmd.iter().map(|s| (*s).to_owned()));
    args
}

/// Starts `image` (pulling it if needed) and returns the container with its host port.
pub fn start(
    image: &str,
    container_port: u16,
    env: &[(&str, &str)],
    cmd: &[&str],
) -> Result<Container, String> {
    engine_answers()?;
    let id = run_ok(
        Command::new("docker").args(run_args(image, container_port, env, cmd)),
        Duration::from_secs(600),
    )?
    .trim()
    .to_owned();
    if id.is_empty() {
        return Err(format!("`docker run {image}` printed no container id"));
    }
    let guard = {
        let id = id.clone();
        cleanup::register(format!("remove container {id:.12} ({image})"), move || {
            let _ = output_with_timeout(
                Command::new("docker").args(["rm", "--force", "--volumes", &id]),
                Duration::from_secs(60),
            );
        })
    };
    let mapping = run_ok(
        Command::new("docker").args(["port", &id, &format!("{container_port}/tcp")]),
        Duration::from_secs(30),
    )?;
    let host_port = parse_port_mapping(&mapping)
        .ok_or_else(|| format!("cannot read the host port from `docker port`: {mapping:?}"))?;
    Ok(Container {
        id,
        host_port,
        guard,
    })
}

/// The host port in `docker port` output (`127.0.0.1:49153`, one mapping a line; IPv6
/// lines such as `[::]:49153` are accepted too).
pub fn parse_port_mapping(output: &str) -> Option<u16> {
    output
        .lines()
        .filter_map(|line| line.trim().rsplit_once(':'))
        .find_map(|(_, port)| port.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_args_publish_on_loopback_only() {
        let args = run_args(
            "postgres:16",
            5432,
            &[("POSTGRES_HOST_AUTH_METHOD", "trust")],
            &["-c", "fsync=off"],
        );
        assert_eq!(
            args.join(" "),
            "run --detach --rm --label lease-xtask=1 --publish 127.0.0.1::5432 \
             --env POSTGRES_HOST_AUTH_METHOD=trust postgres:16 -c fsync=off"
        );
    }

    #[test]
    fn port_mappings() {
        assert_eq!(parse_port_mapping("127.0.0.1:49153\n"), Some(49153));
        assert_eq!(
            parse_port_mapping("[::]:49154\n127.0.0.1:49154\n"),
            Some(49154)
        );
        assert_eq!(parse_port_mapping(""), None);
        assert_eq!(parse_port_mapping("Error: No public port"), None);
    }
}
