//! The command line (clap derive, generated `--help`): global options and the subcommands.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// Operates an execution-leases store on any backend URL: counts by status, executions that
/// keep failing, the live leases, one execution's record and steps, undecodable records, and
/// retention.
///
/// Exit status: 0 done, 1 the operation failed (unreachable server, unknown id, backend
/// error, a control the backend does not support), 2 bad usage (arguments, URL, duration),
/// 3 nothing to cancel (the execution had already completed or failed).
#[derive(Debug, Parser)]
#[command(name = "lease", version, about, long_about)]
pub struct Cli {
    /// The backend: sqlite:PATH, postgres://..., redis://... or memory:; `?namespace=NAME`
    /// picks the namespace (SQLite, Redis) or schema (PostgreSQL). `--help` never shows
    /// `LEASE_URL`'s value (it may carry a password).
    #[arg(
        long,
        short = 'u',
        env = "LEASE_URL",
        hide_env_values = true,
        value_name = "URL",
        global = true
    )]
    pub url: Option<String>,

    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// Give up connecting after this long (`5s`, `500ms`, `1m`).
    #[arg(long, value_name = "DURATION", default_value = "5s", global = true,
          value_parser = parse_duration)]
    pub connect_timeout: Duration,

    /// Give up on each backend call after this long.
    #[arg(long, value_name = "DURATION", default_value = "30s", global = true,
          value_parser = parse_duration)]
    pub timeout: Duration,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Counts of executions by status, as `get` reads them at the backend clock (an expired
    /// lease counts as ended), plus the records the backend cannot decode.
    Status,
    /// What the backend declares it can do (cancel, pause, retention, rate limits...): a
    /// command needing a capability it lacks is refused before it calls anything.
    Caps,
    /// Executions that keep failing: at least `--min` consecutive deliveries ended without an
    /// acknowledgement, most failing first.
    Failing(FailingArgs),
    /// Executions holding a live lease now (running, lease not expired at the backend
    /// clock), soonest expiry first: id, token, time left, workflow, concurrency key. Who
    /// holds a lease is not recorded by any backend.
    Live(LiveArgs),
    /// One execution's record and its step records.
    Show(ShowArgs),
    /// Stored execution records the backend cannot decode (claims skip them).
    Corrupt(CorruptArgs),
    /// Executions by status, workflow and concurrency key, newest admitted first, one page
    /// at a time (`--after CURSOR`, as the previous page's last line says).
    List(ListArgs),
    /// Dead executions (out of attempts, waiting for an operator), by id, with their last
    /// error; `--after ID` for the next page.
    Dead(DeadArgs),
    /// Re-admits dead executions (all or none): due now, attempts counted from 0, the input
    /// replaced by `--input JSON` when given.
    Retry(RetryArgs),
    /// Removes terminal (completed or failed) executions that ended more than `--older-than`
    /// ago on the backend clock, with their step records, store receipts and start records,
    /// in batches (each one atomic) until none is left.
    Purge(PurgeArgs),
    /// Cancels an execution for good: a running delivery's lease ends in the same step (its
    /// holder's writes are refused from then on), and it is never claimed again.
    Cancel(CancelArgs),
    /// Holds back every claim of the namespace, or of one workflow (`--workflow`); running
    /// deliveries go on. `--list` shows what is paused.
    Pause(PauseArgs),
    /// Lets a paused namespace or workflow be claimed again, waking idle dispatchers.
    Resume(PauseArgs),
    /// The per-key policies and their namespace defaults: concurrency limits, start rates and
    /// ordered keys. `--key KEY` or `--default` with `--set N`/`--remove` (concurrency),
    /// `--rate N/PERIOD`/`--remove-rate` (start rate) or `--ordered`/`--unordered` changes
    /// that scope first.
    Limits(LimitsArgs),
    /// Recurring admissions (`lease::schedule`): each schedule's cron expression, time zone,
    /// catch-up policy, last admitted and next occurrence. Reads only.
    Schedules(SchedulesArgs),
    /// Creates the store's schema (PostgreSQL schema, SQLite file's tables, Redis namespace)
    /// or upgrades it to this version: the one command that changes the schema (every other
    /// refuses a schema at another version, or none). PostgreSQL builds new indexes
    /// concurrently; each step waits for locks at most `--lock-timeout`, then fails and
    /// may be run again. Not bounded by `--connect-timeout`: an index build takes its time.
    Migrate(MigrateArgs),
    /// The operator console in a browser: the namespace and each execution as pages that
    /// update live (server-sent events driven by the backend's wake-ups), with cancel, pause,
    /// resume and retention's dry run when `--allow-writes`. Serves until stopped.
    Ui(UiArgs),
}

