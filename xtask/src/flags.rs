//! The command line of `cargo xtask`, as clap reads it (`--help` is generated from it).
//! Each command's options live in its module; bench and torture pass their other arguments
//! through to lease-bench and `lease-torture run` as given.

use clap::{Parser, Subcommand};

use crate::{bench, package, plots, services_command, test_all, torture};

/// `cargo xtask`: the project's automation.
#[derive(Debug, Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "The project's automation (an alias in .cargo/config.toml).",
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Xtask {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// fmt, clippy, docs, cargo package, every backend's tests, a summary.
    #[command(long_about = test_all::ABOUT)]
    TestAll(test_all::Options),
    /// Benchmarks beside raw baselines (release mode).
    #[command(long_about = bench::ABOUT)]
    Bench(bench::Options),
    /// Backends under faults, then the history check.
    #[command(long_about = torture::ABOUT)]
    Torture(torture::Options),
    /// Finds or starts servers, prints the LEASE_*_URL variables to export.
    #[command(long_about = services_command::ABOUT)]
    Services(services_command::Options),
    /// Redraws docs/benchmarks/*.svg from docs/benchmarks/results.csv.
    #[command(long_about = plots::ABOUT)]
    Plots(plots::Options),
    /// Packages every publishable crate and verifies each builds on its own.
    #[command(long_about = package::ABOUT)]
    Package(package::Options),
}

impl Xtask {
    /// Parses the arguments after the program name. `--help` and bad arguments come back as
    /// clap's error, which prints itself (help on stdout with 0, errors on stderr with 2).
    ///
    /// clap hands everything from the first passed-through argument on to bench and torture,
    /// so two things are settled here, as the hand-written parser did: a `-h` / `--help`
    /// among them shows that command's help, and torture's `--backend` and `--release` may come anywhere.
    pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Self, clap::Error> {
        let line: Vec<String> = std::iter::once("xtask".to_owned()).chain(args).collect();
        let mut x = Xtask::try_parse_from(&line)?;
        if let Command::Torture(o) = &x.command
            && let Some(hoisted) = hoist_backends(&o.args)
        {
            let front = line.len() - o.args.len();
            x = Xtask::try_parse_from(line[..front].iter().chain(&hoisted))?;
        }
        let (name, passed) = match &x.command {
            Command::Bench(o) => ("bench", &o.args),
            Command::Torture(o) => ("torture", &o.args),
            _ => return Ok(x),
        };
        if passed.iter().any(|a| a == "-h" || a == "--help") {
            // The command's own help: clap answers `--help` with an error that prints it.
            return Xtask::try_parse_from(["xtask", name, "--help"]);
        }
        Ok(x)
    }
}

