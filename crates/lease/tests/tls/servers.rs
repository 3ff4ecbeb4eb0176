//! Throwaway servers for the TLS tests: a PostgreSQL cluster (initdb + pg_ctl) and a
//! redis-server with a plain and a TLS port, on free ports of 127.0.0.1, stopped and
//! removed when dropped. A missing binary fails the test: TLS is never left untested.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::Pki;

/// How long starting a server may take on a loaded machine.
const START_PATIENCE: Duration = Duration::from_secs(120);

/// A TCP port on 127.0.0.1 that nothing listens on right now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("local addr").port()
}

/// Runs `cmd` to completion within [`START_PATIENCE`]; panics with its output otherwise.
fn run(cmd: &mut Command) {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let deadline = Instant::now() + START_PATIENCE;
    loop {
        match child.try_wait().expect("wait") {
            Some(_) => break,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                panic!("{shown} did not finish within {START_PATIENCE:?}");
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "{shown}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether we run as root (initdb refuses root: the cluster then runs as user `postgres`).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The newest `/usr/lib/postgresql/*/bin` holding initdb and pg_ctl.
fn postgres_bin_dir() -> PathBuf {
    let mut dirs: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let version = name
                .split('.')
                .map(|p| p.parse().ok())
                .collect::<Option<_>>()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, bin)| bin).expect(
        "the PostgreSQL TLS test needs initdb and pg_ctl under /usr/lib/postgresql/*/bin \
         (apt-get install postgresql)",
    )
}

/// A throwaway PostgreSQL cluster, trust authentication, user `postgres`.
pub struct Postgres {
    bin: PathBuf,
    as_postgres: bool,
    data: PathBuf,
    log: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The cluster's directory, holding the data dir and the certificates.
    pub dir: tempfile::TempDir,
}

impl Postgres {
    /// `initdb` in a fresh temp dir (as user `postgres` through runuser when root), with the
    /// test's certificates made in the same dir; not started yet.
    pub fn init() -> (Postgres, Pki) {
        let bin = postgres_bin_dir();
        let as_postgres = is_root();
        let dir = tempfile::tempdir().expect("temp dir");
        let pki = Pki::create(dir.path());
        if as_postgres {
            run(Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path()));
        }
        let pg = Postgres {
            data: dir.path().join("data"),
            log: dir.path().join("postgres.log"),
            port: free_port(),
            bin,
            as_postgres,
            dir,
        };
        run(pg.tool("initdb").arg("-D").arg(&pg.data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ]));
        (pg, pki)
    }

    fn tool(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        };
        cmd.current_dir(self.dir.path());
        cmd
    }

    /// `pg_ctl start` (or `restart`), with `ssl=on` and the given certificate and key when
    /// `tls` is given, plain otherwise; returns once the server accepts connections.
    pub fn start(&self, tls: Option<&Pki>) {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        if let Some(pki) = tls {
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                pki.server_cert.display(),
                pki.server_key.display()
            ));
        }
        let action = if self.data.join("postmaster.pid").exists() {
            "restart"
        } else {
            "start"
        };
        run(self
            .tool("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .arg("-l")
            .arg(&self.log)
            .args(["-w", "-t", "120", "-o", &options, action]));
    }

    /// The URL of database `postgres` with the given query (`sslmode=...`).
    pub fn url(&self, query: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?{query}",
            self.port
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.data.join("postmaster.pid").exists() {
            let _ = self
                .tool("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .args(["-m", "immediate", "-w", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A redis-server listening on a plain port and a TLS port (no client certificates).
pub struct Redis {
    child: Child,
    /// The plain port.
    pub port: u16,
    /// The TLS port.
    pub tls_port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts `redis-server` with the test's certificates; returns once the plain port
    /// answers PING (the TLS port is opened before it).
    pub fn start(pki: &Pki, dir: tempfile::TempDir) -> Redis {
        let (port, tls_port) = (free_port(), free_port());
        let arg = |p: &Path| p.display().to_string();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--tls-port", &tls_port.to_string()])
            .args(["--tls-cert-file", &arg(&pki.server_cert)])
            .args(["--tls-key-file", &arg(&pki.server_key)])
            .args(["--tls-auth-clients", "no", "--save", "", "--appendonly", "no"])
            .args(["--dir", &arg(dir.path())])
            .stdout(Stdio::null())
            .spawn()
            .expect("the Redis TLS test needs redis-server built with TLS on PATH (apt-get install redis-server)");
        let redis = Redis {
            child,
            port,
            tls_port,
            _dir: dir,
        };
        redis.wait_ready();
        redis
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + START_PATIENCE;
        while !answers_ping(self.port) {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {} within {START_PATIENCE:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
