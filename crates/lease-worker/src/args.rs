//! Command-line options of a runtime process (`lease-worker`), parsed and rendered back so
//! an orchestrator can start processes with exactly the options it holds.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

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
    /// Backend URL (`sqlite:PATH`, `postgres://...`, `redis://...`).
    #[arg(long)]
    url: String,
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
    /// Parses the arguments after the program name. `--help` and bad arguments come back as
    /// clap's error, which prints itself (help on stdout, errors on stderr).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("lease-worker".to_owned()).chain(args))?;
        Ok(WorkerArgs {
            url: cli.url,
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

    /// The arguments that [`WorkerArgs::parse`] turns back into `self`.
    pub fn to_args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            "--url".into(),
            self.url.clone(),
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
            url: "sqlite:/tmp/x.db".into(),
            namespace: "ns".into(),
            name: "w2".into(),
            concurrency: 7,
            lease: Duration::from_millis(1500),
            renew_every: Duration::from_millis(400),
            poll: Duration::from_millis(20),
            redelivery_base: Duration::from_millis(100),
            provider: PathBuf::from("/tmp/provider"),
        };
        assert_eq!(WorkerArgs::parse(a.to_args()).expect("parse"), a);
    }

    #[test]
    fn defaults_and_refusals() {
        let a = WorkerArgs::parse(args(&["--url", "sqlite:x", "--provider", "p"])).expect("parse");
        assert_eq!(a.concurrency, 4);
        assert_eq!(a.lease, Duration::from_secs(3));
        assert_eq!(a.namespace, "default");
        for bad in [
            &["--provider", "p"][..],
            &["--url", "sqlite:x"],
            &["--url", "sqlite:x", "--provider", "p", "--lease-ms", "soon"],
            &["--url", "sqlite:x", "--provider", "p", "--concurrency", "0"],
            &["--url", "sqlite:x", "--provider", "p", "--bogus", "1"],
        ] {
            let e = WorkerArgs::parse(args(bad)).expect_err("refused");
            assert!(e.use_stderr(), "{bad:?}: {e}");
        }
        let help = WorkerArgs::parse(args(&["--help"])).expect_err("help");
        assert!(!help.use_stderr() && help.to_string().contains("--redelivery-ms"));
    }
}
