//! `lease caps`: what the backend declares it can do
//! ([`lease::ExecutionClient::capabilities`]), one capability a row, and the refusals other
//! commands give up front for what it lacks ([`needs`]).

use lease::{Capabilities, LeaseBackend};

use crate::cli::{Command, LimitsArgs};
use crate::failure::Failure;
use crate::output::{Output, to_json};
use crate::table::Table;

/// The backend's name, then each capability and whether it has it.
pub fn run(backend: &dyn LeaseBackend) -> Output {
    let caps = backend.capabilities();
    let mut table = Table::new(&["CAPABILITY", "SUPPORTED"]);
    for (name, has) in caps.list() {
        table.row(vec![name.into(), if has { "yes" } else { "no" }.into()]);
    }
    Output {
        text: format!("backend: {}\n{}", caps.backend, table.render()),
        json: to_json(&caps),
    }
}

/// The capabilities `command` needs, each as whether `caps` has it and the words its
/// refusal names it by.
pub fn needs(command: &Command, caps: &Capabilities) -> Vec<(bool, &'static str)> {
    match command {
        Command::Status => vec![(caps.status_counts, "status counts")],
        Command::Live(_) => vec![(caps.live_leases, "listing live leases")],
        Command::List(_) => vec![(caps.browse, "listing executions")],
        Command::Dead(_) | Command::Retry(_) => vec![(caps.attempts, "dead letters")],
        Command::Purge(_) => vec![(caps.retention, "retention")],
        Command::Cancel(_) => vec![(caps.cancel, "cancel")],
        Command::Pause(_) | Command::Resume(_) => vec![(caps.pause, "pause and resume")],
        Command::Limits(args) => limit_needs(args, caps),
        _ => Vec::new(),
    }
}

/// The changes `limits` is asked to make: listing needs nothing (it marks what the backend
/// lacks), but a change it cannot make is refused before any other change is applied.
fn limit_needs(args: &LimitsArgs, caps: &Capabilities) -> Vec<(bool, &'static str)> {
    let mut needs = Vec::new();
    if args.set.is_some() || args.remove {
        needs.push((caps.concurrency_limits, "concurrency limits"));
    }
    if args.rate.is_some() || args.remove_rate {
        needs.push((caps.rate_limits, "rate limits"));
    }
    if args.ordered || args.unordered {
        needs.push((caps.ordered_keys, "ordered keys"));
    }
    if args.workflow.is_some() {
        needs.push((caps.workflow_redelivery, "workflow redelivery policies"));
    }
    needs
}

/// Refuses `command`, naming the backend, when its declaration lacks a capability the
/// command needs: before any call, so nothing is half done.
pub fn refuse_early(backend: &dyn LeaseBackend, command: &Command) -> Result<(), Failure> {
    let caps = backend.capabilities();
    match needs(command, &caps).into_iter().find(|(has, _)| !has) {
        Some((_, what)) => Err(Failure::unsupported(caps.backend, what)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn command(args: &[&str]) -> Command {
        let mut all = vec!["lease"];
        all.extend_from_slice(args);
        crate::cli::Cli::try_parse_from(all)
            .expect("parses")
            .command
    }

    /// What each command needs, read through a declaration without any capability: the
    /// command is refused for exactly the ones it needs; with every capability, for none.
    #[test]
    fn commands_name_what_they_need() {
        let none = Capabilities::none("x");
        let missing = |args: &[&str]| -> Vec<&str> {
            needs(&command(args), &none)
                .into_iter()
                .filter(|(has, _)| !has)
                .map(|(_, what)| what)
                .collect()
        };
        assert_eq!(missing(&["status"]), ["status counts"]);
        assert_eq!(missing(&["cancel", "job"]), ["cancel"]);
        assert!(missing(&["limits"]).is_empty());
        assert_eq!(
            missing(&["limits", "--key", "k", "--set", "2", "--ordered"]),
            ["concurrency limits", "ordered keys"]
        );
        assert!(missing(&["show", "job"]).is_empty());
        let all = Capabilities::all("x");
        for args in [
            &["status"][..],
            &["pause"],
            &["limits", "--default", "--set", "1"],
        ] {
            assert!(needs(&command(args), &all).iter().all(|(has, _)| *has));
        }
    }
}
