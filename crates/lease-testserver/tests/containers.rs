//! The container servers (feature `containers`, run by test-all's `containers` row, which
//! needs a Docker engine): each starts through testcontainers from the locally built image,
//! answers on the loopback port it was given, listens on no other address, and is gone
//! once dropped.

#![cfg(feature = "containers")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use lease_testserver::containers::{self, Server};

/// A port on 127.0.0.1 nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Sends `request` to 127.0.0.1:port and returns the first bytes of the reply.
fn ask(port: u16, request: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request)?;
    let mut reply = vec![0u8; 64];
    let n = stream.read(&mut reply)?;
    reply.truncate(n);
    Ok(reply)
}

/// The local addresses (hex, as in /proc/net/tcp{,6}) of sockets listening on `port`.
fn listening_addresses(port: u16) -> Vec<String> {
    let port_hex = format!("{port:04X}");
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // fields[1] = local address:port, fields[3] = state (0A = LISTEN).
            if let (Some(local), Some("0A")) = (fields.get(1), fields.get(3).copied())
                && let Some((addr, p)) = local.rsplit_once(':')
                && p == port_hex
            {
                found.push(addr.to_owned());
            }
        }
    }
    found
}

/// Checks the server listens on 127.0.0.1 only (the host network is shared).
fn assert_loopback_only(server: &Server) {
    let addresses = listening_addresses(server.port);
    assert!(!addresses.is_empty(), "{}: nothing listens", server.image);
    assert!(
        addresses.iter().all(|a| a == "0100007F"),
        "{} listens on {addresses:?}, not only 127.0.0.1",
        server.image
    );
}

/// Polls until nothing accepts connections on `port` (the container is removed on drop;
/// the kernel closes the socket with the process).
fn assert_closed_soon(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "port {port} still open after drop"
        );
        std::thread::yield_now();
    }
}

#[test]
fn postgres_container_answers_on_its_loopback_port_and_is_removed() {
    let port = free_port();
    let server = containers::start_postgres(port).expect("postgres container");
    assert_eq!(server.url, lease_testserver::postgres_url_on(port));
    assert!(
        server.image.starts_with("postgres:15-lease-"),
        "{}",
        server.image
    );
    // SSLRequest: PostgreSQL answers one byte, `N` (no TLS in the image).
    let reply = ask(port, &[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]).expect("SSLRequest");
    assert_eq!(reply, b"N");
    assert_loopback_only(&server);
    drop(server);
    assert_closed_soon(port);
}

#[test]
fn redis_container_answers_on_its_loopback_port_and_is_removed() {
    let port = free_port();
    let server = containers::start_redis(port).expect("redis container");
    assert_eq!(server.url, lease_testserver::redis_url_on(port));
    assert!(
        server.image.starts_with("redis:7-lease-"),
        "{}",
        server.image
    );
    let reply = ask(port, b"PING\r\n").expect("PING");
    assert_eq!(reply, b"+PONG\r\n");
    assert_loopback_only(&server);
    drop(server);
    assert_closed_soon(port);
}
