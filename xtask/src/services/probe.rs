//! Network probes: is a PostgreSQL or Redis server answering, and a free port to start one.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free local port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free local port: {e}"))
}

fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut last = format!("{host}:{port} has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => {
                stream
                    .set_read_timeout(Some(timeout))
                    .and_then(|()| stream.set_write_timeout(Some(timeout)))
                    .map_err(|e| format!("{addr}: {e}"))?;
                return Ok(stream);
            }
            Err(e) => last = format!("nothing answers on {addr} ({e})"),
        }
    }
    Err(last)
}

/// The PostgreSQL `SSLRequest` packet: length 8, request code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Checks that a PostgreSQL server answers on `host:port`: connects and sends an
/// `SSLRequest`, to which only PostgreSQL replies with the single byte `S` or `N`.
pub fn postgres(host: &str, port: u16, timeout: Duration) -> Result<(), String> {
    let mut stream = connect(host, port, timeout)?;
    stream
        .write_all(&SSL_REQUEST)
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    let mut reply = [0u8; 1];
    match stream.read(&mut reply) {
        Ok(1) if reply[0] == b'S' || reply[0] == b'N' => Ok(()),
        Ok(0) => Err(format!("{host}:{port} closed the connection (not ready?)")),
        Ok(_) => Err(format!(
            "{host}:{port} answered {:?}, not like PostgreSQL",
            reply[0] as char
        )),
        Err(e) => Err(format!("{host}:{port} did not answer like PostgreSQL: {e}")),
    }
}

/// Checks that a Redis server answers `PING` with `PONG` on `host:port`.
pub fn redis(host: &str, port: u16, timeout: Duration) -> Result<(), String> {
    let mut stream = connect(host, port, timeout)?;
    stream
        .write_all(b"PING\r\n")
        .map_err(|e| format!("{host}:{port}: {e}"))?;
    let mut buf = [0u8; 256];
    let n = stream
        .read(&mut buf)
        .map_err(|e| format!("{host}:{port} did not answer PING: {e}"))?;
    interpret_ping_reply(&buf[..n]).map_err(|e| format!("{host}:{port}: {e}"))
}

/// Interprets a Redis server's reply to an inline `PING`.
pub fn interpret_ping_reply(reply: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(reply);
    let line = text.lines().next().unwrap_or("").trim();
    if line == "+PONG" {
        Ok(())
    } else if line.is_empty() {
        Err("closed the connection without answering PING".to_owned())
    } else if let Some(err) = line.strip_prefix('-') {
        Err(format!("answered PING with an error: {err}"))
    } else {
        Err(format!("answered PING with {line:?}, not like Redis"))
    }
}

/// Calls `check` every 100 ms until it succeeds or `timeout` has passed; returns the last
/// error on timeout. `alive` is consulted between attempts so a server process that died
/// ends the wait early with its own message.
pub fn wait_until(
    timeout: Duration,
    mut check: impl FnMut() -> Result<(), String>,
    mut alive: impl FnMut() -> Result<(), String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check() {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        alive()?;
        if Instant::now() >= deadline {
            return Err(format!("not ready after {timeout:?}: {last}"));
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_replies() {
        assert_eq!(interpret_ping_reply(b"+PONG\r\n"), Ok(()));
        assert!(
            interpret_ping_reply(b"-NOAUTH Authentication required.\r\n")
                .expect_err("noauth")
                .contains("NOAUTH")
        );
        assert!(interpret_ping_reply(b"").is_err());
        assert!(interpret_ping_reply(b"HTTP/1.1 400 Bad Request\r\n").is_err());
    }

    #[test]
    fn free_port_is_bindable() {
        let port = free_port().expect("port");
        TcpListener::bind(("127.0.0.1", port)).expect("still free");
    }

    #[test]
    fn probes_fail_fast_on_a_closed_port() {
        let port = free_port().expect("port");
        let started = Instant::now();
        assert!(postgres("127.0.0.1", port, Duration::from_secs(2)).is_err());
        assert!(redis("127.0.0.1", port, Duration::from_secs(2)).is_err());
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn probes_reject_a_server_of_another_kind() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = thread::spawn(move || {
            for _ in 0..2 {
                let (mut s, _) = listener.accept().expect("accept");
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            }
        });
        assert!(postgres("127.0.0.1", port, Duration::from_secs(5)).is_err());
        assert!(redis("127.0.0.1", port, Duration::from_secs(5)).is_err());
        server.join().expect("server");
    }

    #[test]
    fn wait_until_stops_at_the_deadline_or_when_the_server_died() {
        let mut calls = 0;
        let err = wait_until(
            Duration::from_millis(250),
            || {
                calls += 1;
                Err("nope".to_owned())
            },
            || Ok(()),
        )
        .expect_err("times out");
        assert!(
            err.contains("nope") && calls >= 2,
            "{err} after {calls} calls"
        );
        let err = wait_until(
            Duration::from_secs(60),
            || Err("nope".to_owned()),
            || Err("server exited".to_owned()),
        )
        .expect_err("dead");
        assert_eq!(err, "server exited");
        let mut n = 0;
        wait_until(
            Duration::from_secs(60),
            || {
                n += 1;
                if n < 3 {
                    Err("not yet".to_owned())
                } else {
                    Ok(())
                }
            },
            || Ok(()),
        )
        .expect("ready on the third try");
    }
}