/// `ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to listen on. A loopback address (127.0.0.0/8, ::1) may serve plain HTTP;
    /// any other needs `--tls-cert` and `--tls-key`, or `--behind-tls-proxy`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8425")]
    pub listen: SocketAddr,
    /// The secret that opens the console (`Authorization: Bearer TOKEN`, or open
    /// `/?access_token=TOKEN` once: the browser gets a session cookie instead). Without it a
    /// random one is drawn and printed in the console's URL. A given value is never shown.
    #[arg(
        long,
        env = "LEASE_UI_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub access_token: Option<String>,
    /// Show and accept the controls: cancel, pause, resume, retention's dry run.
    #[arg(long)]
    pub allow_writes: bool,
    /// On a backend without wake-ups, how often an open page re-reads the store.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub refresh: Duration,
    /// Serve HTTPS with this certificate chain (PEM file, the server's certificate first).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM file: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A proxy in front of the console terminates TLS (and passes the `Host` header
    /// through): serve plain HTTP on any address, but give cookies `Secure` as under TLS.
    #[arg(long, conflicts_with = "tls_cert")]
    pub behind_tls_proxy: bool,
    /// How long a session cookie lasts after the access token opened it.
    #[arg(long, value_name = "DURATION", default_value = "12h", value_parser = parse_duration)]
    pub session_ttl: Duration,
    /// How long a client has to send a request's headers (and finish the TLS handshake);
    /// an idle connection is closed after as long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// How long one write to a client may wait without progress (a client that stops
    /// reading, its buffers full) before its connection is closed.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Connections served at once; more are answered 503 and closed.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_connections: u32,
    /// Live-update streams (open pages) at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_event_streams: u32,
    /// How often the console samples the status counts for the activity page's charts
    /// (1s to 60s; it keeps the last hour).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_sample_every)]
    pub sample_every: Duration,
}

/// `cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The execution id.
    pub id: String,
    /// Why, kept on the record (1-1024 bytes).
    #[arg(long, default_value = "cancelled by an operator")]
    pub reason: String,
}

/// `pause` and `resume`.
#[derive(Debug, Args)]
pub struct PauseArgs {
    /// Only the executions of this workflow (default: the whole namespace).
    #[arg(long, value_name = "NAME", conflicts_with = "list")]
    pub workflow: Option<String>,
    /// List the paused scopes instead (changes nothing).
    #[arg(long)]
    pub list: bool,
}

/// `limits`: `--key` or `--default` names the scope, and one or more changes apply to it
/// (a change without a scope, or a scope without a change, is a usage error); `--workflow`
/// with `--redelivery` or `--remove-redelivery` changes one workflow's own redelivery policy.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("scope").args(["key", "default"]).requires("change")))]
#[command(group(
    clap::ArgGroup::new("redelivery_change")
        .args(["redelivery", "remove_redelivery"])
        .requires("workflow")
))]
#[command(group(
    clap::ArgGroup::new("change")
        .args(["set", "remove", "rate", "remove_rate", "ordered", "unordered"])
        .multiple(true)
        .requires("scope")
))]
pub struct LimitsArgs {
    /// The key whose policies to change.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// Change the namespace default, for keys without a policy of their own.
    #[arg(long)]
    pub default: bool,
    /// The new concurrency limit (1-100000 live leases).
    #[arg(long, value_name = "N", conflicts_with = "remove")]
    pub set: Option<u32>,
    /// Remove the concurrency limit (unlimited).
    #[arg(long)]
    pub remove: bool,
    /// The new start rate: at most N claims in any window of PERIOD (`10/1s`, `600/1h`,
    /// `5/s`; 1-10000 starts, 1ms to 1 day).
    #[arg(long, value_name = "N/PERIOD", value_parser = parse_rate, conflicts_with = "remove_rate")]
    pub rate: Option<lease::RateLimit>,
    /// Remove the start rate (unlimited).
    #[arg(long)]
    pub remove_rate: bool,
    /// Run the scope's executions one at a time, in admission order.
    #[arg(long, conflicts_with = "unordered")]
    pub ordered: bool,
    /// Unmark the scope as ordered (a key stays ordered while the default is).
    #[arg(long)]
    pub unordered: bool,
    /// The workflow whose own redelivery policy to change.
    #[arg(long, value_name = "NAME", requires = "redelivery_change")]
    pub workflow: Option<String>,
    /// The workflow's own redelivery policy, `BASE,FACTOR,CAP` (`1s,2,5m`): the delay after
    /// n unacknowledged deliveries in a row is min(CAP, BASE * FACTOR^(n-1)).
    #[arg(long, value_name = "BASE,FACTOR,CAP", value_parser = parse_redelivery,
          conflicts_with = "remove_redelivery")]
    pub redelivery: Option<lease::RedeliveryPolicy>,
    /// Remove the workflow's own redelivery policy (the handle's policy applies again).
    #[arg(long)]
    pub remove_redelivery: bool,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only executions with this stored status (admitted, running, suspended, completed,
    /// failed, cancelled, dead).
    #[arg(long, value_name = "STATUS", value_parser = parse_status)]
    pub status: Option<lease::ExecutionStatus>,
    /// Only executions of this workflow.
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
    /// Only executions with this concurrency key.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
    /// List at most this many (1-1000).
    #[arg(long, default_value_t = 20, value_parser = limit)]
    pub limit: usize,
    /// Start after this cursor (the previous page's last line names it).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
}

