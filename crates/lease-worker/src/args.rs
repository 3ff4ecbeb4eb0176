//! Command-line options of a runtime process (`lease-worker`), parsed and rendered back so
//! an orchestrator can start processes with exactly the options it holds.
//!
//! The backend URL may carry a password, so an orchestrator hands it over in the
//! environment ([`URL_ENV`], [`WorkerArgs::to_env`]), never on the command line, where `ps`
//! shows it to every user of the machine.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// The environment variable a runtime process reads its backend URL from when `--url` is
/// not given (what [`WorkerArgs::to_env`] sets).
pub const URL_ENV: &str = "LEASE_WORKER_URL";

/// How one runtime process connects, claims, renews and names itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerArgs {
    /// Backend URL (`sqlite:PATH`, `postgres://...`, `redis://...`).
    pub url: String,
    /// Namespace (SQLite, Redis) or schema (Postgres) shared by the cooperating processes.
    pub namespace: String,
    /// The worker's name in events and receipts.
    pub name: String,
    /// Deliveries run at once.
    pub concurrency: usize,
    /// Lease duration.
    pub lease: Duration,
    /// Renewal interval.
    pub renew_every: Duration,
    /// Claim poll interval.
    pub poll: Duration,
    /// Base of the redelivery delay (doubling, capped at 32 times the base).
    pub redelivery_base: Duration,
    /// The payment provider's directory (`provider.rs`), shared by the run's processes.
    pub provider: PathBuf,
}

impl Default for WorkerArgs {
    fn default() -> Self {
        WorkerArgs {
            url: String::new(),
            namespace: "default".to_owned(),
            name: "worker".to_owned(),
            concurrency: 4,
            lease: Duration::from_secs(3),
            renew_every: Duration::from_secs(1),
            poll: Duration::from_millis(50),
            redelivery_base: Duration::from_millis(500),
            provider: PathBuf::new(),
        }
    }
}

/// The command line as clap reads it (`--help` is generated from it).
#[derive(Debug, Parser)]
#[command(
    name = "lease-worker",
    about = "Runs a dispatcher with the demo order workflow until stdin closes, printing JSON lines."
)]
struct Cli {
    /// Backend URL (`sqlite:PATH`, `postgres://...`, `redis://...`); default: the
    /// environment variable `LEASE_WORKER_URL` (which keeps a password out of `ps`).
    #[arg(long)]
    url: Option<String>,
    /// The payment provider's directory, shared by the run's processes.
    #[arg(long, value_name = "DIR")]
    provider: PathBuf,
    /// Namespace (SQLite, Redis) or schema (PostgreSQL) shared by the cooperating processes.
    #[arg(long, default_value = "default")]
    namespace: String,
    /// The worker's name in events and receipts.
    #[arg(long, default_value = "worker")]
    name: String,
    /// Deliveries run at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// Lease duration, milliseconds.
    #[arg(long = "lease-ms", value_name = "MS", default_value_t = 3000)]
    lease_ms: u64,
    /// Renewal interval, milliseconds.
    #[arg(long = "renew-ms", value_name = "MS", default_value_t = 1000)]
    renew_ms: u64,
    /// Claim poll interval, milliseconds.
    #[arg(long = "poll-ms", value_name = "MS", default_value_t = 50)]
    poll_ms: u64,
    /// Base of the redelivery delay (doubling, capped at 32 times the base), milliseconds.
    #[arg(long = "redelivery-ms", value_name = "MS", default_value_t = 500)]
    redelivery_ms: u64,
}

