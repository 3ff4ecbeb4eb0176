//! Throwaway servers in containers, through the shared test-server crate
//! (`lease_testserver::containers`: testcontainers and testcontainers-modules, images built
//! locally from this machine's binaries). Each container runs on the host network, bound
//! to `127.0.0.1` on a free port chosen here, and is removed when its [`Found`] drops (or
//! by the interrupt handler).
//!
//! Two uses: the last way of finding a server (after the local binaries), and the
//! `containers` row, whose servers are always containers (`Service::PostgresContainer`,
//! `Service::RedisContainer`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lease_testserver::containers::{self, Server};

use super::found::Found;
use super::probe;
use crate::cleanup;

/// Which server a container holds, for messages and the readiness probe.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Postgres,
    Redis,
}

/// Starts PostgreSQL (user `postgres`, trust, database `test`) in a container.
pub fn postgres() -> Result<Found, String> {
    start(Kind::Postgres)
}

/// Starts Redis (no persistence) in a container.
pub fn redis() -> Result<Found, String> {
    start(Kind::Redis)
}

fn start(kind: Kind) -> Result<Found, String> {
    let started = Instant::now();
    let port = probe::free_port()?;
    let server = match kind {
        Kind::Postgres => containers::start_postgres(port),
        Kind::Redis => containers::start_redis(port),
    }
    .map_err(|e| e.to_string())?;
    let how = format!(
        "a testcontainers container {:.12} of the local image {} (host network, 127.0.0.1:{port}), ready in {:.1}s",
        server.id,
        server.image,
        started.elapsed().as_secs_f64()
    );
    let url = server.url.clone();
    let holder: Arc<Mutex<Option<Server>>> = Arc::new(Mutex::new(Some(server)));
    let guard = {
        let holder = Arc::clone(&holder);
        cleanup::register(
            format!("remove the {kind:?} container on port {port}"),
            move || {
                // Dropping the server removes its container.
                drop(holder.lock().unwrap_or_else(|e| e.into_inner()).take());
            },
        )
    };
    // The module waited for the server's log line; the protocol probe confirms the port.
    let answers = || match kind {
        Kind::Postgres => probe::postgres("127.0.0.1", port, Duration::from_secs(2)),
        Kind::Redis => probe::redis("127.0.0.1", port, Duration::from_secs(2)),
    };
    probe::wait_until(Duration::from_secs(30), answers, || Ok(()))?;
    Ok(Found {
        url,
        how,
        workdir: None,
        _guard: Some(guard),
    })
}
