//! Command-line options of a runtime process (`lease-worker`), parsed and rendered back so
//! an orchestrator can start processes with exactly the options it holds.

use std::path::PathBuf;
use std::time::Duration;

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

/// The usage line printed on bad arguments.
pub const USAGE: &str = "usage: lease-worker --url URL --provider DIR [--namespace NS] \
[--name NAME] [--concurrency N] [--lease-ms MS] [--renew-ms MS] [--poll-ms MS] \
[--redelivery-ms MS]\n\
Runs a dispatcher with the demo order workflow until stdin closes, printing JSON lines.";

impl WorkerArgs {
    /// Parses `--flag value` pairs; a message naming the bad flag otherwise.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut out = WorkerArgs::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let ms = |v: &str| -> Result<Duration, String> {
                v.parse::<u64>()
                    .map(Duration::from_millis)
                    .map_err(|e| format!("{flag} {v}: {e}"))
            };
            match flag.as_str() {
                "--url" => out.url = value,
                "--namespace" => out.namespace = value,
                "--name" => out.name = value,
                "--concurrency" => {
                    out.concurrency = value
                        .parse()
                        .map_err(|e| format!("--concurrency {value}: {e}"))?;
                }
                "--lease-ms" => out.lease = ms(&value)?,
                "--renew-ms" => out.renew_every = ms(&value)?,
                "--poll-ms" => out.poll = ms(&value)?,
                "--redelivery-ms" => out.redelivery_base = ms(&value)?,
                "--provider" => out.provider = PathBuf::from(value),
                other => return Err(format!("unknown option {other}")),
            }
        }
        if out.url.is_empty() {
            return Err("--url is required".to_owned());
        }
        if out.provider.as_os_str().is_empty() {
            return Err("--provider is required".to_owned());
        }
        Ok(out)
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