/// `failing`.
#[derive(Debug, Args)]
pub struct FailingArgs {
    /// The fewest unacknowledged deliveries listed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub min: u32,
    /// List at most this many (1-1000).
    #[arg(long, default_value_t = 20, value_parser = limit)]
    pub limit: usize,
}

/// `live`.
#[derive(Debug, Args)]
pub struct LiveArgs {
    /// List at most this many (1-1000).
    #[arg(long, default_value_t = 20, value_parser = limit)]
    pub limit: usize,
}

/// `show`: the record and one page of its step records, so an execution with many steps
/// never prints (or loads) them all at once.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The execution id.
    pub id: String,
    /// Show the step records after this step key (with `--after-attempt`), as the previous
    /// page's last line says.
    #[arg(long, value_name = "STEP_KEY")]
    pub after: Option<String>,
    /// The attempt of the `--after` step key.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "after")]
    pub after_attempt: u32,
    /// Show at most this many step records (1-1000, `lease::MAX_STEP_PAGE`).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=i64::from(lease::MAX_STEP_PAGE)))]
    pub limit: u32,
}

/// `dead`.
#[derive(Debug, Args)]
pub struct DeadArgs {
    /// List the dead executions after this id (the previous page's last).
    #[arg(long, value_name = "ID")]
    pub after: Option<String>,
    /// List at most this many (1-1000).
    #[arg(long, default_value_t = 20, value_parser = limit)]
    pub limit: usize,
}

/// `retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The dead executions to re-admit (1-1000).
    #[arg(required = true, num_args = 1..)]
    pub ids: Vec<String>,
    /// A new input for every one of them (JSON text).
    #[arg(long, value_name = "JSON")]
    pub input: Option<String>,
}

/// `corrupt`.
#[derive(Debug, Args)]
pub struct CorruptArgs {
    /// List at most this many (1-1000).
    #[arg(long, default_value_t = 100, value_parser = limit)]
    pub limit: usize,
}

/// `purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Purge executions that ended more than this long ago (`30d`, `12h`, `90min`); at least
    /// a day unless `--force`, as the dispatcher's retention requires.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub older_than: Duration,
    /// Executions per atomic batch (1-1000).
    #[arg(long, default_value_t = 1000, value_parser = limit)]
    pub batch: usize,
    /// Purge nothing: print the cutoff and how many terminal executions there are now (an
    /// upper bound of what would go).
    #[arg(long)]
    pub dry_run: bool,
    /// Allow `--older-than` below a day. A purged execution's store receipts and start
    /// request are forgotten: a holder that outlives the cutoff could apply a store update
    /// twice or start a request's target again.
    #[arg(long)]
    pub force: bool,
}

/// `schedules`.
#[derive(Debug, Args)]
pub struct SchedulesArgs {
    /// Show only this schedule (exit status 1 when there is none of that name).
    pub name: Option<String>,
}

/// `migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// PostgreSQL: how long each migration step waits for a lock (a long transaction on a
    /// table it alters) before it fails, changing nothing of that step.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub lock_timeout: Duration,
}

/// A duration in humantime's syntax (`5s`, `1h 30m`, `2days`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|e| format!("{e} (for example 5s, 12h, 30d)"))
}

/// The console's sampling interval: 1 s to 60 s (shorter would load the store for little;
/// longer would leave minutes of the charts without a sample).
fn parse_sample_every(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(60) {
        return Err(format!("{text} is outside 1s..=60s"));
    }
    Ok(d)
}

/// A stored status by its name (`running`, `dead`, ...).
fn parse_status(text: &str) -> Result<lease::ExecutionStatus, String> {
    text.parse().map_err(|_| {
        "must be one of admitted, running, suspended, completed, failed, cancelled, dead".to_owned()
    })
}

/// A start rate, `N/PERIOD`: N starts in any window of PERIOD (humantime; a bare unit
/// such as `s` or `min` means one of it).
pub fn parse_rate(text: &str) -> Result<lease::RateLimit, String> {
    let example = "(for example 10/1s, 600/1h, 5/s)";
    let Some((starts, period)) = text.trim().split_once('/') else {
        return Err(format!("must be N/PERIOD {example}"));
    };
    let starts: u32 = starts
        .trim()
        .parse()
        .map_err(|_| format!("{starts:?} is not a whole number of starts {example}"))?;
    let period = period.trim();
    let period = if period.starts_with(|c: char| c.is_ascii_alphabetic()) {
        format!("1{period}")
    } else {
        period.to_owned()
    };
    let period = humantime::parse_duration(&period).map_err(|e| format!("{e} {example}"))?;
    lease::RateLimit::new(starts, period).map_err(|e| e.to_string())
}

