//! Throwaway PostgreSQL and Redis servers in containers, started through testcontainers
//! (testcontainers-modules' [`Postgres`] and [`Redis`] images, blocking runner).
//!
//! No image registry is reachable from the machines this runs on, so the images are built
//! here ([`image`]) from this machine's own PostgreSQL 15 and Redis 7 binaries and tagged
//! under the modules' image names with a local tag. Containers run on the host network (the
//! engine runs with `--bridge=none`): every server is told its port and binds `127.0.0.1`
//! only, so the module's port lookup (which reads published ports, and host networking
//! publishes none) is not used; the port the caller chose is the port. Readiness is the
//! modules' own wait conditions (log messages), which the images' entrypoints honour.
//!
//! A [`Server`] removes its container when dropped.

mod engine;
pub mod image;
mod rootfs;

pub use engine::{ContainerError, engine_answers};

use std::time::Duration;

use testcontainers::runners::SyncRunner;
use testcontainers::{Container, ImageExt};
use testcontainers_modules::postgres::Postgres;
use testcontainers_modules::redis::Redis;

/// A running test server in a container; removed (`docker rm -f`) when dropped.
#[derive(Debug)]
pub struct Server {
    /// The URL the tests use (`127.0.0.1` and the port given).
    pub url: String,
    /// The host port the server listens on (host network: it is the server's own port).
    pub port: u16,
    /// The image, `name:tag`.
    pub image: String,
    /// The container id.
    pub id: String,
    _container: Running,
}

/// The testcontainers handle; dropping it removes the container.
#[derive(Debug)]
enum Running {
    Postgres(#[allow(dead_code)] Container<Postgres>),
    Redis(#[allow(dead_code)] Container<Redis>),
}

/// The network every container joins: the host's (no bridge exists).
pub const NETWORK: &str = "host";
/// Label on every container started here, for finding leftovers
/// (`docker ps --filter label=lease-testserver`).
pub const LABEL: &str = "lease-testserver";
/// How long a container may take to report ready.
const STARTUP: Duration = Duration::from_secs(120);

/// The container arguments of PostgreSQL on `port`: options of `postgres` (the image's
/// entrypoint passes arguments starting with `-` to it), loopback only.
pub fn postgres_args(port: u16) -> Vec<String> {
    let mut args = vec![
        "-p".to_owned(),
        port.to_string(),
        "-c".to_owned(),
        "listen_addresses=127.0.0.1".to_owned(),
    ];
    for setting in crate::POSTGRES_FAST_SETTINGS {
        args.extend(["-c".to_owned(), setting.to_owned()]);
    }
    args
}

/// The container arguments of Redis on `port`: options of `redis-server`, loopback only,
/// no persistence.
pub fn redis_args(port: u16) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Starts PostgreSQL on `127.0.0.1:port` in a container of the local image (built first
/// when missing): user `postgres`, trust auth, database `test`, as the tests expect.
pub fn start_postgres(port: u16) -> Result<Server, ContainerError> {
    let tag = image::ensure_postgres()?;
    let descriptor = format!("{}:{tag}", image::POSTGRES_NAME);
    let request = Postgres::default()
        .with_host_auth()
        .with_db_name("test")
        .with_tag(tag)
        .with_network(NETWORK)
        .with_label(LABEL, "postgres")
        .with_cmd(postgres_args(port))
        .with_startup_timeout(STARTUP);
    let container = request.start().map_err(|e| ContainerError::Start {
        image: descriptor.clone(),
        reason: e.to_string(),
    })?;
    Ok(Server {
        url: crate::postgres_url_on(port),
        port,
        image: descriptor,
        id: container.id().to_owned(),
        _container: Running::Postgres(container),
    })
}

/// Starts Redis on `127.0.0.1:port` in a container of the local image (built first when
/// missing), persistence off.
pub fn start_redis(port: u16) -> Result<Server, ContainerError> {
    let tag = image::ensure_redis()?;
    let descriptor = format!("{}:{tag}", image::REDIS_NAME);
    let request = Redis::default()
        .with_tag(tag)
        .with_network(NETWORK)
        .with_label(LABEL, "redis")
        .with_cmd(redis_args(port))
        .with_startup_timeout(STARTUP);
    let container = request.start().map_err(|e| ContainerError::Start {
        image: descriptor.clone(),
        reason: e.to_string(),
    })?;
    Ok(Server {
        url: crate::redis_url_on(port),
        port,
        image: descriptor,
        id: container.id().to_owned(),
        _container: Running::Redis(container),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_told_their_port_and_loopback() {
        assert_eq!(
            postgres_args(54321).join(" "),
            "-p 54321 -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off \
             -c synchronous_commit=off -c max_connections=200"
        );
        assert_eq!(
            redis_args(7001).join(" "),
            "--port 7001 --bind 127.0.0.1 --save  --appendonly no"
        );
    }
}
