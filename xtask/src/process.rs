//! Running external programs: PATH lookup, timeouts, command lines for messages.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Finds an executable named `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// True when `path` is a file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The command line of `cmd`, for messages.
pub fn display(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(quote));
    parts.join(" ")
}

fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs `cmd` with stdin closed and output captured, killing it after `timeout`.
pub fn output_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let line = display(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run `{line}`: {e}"))?;
    let readers = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .map(|pipe| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{line}` did not finish within {timeout:?}"));
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for `{line}`: {e}")),
        }
    };
    let [stdout, stderr] = readers.map(|r| r.join().unwrap_or_default());
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs `cmd` like [`output_with_timeout`] and fails unless it exits 0; returns stdout.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> Result<String, String> {
    let line = display(cmd);
    let out = output_with_timeout(cmd, timeout)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_finds_sh_and_not_nonsense() {
        assert!(which("sh").is_some());
        assert!(which("no-such-program-xtask").is_none());
    }

    #[test]
    fn display_quotes_only_what_needs_it() {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--save", "", "--dir", "/tmp/a b"]);
        assert_eq!(display(&cmd), "redis-server --save '' --dir '/tmp/a b'");
    }

    #[test]
    fn timeout_kills_a_hanging_command() {
        let started = Instant::now();
        let err = output_with_timeout(Command::new("sleep").arg("30"), Duration::from_millis(200))
            .expect_err("must time out");
        assert!(err.contains("did not finish"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn run_ok_reports_stderr_of_a_failure() {
        let err = run_ok(
            Command::new("sh").args(["-c", "echo boom >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .expect_err("exit 3");
        assert!(err.contains("boom"), "{err}");
        let out = run_ok(
            Command::new("sh").args(["-c", "echo hi"]),
            Duration::from_secs(10),
        )
        .expect("ok");
        assert_eq!(out, "hi\n");
    }
}
