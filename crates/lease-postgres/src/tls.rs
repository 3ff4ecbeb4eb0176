//! libpq's `sslmode` and `sslrootcert`, as far as sqlx 0.9 can honour them: a mode is used
//! as libpq means it, or refused with a typed error that names it and says what to use
//! instead. Checked on the *parsed* options, so what sqlx took from `PGSSLMODE` /
//! `PGSSLROOTCERT` is checked as well as the URL (docs/decisions/0044-tls-and-secrets.md).
//!
//! | mode | libpq | here |
//! |---|---|---|
//! | `disable` | plain text | the same |
//! | `allow` | plain text first, TLS if refused | refused (sqlx connects in plain text only) |
//! | `prefer` (default) | TLS if the server offers it, else plain text; no certificate check | the same (plain text also when the crate is built without `tls-rustls`); with a root certificate refused |
//! | `require` | TLS, no check; with a root certificate it is `verify-ca` | without a root certificate the same; with one refused |
//! | `verify-ca` | chain to `sslrootcert` (default `~/.postgresql/root.crt`), no host check | refused (sqlx also trusts the public roots): use `verify-full` |
//! | `verify-full` | chain to `sslrootcert` (default `~/.postgresql/root.crt`, an error when missing) and host name | chain to `sslrootcert` *or a public (webpki) root*, and host name; without any root certificate refused |
//!
//! `sslrootcert=system` (libpq 16) means the public roots, only with `verify-full` (the
//! default mode when none is given); sqlx would read a file named `system`.

use std::path::{Path, PathBuf};

use lease_core::{LeaseError, Result};
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The parameters sqlx reads (and its aliases); any other `ssl*` parameter would be ignored
/// by sqlx with a log line, weakening what the user asked for, so it is refused.
const KNOWN_SSL_PARAMS: &[&str] = &[
    "sslmode",
    "ssl-mode",
    "sslrootcert",
    "ssl-root-cert",
    "ssl-ca",
    "sslcert",
    "ssl-cert",
    "sslkey",
    "ssl-key",
];

/// Where libpq looks for a root certificate when `sslrootcert` is not given.
pub(crate) fn default_root_cert() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".postgresql").join("root.crt"))
}

/// The root certificate the parsed options carry (URL or `PGSSLROOTCERT`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Root {
    None,
    /// `sslrootcert=system`.
    System,
    /// A file or inline PEM.
    Given,
}

fn bad(why: String) -> LeaseError {
    LeaseError::invalid("postgres url", why)
}

/// Checks (and, for `sslrootcert=system` and the default root file, adjusts) the TLS
/// settings of `options`, parsed from `url`. `default_root` is libpq's
/// `~/.postgresql/root.crt` (passed in so tests choose it); `env_mode` is `PGSSLMODE`.
pub(crate) fn check(
    options: PgConnectOptions,
    url: &str,
    env_mode: Option<&str>,
    default_root: Option<&Path>,
) -> Result<PgConnectOptions> {
    let keys = query_keys(url);
    if let Some(k) = keys.iter().find(|k| is_unknown_ssl_param(k)) {
        return Err(bad(format!(
            "{k}= is not supported by the driver (it would be ignored): remove it"
        )));
    }
    let url_mode = keys.iter().any(|k| k == "sslmode" || k == "ssl-mode");
    if let (false, Some(env)) = (url_mode, env_mode) {
        // sqlx silently falls back to `prefer` on a value it cannot parse; libpq refuses.
        env.parse::<PgSslMode>()
            .map_err(|_| bad(format!("PGSSLMODE={env:?} is not an sslmode")))?;
    }
    let root = root_of(&options);
    let default_root = default_root.filter(|p| p.is_file());
    let mut mode = options.get_ssl_mode();
    if root == Root::System && !url_mode && env_mode.is_none() {
        mode = PgSslMode::VerifyFull;
    }
    let has_root = root != Root::None || default_root.is_some();
    match mode {
        PgSslMode::Disable => Ok(options),
        PgSslMode::Allow => Err(bad(
            "sslmode=allow (plain text first) is not supported: use disable, prefer or \
             verify-full"
                .to_owned(),
        )),
        PgSslMode::Prefer | PgSslMode::Require if has_root => Err(bad(format!(
            "sslmode={} with a root certificate (sslrootcert, PGSSLROOTCERT or \
             ~/.postgresql/root.crt) is verify-ca in libpq, which is not supported: use \
             sslmode=verify-full",
            name(mode)
        ))),
        PgSslMode::Prefer | PgSslMode::Require => Ok(options),
        PgSslMode::VerifyCa => Err(bad(
            "sslmode=verify-ca is not supported (the driver would also trust the public \
             roots): use sslmode=verify-full with sslrootcert=FILE"
                .to_owned(),
        )),
        PgSslMode::VerifyFull => verify_full(options, &root, default_root),
    }
}

/// `verify-full`: `system` means the public roots only; no root certificate at all is
/// libpq's `~/.postgresql/root.crt`, or an error when that file does not exist.
fn verify_full(
    options: PgConnectOptions,
    root: &Root,
    default_root: Option<&Path>,
) -> Result<PgConnectOptions> {
    let options = options.ssl_mode(PgSslMode::VerifyFull);
    match (root, default_root) {
        // An empty PEM adds no certificate: the driver's public (webpki) roots remain.
        (Root::System, _) => Ok(options.ssl_root_cert_from_pem(Vec::new())),
        (Root::Given, _) => Ok(options),
        (Root::None, Some(file)) => Ok(options.ssl_root_cert(file)),
        (Root::None, None) => Err(bad(
            "sslmode=verify-full needs a CA: sslrootcert=FILE, or sslrootcert=system for the \
             public roots (libpq would read ~/.postgresql/root.crt, which does not exist)"
                .to_owned(),
        )),
    }
}