/// The passed-through arguments with every `--backend NAME` / `--backend=NAME` (and
/// `--release`) among them moved to the front (`None` when there is none).
fn hoist_backends(args: &[String]) -> Option<Vec<String>> {
    let (mut front, mut rest) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--backend" {
            front.push(arg.clone());
            front.extend(it.next().cloned());
        } else if arg.starts_with("--backend=") || arg == "--release" {
            front.push(arg.clone());
        } else {
            rest.push(arg.clone());
        }
    }
    (!front.is_empty()).then(|| front.into_iter().chain(rest).collect())
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::services::Service;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Xtask::parse_args(args.iter().map(|a| (*a).to_owned())).map(|x| x.command)
    }

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn test_all(backends: &[&str]) -> Command {
        Command::TestAll(test_all::Options {
            backends: strings(backends),
        })
    }

    fn torture_options(backends: &[&str], args: &[&str]) -> torture::Options {
        torture::Options {
            backends: strings(backends),
            release: false,
            args: strings(args),
        }
    }

    fn torture(backends: &[&str], args: &[&str]) -> Command {
        Command::Torture(torture_options(backends, args))
    }

    fn bench(args: &[&str]) -> Command {
        Command::Bench(bench::Options {
            args: strings(args),
        })
    }

    fn services(s: &[Service]) -> Command {
        Command::Services(services_command::Options {
            services: s.to_vec(),
        })
    }

    #[rstest]
    #[case::test_all(&["test-all"], test_all(&[]))]
    #[case::test_all_both_spellings(
        &["test-all", "--backend", "memory", "--backend=facade"],
        test_all(&["memory", "facade"])
    )]
    #[case::bench_nothing(&["bench"], bench(&[]))]
    #[case::bench_passes_everything(
        &["bench", "--backend", "sqlite", "--quick", "--only=claim", "--duration", "2s"],
        bench(&["--backend", "sqlite", "--quick", "--only=claim", "--duration", "2s"])
    )]
    #[case::torture_default(&["torture"], torture(&[], &[]))]
    #[case::torture_release_anywhere(
        &["torture", "--seed", "3", "--release"],
        Command::Torture(torture::Options { release: true, ..torture_options(&[], &["--seed", "3"]) })
    )]
    #[case::torture_passes_the_rest(&["torture", "--seed", "3"], torture(&[], &["--seed", "3"]))]
    #[case::torture_backends_first(
        &["torture", "--backend", "redis", "--backend=sqlite,postgres", "--duration", "5"],
        torture(&["redis", "sqlite", "postgres"], &["--duration", "5"])
    )]
    #[case::torture_backends_anywhere(
        &["torture", "--duration", "5", "--backend=sqlite", "--seed", "1", "--backend", "redis"],
        torture(&["sqlite", "redis"], &["--duration", "5", "--seed", "1"])
    )]
    #[case::torture_run_flags_keep_their_spelling(
        &["torture", "--backend=all", "--faults=kill,failover", "--keep", "--lease-ms", "900"],
        torture(&["all"], &["--faults=kill,failover", "--keep", "--lease-ms", "900"])
    )]
    #[case::plots(&["plots"], Command::Plots(plots::Options {}))]
    #[case::package(&["package"], Command::Package(package::Options {}))]
    #[case::services_default(&["services"], services(&[]))]
    #[case::services_named(
        &["services", "redis", "postgres-standby"],
        services(&[Service::Redis, Service::PostgresStandby])
    )]
    fn commands_parse(#[case] line: &[&str], #[case] expected: Command) {
        assert_eq!(parse(line).expect("parses"), expected, "{line:?}");
    }

    #[rstest]
    #[case::no_command(&[])]
    #[case::unknown_command(&["deploy"])]
    #[case::test_all_stray_argument(&["test-all", "--verbose"])]
    #[case::test_all_backend_without_name(&["test-all", "--backend"])]
    #[case::torture_unknown_backend(&["torture", "--backend", "mysql"])]
    #[case::torture_backend_without_name(&["torture", "--backend"])]
    #[case::torture_one_unknown_in_a_list(&["torture", "--backend=sqlite,mysql"])]
    #[case::torture_unknown_backend_later(&["torture", "--keep", "--backend=mysql"])]
    #[case::torture_later_backend_without_name(&["torture", "--keep", "--backend"])]
    #[case::services_unknown(&["services", "mysql"])]
    #[case::plots_stray_argument(&["plots", "--all"])]
    fn bad_command_lines_are_refused(#[case] line: &[&str]) {
        let e = parse(line).expect_err("refused");
        assert!(e.use_stderr(), "{line:?}: {e}");
        assert_eq!(e.exit_code(), 2, "{line:?}");
    }

    #[rstest]
    #[case::top(&["--help"], "torture")]
    #[case::help_command(&["help"], "services")]
    #[case::test_all(&["test-all", "--help"], "XTASK_SKIP_WAYS")]
    #[case::bench(&["bench", "--help"], "lease-bench")]
    #[case::torture(&["torture", "--help"], "--failover-lag")]
    #[case::torture_help_after_an_argument(&["torture", "--seed", "3", "-h"], "--failover-lag")]
    #[case::bench_help_after_an_argument(&["bench", "--quick", "--help"], "--stored-max")]
    #[case::services(&["services", "--help"], "postgres-standby")]
    #[case::services_short(&["services", "-h"], "[SERVICE]...")]
    #[case::plots(&["plots", "--help"], "results.csv")]
    fn help_is_generated(#[case] line: &[&str], #[case] mentions: &str) {
        let e = parse(line).expect_err("help");
        assert!(!e.use_stderr() && e.exit_code() == 0, "{line:?}: {e}");
        assert!(e.to_string().contains(mentions), "{line:?}: {e}");
    }

    #[test]
    fn every_service_is_named_on_the_command_line() {
        for s in Service::ALL.into_iter().chain(Service::ON_REQUEST) {
            assert_eq!(parse(&["services", s.name()]).ok(), Some(services(&[s])));
        }
    }

    #[test]
    fn torture_selects_each_backend_once_in_the_order_given() {
        let pick = |line: &[&str]| match parse(line) {
            Ok(Command::Torture(o)) => o.selected(),
            other => panic!("{line:?}: {other:?}"),
        };
        assert_eq!(pick(&["torture"]), ["sqlite", "postgres", "redis"]);
        assert_eq!(
            pick(&["torture", "--backend", "redis", "--backend", "sqlite,redis"]),
            ["redis", "sqlite"]
        );
        assert_eq!(
            pick(&["torture", "--backend", "postgres,all"]),
            ["postgres", "sqlite", "redis"]
        );
    }
}