impl WorkerArgs {
    /// Parses the arguments after the program name, the URL from [`URL_ENV`] unless `--url`
    /// is given. `--help` and bad arguments come back as clap's error, which prints itself
    /// (help on stdout, errors on stderr).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, clap::Error> {
        Self::parse_with_url(args, std::env::var(URL_ENV).ok())
    }

    /// [`WorkerArgs::parse`] with `env_url` as the value of [`URL_ENV`].
    pub fn parse_with_url(
        args: impl IntoIterator<Item = String>,
        env_url: Option<String>,
    ) -> Result<Self, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("lease-worker".to_owned()).chain(args))?;
        let url = cli.url.or(env_url).ok_or_else(|| {
            clap::Error::raw(
                clap::error::ErrorKind::MissingRequiredArgument,
                format!("no backend URL: give --url or set {URL_ENV}\n"),
            )
        })?;
        Ok(WorkerArgs {
            url,
            namespace: cli.namespace,
            name: cli.name,
            concurrency: usize::from(cli.concurrency),
            lease: Duration::from_millis(cli.lease_ms),
            renew_every: Duration::from_millis(cli.renew_ms),
            poll: Duration::from_millis(cli.poll_ms),
            redelivery_base: Duration::from_millis(cli.redelivery_ms),
            provider: cli.provider,
        })
    }

    /// The arguments that [`WorkerArgs::parse`] turns back into `self` with the
    /// environment of [`WorkerArgs::to_env`]: everything but the URL.
    pub fn to_args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            "--namespace".into(),
            self.namespace.clone(),
            "--name".into(),
            self.name.clone(),
            "--concurrency".into(),
            self.concurrency.to_string(),
            "--lease-ms".into(),
            ms(self.lease),
            "--renew-ms".into(),
            ms(self.renew_every),
            "--poll-ms".into(),
            ms(self.poll),
            "--redelivery-ms".into(),
            ms(self.redelivery_base),
            "--provider".into(),
            self.provider.display().to_string(),
        ]
    }

    /// The environment a process started with [`WorkerArgs::to_args`] needs: the URL.
    pub fn to_env(&self) -> [(&'static str, String); 1] {
        [(URL_ENV, self.url.clone())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn rendered_arguments_parse_back_to_the_same_options() {
        let a = WorkerArgs {
            url: "postgres://u:hunter2@h/db".into(),
            namespace: "ns".into(),
            name: "w2".into(),
            concurrency: 7,
            lease: Duration::from_millis(1500),
            renew_every: Duration::from_millis(400),
            poll: Duration::from_millis(20),
            redelivery_base: Duration::from_millis(100),
            provider: PathBuf::from("/tmp/provider"),
        };
        let [(name, url)] = a.to_env();
        assert_eq!(name, URL_ENV);
        assert_eq!(
            WorkerArgs::parse_with_url(a.to_args(), Some(url)).expect("parse"),
            a
        );
    }

    /// The URL (and its password) is not on a child's command line, where `ps` shows it.
    #[test]
    fn the_url_is_not_on_the_command_line() {
        let a = WorkerArgs {
            url: "postgres://u:hunter2@h/db".into(),
            ..WorkerArgs::default()
        };
        let args = a.to_args();
        assert!(!args.iter().any(|s| s.contains("hunter2")), "{args:?}");
    }

    #[test]
    fn the_command_line_url_wins_over_the_environment() {
        let a = WorkerArgs::parse_with_url(
            args(&["--url", "sqlite:a", "--provider", "p"]),
            Some("sqlite:b".into()),
        )
        .expect("parse");
        assert_eq!(a.url, "sqlite:a");
        let missing = WorkerArgs::parse_with_url(args(&["--provider", "p"]), None);
        assert!(missing.expect_err("no url").use_stderr());
    }

    #[test]
    fn defaults_and_refusals() {
        let a = WorkerArgs::parse_with_url(args(&["--url", "sqlite:x", "--provider", "p"]), None)
            .expect("parse");
        assert_eq!(a.concurrency, 4);
        assert_eq!(a.lease, Duration::from_secs(3));
        assert_eq!(a.namespace, "default");
        for bad in [
            &["--url", "sqlite:x"][..],
            &["--url", "sqlite:x", "--provider", "p", "--lease-ms", "soon"],
            &["--url", "sqlite:x", "--provider", "p", "--concurrency", "0"],
            &["--url", "sqlite:x", "--provider", "p", "--bogus", "1"],
        ] {
            let e = WorkerArgs::parse_with_url(args(bad), None).expect_err("refused");
            assert!(e.use_stderr(), "{bad:?}: {e}");
        }
        let help = WorkerArgs::parse_with_url(args(&["--help"]), None).expect_err("help");
        assert!(!help.use_stderr() && help.to_string().contains("--redelivery-ms"));
    }
}