fn root_of(options: &PgConnectOptions) -> Root {
    let url = options.to_url_lossy();
    let Some((_, value)) = url.query_pairs().find(|(k, _)| k == "sslrootcert") else {
        return Root::None;
    };
    if value == "file: system" || value == "system" {
        Root::System
    } else {
        Root::Given
    }
}

fn query_keys(url: &str) -> Vec<String> {
    let Some((_, query)) = url.split_once('?') else {
        return Vec::new();
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or(p, |(k, _)| k).to_owned())
        .collect()
}

fn is_unknown_ssl_param(key: &str) -> bool {
    (key.starts_with("ssl") || key == "requiressl") && !KNOWN_SSL_PARAMS.contains(&key)
}

fn name(mode: PgSslMode) -> &'static str {
    match mode {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    /// A root file that exists (any file will do: only its existence is checked here).
    fn existing() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")
    }

    fn run(url: &str, env_mode: Option<&str>, default_root: Option<&Path>) -> Result<PgSslMode> {
        let options: PgConnectOptions = url.parse().map_err(|e| bad(format!("{e}")))?;
        check(options, url, env_mode, default_root).map(|o| o.get_ssl_mode())
    }

    #[rstest]
    #[case::allow("sslmode=allow", "sslmode=allow")]
    #[case::verify_ca("sslmode=verify-ca&sslrootcert=/ca.pem", "verify-ca")]
    #[case::verify_ca_alone("sslmode=verify-ca", "verify-ca")]
    #[case::require_with_root("sslmode=require&sslrootcert=/ca.pem", "sslmode=require")]
    #[case::prefer_with_root("sslrootcert=/ca.pem", "sslmode=prefer")]
    #[case::require_system("sslmode=require&sslrootcert=system", "sslmode=require")]
    #[case::verify_full_no_root("sslmode=verify-full", "verify-full needs a CA")]
    #[case::unknown_param("sslmode=verify-full&sslrootcert=/ca.pem&sslcrl=/x", "sslcrl=")]
    fn unmatched_modes_are_refused(#[case] query: &str, #[case] named: &str) {
        let url = format!("postgres://u@h/db?{query}");
        let err = run(&url, None, None).expect_err("accepted");
        assert!(matches!(err, LeaseError::InvalidInput { .. }), "{err:?}");
        assert!(err.to_string().contains(named), "{err}");
    }

    #[rstest]
    #[case::no_mode("", PgSslMode::Prefer)]
    #[case::disable("sslmode=disable&sslrootcert=/ca.pem", PgSslMode::Disable)]
    #[case::require("sslmode=require", PgSslMode::Require)]
    #[case::verify_full("sslmode=verify-full&sslrootcert=/ca.pem", PgSslMode::VerifyFull)]
    #[case::system_default_mode("sslrootcert=system", PgSslMode::VerifyFull)]
    #[case::system_verify_full("sslmode=verify-full&sslrootcert=system", PgSslMode::VerifyFull)]
    fn matched_modes_are_kept(#[case] query: &str, #[case] mode: PgSslMode) {
        let url = format!("postgres://u@h/db?{query}");
        let got = run(&url, None, None).expect("refused");
        assert_eq!(name(got), name(mode));
    }

    /// libpq's `~/.postgresql/root.crt` makes `require` a `verify-ca` and is the CA of
    /// `verify-full`.
    #[test]
    fn the_default_root_file_counts_as_a_root_certificate() {
        let file = existing();
        let root = Some(file.as_path());
        assert!(run("postgres://h/db?sslmode=require", None, root).is_err());
        assert!(run("postgres://h/db", None, root).is_err());
        let full = run("postgres://h/db?sslmode=verify-full", None, root).expect("verify-full");
        assert_eq!(name(full), "verify-full");
        let missing = Path::new("/nonexistent/root.crt");
        assert!(run("postgres://h/db?sslmode=require", None, Some(missing)).is_ok());
    }

    #[test]
    fn a_bad_pgsslmode_is_refused_unless_the_url_sets_the_mode() {
        assert!(run("postgres://h/db", Some("verify_ful"), None).is_err());
        assert!(run("postgres://h/db?sslmode=disable", Some("verify_ful"), None).is_ok());
    }

    /// `PGSSLMODE` / `PGSSLROOTCERT` as sqlx reads them: the test runs itself in a child
    /// process with the variables set (the environment cannot be changed safely in-process).
    #[test]
    fn modes_from_the_environment_are_checked() {
        const CHILD: &str = "LEASE_PG_TLS_ENV_CHILD";
        const NAME: &str = "tls::tests::modes_from_the_environment_are_checked";
        if std::env::var_os(CHILD).is_some() {
            let env = std::env::var("PGSSLMODE").ok();
            let err = run("postgres://h/db", env.as_deref(), None).expect_err("env accepted");
            assert!(err.to_string().contains("verify-ca"), "{err}");
            let url = "postgres://h/db?sslmode=require";
            let err = run(url, env.as_deref(), None).expect_err("env root accepted");
            assert!(err.to_string().contains("PGSSLROOTCERT"), "{err}");
            return;
        }
        let exe = std::env::current_exe().expect("test binary");
        let out = std::process::Command::new(exe)
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("PGSSLMODE", "verify-ca")
            .env("PGSSLROOTCERT", "/ca.pem")
            .output()
            .expect("run child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
