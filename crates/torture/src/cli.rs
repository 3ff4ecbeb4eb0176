//! The command line of `lease-torture` as clap reads it (`--help` is generated from it):
//! the `run` and `runtime` subcommands (their value parsers are in [`crate::values`]).

use clap::{Parser, Subcommand};

use crate::controller::RunArgs;
use crate::runtime::RuntimeArgs;

/// `lease-torture`: a nemesis run of a lease backend, or one of its runtime processes.
#[derive(Debug, Parser)]
#[command(
    name = "lease-torture",
    about = "Nemesis runs of the lease backends: runtime processes under a seeded fault \
             schedule, then the history checker (usually through `cargo xtask torture`).",
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs the controller: admits executions, starts the runtime processes, injects the
    /// faults, then checks the history and prints the report.
    Run(Box<RunArgs>),
    /// One runtime process (started by `run`, not by hand).
    Runtime(RuntimeArgs),
}

impl Cli {
    /// Parses the arguments after the program name. `--help` and bad arguments come back as
    /// clap's error, which prints itself (help on stdout, errors on stderr, exit 2).
    pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Self, clap::Error> {
        Cli::try_parse_from(std::iter::once("lease-torture".to_owned()).chain(args))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use clap::error::ErrorKind;
    use rstest::rstest;

    use super::*;
    use crate::app::AppWrite;
    use crate::effects::EffectMode;
    use crate::faults::FaultKind;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::parse_args(args.iter().map(|a| (*a).to_owned())).map(|c| c.command)
    }