/// A start rate as `parse_rate` reads it (`10/1s`, `600/1h`).
pub fn show_rate(rate: lease::RateLimit) -> String {
    format!(
        "{}/{}",
        rate.starts(),
        humantime::format_duration(rate.period())
    )
}

/// A redelivery policy, `BASE,FACTOR,CAP` (humantime durations and a whole factor), held
/// to the RFC's rules by [`lease::RedeliveryPolicy::new`].
pub fn parse_redelivery(text: &str) -> Result<lease::RedeliveryPolicy, String> {
    let example = "(for example 1s,2,5m)";
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [base, factor, cap] = parts[..] else {
        return Err(format!("must be BASE,FACTOR,CAP {example}"));
    };
    let duration = |t: &str| humantime::parse_duration(t).map_err(|e| format!("{e} {example}"));
    let factor: u32 = factor
        .parse()
        .map_err(|_| format!("{factor:?} is not a whole factor {example}"))?;
    lease::RedeliveryPolicy::new(duration(base)?, factor, duration(cap)?).map_err(|e| e.to_string())
}

/// A redelivery policy as `parse_redelivery` reads it (`1s,2,5m`).
pub fn show_redelivery(p: lease::RedeliveryPolicy) -> String {
    let ms = |ms: u64| humantime::format_duration(std::time::Duration::from_millis(ms));
    format!("{},{},{}", ms(p.base_ms()), p.factor(), ms(p.cap_ms()))
}

/// A list or batch limit, 1..=1000 ([`lease::limits::MAX_CLAIM_LIMIT`]).
fn limit(text: &str) -> Result<usize, String> {
    let max = lease::limits::MAX_CLAIM_LIMIT;
    match text.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from 1 to {max}")),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[rstest]
    #[case::a_day("1day", 86_400)]
    #[case::minutes("90min", 5_400)]
    #[case::days_short("30d", 30 * 86_400)]
    #[case::two_units("1h 30m", 5_400)]
    #[case::seconds("5s", 5)]
    fn durations(#[case] text: &str, #[case] secs: u64) {
        assert_eq!(parse_duration(text), Ok(Duration::from_secs(secs)));
    }

    #[rstest]
    #[case::a_word("soon")]
    #[case::no_unit("30")]
    #[case::negative("-1d")]
    #[case::empty("")]
    fn bad_durations_are_refused_with_an_example(#[case] text: &str) {
        let e = parse_duration(text).expect_err(text);
        assert!(e.contains("for example"), "{text:?}: {e}");
    }

    #[rstest]
    #[case::per_second("10/1s", 10, 1000)]
    #[case::bare_unit("5/s", 5, 1000)]
    #[case::an_hour("600/1h", 600, 3_600_000)]
    #[case::milliseconds("1/250ms", 1, 250)]
    #[case::spaces(" 2 / 1min ", 2, 60_000)]
    fn rates(#[case] text: &str, #[case] starts: u32, #[case] ms: u64) {
        let rate = parse_rate(text).expect(text);
        assert_eq!(
            (rate.starts(), rate.period()),
            (starts, Duration::from_millis(ms))
        );
        assert_eq!(parse_rate(&show_rate(rate)), Ok(rate), "round trip");
    }

    #[rstest]
    #[case::no_slash("10")]
    #[case::zero_starts("0/1s")]
    #[case::too_many("10001/1s")]
    #[case::too_long("1/2days")]
    #[case::no_period("1/")]
    #[case::not_a_number("x/1s")]
    #[case::sub_millisecond("1/1500us")]
    fn bad_rates_are_refused(#[case] text: &str) {
        assert!(parse_rate(text).is_err(), "{text}");
    }

    #[test]
    fn statuses_parse_by_name() {
        assert_eq!(parse_status("dead"), Ok(lease::ExecutionStatus::Dead));
        assert!(parse_status("Dead").is_err() && parse_status("").is_err());
    }

    #[rstest]
    #[case::one("1", 1)]
    #[case::the_maximum("1000", 1000)]
    fn limits(#[case] text: &str, #[case] expected: usize) {
        assert_eq!(limit(text), Ok(expected));
    }

    #[rstest]
    #[case::zero("0")]
    #[case::over_the_maximum("1001")]
    #[case::negative("-1")]
    #[case::not_a_number("x")]
    fn bad_limits_are_refused(#[case] bad: &str) {
        assert!(limit(bad).is_err(), "{bad}");
    }
}