    fn run(args: &[&str]) -> RunArgs {
        let line: Vec<&str> = std::iter::once("run").chain(args.iter().copied()).collect();
        match parse(&line) {
            Ok(Command::Run(a)) => *a,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn run_defaults() {
        let a = run(&[]);
        assert_eq!(a.url, None);
        assert_eq!((a.processes, a.concurrency, a.window), (3, 8, 100));
        assert_eq!(a.max_executions, None);
        assert_eq!(a.duration, Duration::from_secs(60));
        assert_eq!(a.liveness, Duration::from_secs(60));
        assert_eq!(a.fault_every, Duration::from_secs(2));
        assert_eq!(a.lease_ms, 1500);
        assert_eq!(
            a.faults,
            FaultKind::ALL.into_iter().collect::<BTreeSet<_>>()
        );
        assert_eq!(a.app_write, AppWrite::Fenced);
        assert_eq!(a.effects, EffectMode::Helper);
        assert!(!a.keep && !a.clock_skew && a.failover.lag && a.failover.cmd.is_none());
        assert!(a.failover.replication.is_none());
        assert_eq!(a.cancel_every, None);
        let c = &a.controls;
        assert_eq!(
            (c.keys, c.keyed_percent, c.key_limit, c.priorities),
            (0, 50, None, 1)
        );
        // The clock seed is drawn once per process, below a million (the banner prints it).
        assert!(a.seed < 1_000_000);
        assert_eq!(run(&[]).seed, a.seed);
    }

    #[rstest]
    #[case::seed_space(&["--seed", "7"], |a: &RunArgs| a.seed == 7)]
    #[case::seed_equals(&["--seed=7"], |a: &RunArgs| a.seed == 7)]
    #[case::duration_bare_secs(&["--duration", "5"], |a: &RunArgs| a.duration == Duration::from_secs(5))]
    #[case::duration_fraction(&["--duration=2.5"], |a: &RunArgs| a.duration == Duration::from_millis(2500))]
    #[case::duration_humantime(&["--duration", "1m 30s"], |a: &RunArgs| a.duration == Duration::from_secs(90))]
    #[case::liveness_humantime(&["--liveness=2m"], |a: &RunArgs| a.liveness == Duration::from_secs(120))]
    #[case::fault_every_bare_ms(&["--fault-every", "500"], |a: &RunArgs| a.fault_every == Duration::from_millis(500))]
    #[case::fault_every_humantime(&["--fault-every=3s"], |a: &RunArgs| a.fault_every == Duration::from_secs(3))]
    #[case::lease_bare_ms(&["--lease-ms", "1000"], |a: &RunArgs| a.lease_ms == 1000)]
    #[case::lease_humantime(&["--lease-ms=2s"], |a: &RunArgs| a.lease_ms == 2000)]
    #[case::lease_floor(&["--lease-ms", "30"], |a: &RunArgs| a.lease_ms == 30)]
    #[case::processes(&["--processes", "64", "--concurrency=2"], |a: &RunArgs| a.processes == 64 && a.concurrency == 2)]
    #[case::executions(&["--executions", "1", "--max-executions=40"], |a: &RunArgs| a.window == 1 && a.max_executions == Some(40))]
    #[case::faults_list(&["--faults", "pause,kill"], |a: &RunArgs| a.faults == [FaultKind::Pause, FaultKind::Kill].into_iter().collect())]
    #[case::faults_none(&["--faults=none"], |a: &RunArgs| a.faults.is_empty())]
    #[case::negative_controls(&["--app-write", "unfenced", "--effects=unfenced"], |a: &RunArgs| a.app_write == AppWrite::Unfenced && a.effects == EffectMode::Unfenced)]
    #[case::failover(&["--failover-cmd", "sh f", "--replication=async", "--failover-lag", "off"], |a: &RunArgs| a.failover.cmd.as_deref() == Some("sh f") && !a.failover.lag)]
    #[case::clock_skew(&["--clock-skew", "--seed=1404"], |a: &RunArgs| a.clock_skew && a.seed == 1404)]
    #[case::paths_and_keep(&["--url", "sqlite:/tmp/t.db", "--work-dir=/tmp/w", "--json", "r.json", "--timeline", "t.svg", "--keep"], |a: &RunArgs| a.keep && a.url.as_deref() == Some("sqlite:/tmp/t.db") && a.work_dir.is_some() && a.json.is_some() && a.timeline.is_some())]
    #[case::controls(&["--cancel-every", "7", "--keys=4", "--keyed-percent", "30", "--key-limit", "2", "--priorities=3"],
        |a: &RunArgs| a.cancel_every.map(|n| n.get()) == Some(7) && a.controls.keys == 4
            && a.controls.keyed_percent == 30 && a.controls.key_limit == Some(2) && a.controls.priorities == 3)]
    #[case::pause_and_break(&["--pause-every", "2s", "--break-control=priority"],
        |a: &RunArgs| a.controls.pause_every == Some(Duration::from_secs(2))
            && a.controls.break_control == [crate::mutant::Broken::Priority])]
    #[case::break_several(&["--break-control=attempts,rate", "--break-control", "ordering"],
        |a: &RunArgs| a.controls.break_control == [crate::mutant::Broken::Attempts, crate::mutant::Broken::Rate, crate::mutant::Broken::Ordering])]
    fn run_flags_parse(#[case] args: &[&str], #[case] holds: fn(&RunArgs) -> bool) {
        let a = run(args);
        assert!(holds(&a), "{args:?} -> {a:?}");
    }

    #[rstest]
    #[case::seed_not_a_number(&["--seed", "x"], "--seed")]
    #[case::duration_negative(&["--duration=-1"], "--duration")]
    #[case::duration_zero(&["--duration", "0"], "--duration")]
    #[case::duration_word(&["--duration", "soon"], "--duration")]
    #[case::duration_over_a_day(&["--duration", "25h"], "--duration")]
    #[case::liveness_nan(&["--liveness", "NaN"], "--liveness")]
    #[case::fault_every_zero(&["--fault-every", "0ms"], "--fault-every")]
    #[case::lease_below_floor(&["--lease-ms", "29"], "--lease-ms")]
    #[case::lease_over_max(&["--lease-ms", "25h"], "--lease-ms")]
    #[case::processes_zero(&["--processes", "0"], "--processes")]
    #[case::processes_over_64(&["--processes=65"], "--processes")]
    #[case::concurrency_zero(&["--concurrency", "0"], "--concurrency")]
    #[case::executions_zero(&["--executions", "0"], "--executions")]
    #[case::max_executions_word(&["--max-executions", "many"], "--max-executions")]
    #[case::unknown_fault(&["--faults", "pause,flood"], "--faults")]
    #[case::app_write(&["--app-write", "maybe"], "--app-write")]
    #[case::effects(&["--effects=direct"], "--effects")]
    #[case::replication(&["--replication", "maybe"], "--replication")]
    #[case::failover_lag(&["--failover-lag", "yes"], "--failover-lag")]
    #[case::keep_takes_no_value(&["--keep=yes"], "--keep")]
    #[case::clock_skew_takes_no_value(&["--clock-skew", "yes"], "'yes'")]
    #[case::cancel_every_zero(&["--cancel-every", "0"], "--cancel-every")]
    #[case::key_limit_zero(&["--key-limit", "0"], "--key-limit")]
    #[case::keyed_percent_over_100(&["--keyed-percent=101"], "--keyed-percent")]
    #[case::priorities_zero(&["--priorities", "0"], "--priorities")]
    #[case::priorities_over_the_range(&["--priorities", "2002"], "--priorities")]
    #[case::keys_negative(&["--keys=-1"], "--keys")]
    #[case::break_control(&["--break-control", "cancel"], "--break-control")]
    #[case::pause_every_zero(&["--pause-every", "0"], "--pause-every")]
    #[case::given_twice(&["--seed", "1", "--seed", "2"], "--seed")]
    #[case::unknown_flag(&["--bogus", "1"], "--bogus")]
    #[case::missing_value(&["--url"], "--url")]
    #[case::stray_argument(&["x"], "'x'")]
    fn bad_run_flags_are_refused(#[case] args: &[&str], #[case] names: &str) {
        let line: Vec<&str> = std::iter::once("run").chain(args.iter().copied()).collect();
        let e = parse(&line).expect_err("refused");
        assert!(e.use_stderr(), "{args:?}: {e}");
        assert_eq!(e.exit_code(), 2, "{args:?}");
        assert!(e.to_string().contains(names), "{args:?}: {e}");
    }

    #[test]
    fn runtime_flags_as_the_controller_writes_them() {
        let line = [
            "runtime",
            "--url",
            "sqlite:/tmp/t.db",
            "--namespace",
            "torture_1",
            "--process",
            "3",
            "--log",
            "/tmp/p3.log",
            "--concurrency",
            "8",
            "--lease-ms",
            "1500",
            "--app-write",
            "unfenced",
            "--effects",
            "helper",
        ];
        let Ok(Command::Runtime(a)) = parse(&line) else {
            panic!("{line:?}");
        };
        assert_eq!((a.process, a.concurrency, a.lease_ms), (3, 8, 1500));
        assert_eq!(a.app_write, AppWrite::Unfenced);
        for missing in ["--url", "--namespace", "--log"] {
            let i = line.iter().position(|w| *w == missing).expect("present");
            let short: Vec<&str> = [&line[..i], &line[i + 2..]].concat();
            let e = parse(&short).expect_err("required");
            assert_eq!(e.kind(), ErrorKind::MissingRequiredArgument, "{missing}");
        }
    }

    /// A runtime reads its URL from the environment the controller sets, and its help never
    /// prints that variable's value: the URL may carry a password, which `ps` and a help
    /// text would show.
    #[test]
    fn a_runtime_takes_its_url_from_the_environment() {
        let cmd = <Cli as clap::CommandFactory>::command();
        let runtime = cmd.find_subcommand("runtime").expect("runtime subcommand");
        let url = runtime
            .get_arguments()
            .find(|a| a.get_id() == "url")
            .expect("url argument");
        assert_eq!(
            url.get_env(),
            Some(std::ffi::OsStr::new(crate::runtime::RUNTIME_URL_ENV))
        );
        assert!(url.is_hide_env_values_set());
    }

    #[test]
    fn help_is_generated() {
        let e = parse(&["run", "--help"]).expect_err("help");
        assert!(!e.use_stderr() && e.exit_code() == 0);
        let help = e.to_string();
        for flag in [
            "--duration <SECS>",
            "--lease-ms <MS>",
            "--failover-lag <on|off>",
            "--keep",
        ] {
            assert!(help.contains(flag), "{flag} in {help}");
        }
        let e = parse(&[]).expect_err("no command");
        assert!(e.use_stderr() && e.exit_code() == 2);
        assert!(e.to_string().contains("run"), "{e}");
        assert!(parse(&["walk"]).is_err());
    }
}
