//! Usage errors as clap reports them, rendered as every other error: one line, exit status 2,
//! and no password from a URL typed in the wrong place (`lease postgres://u:pw@h/db status`
//! makes clap quote the URL as an unrecognized subcommand).

use std::process::ExitCode;

use crate::failure::Failure;

/// `--help` and `--version` print as clap renders them (and the help, with exit status 2,
/// when no command is given); a usage error is clap's first paragraph on one line, without
/// its own `error: `, its URLs redacted, with exit status 2.
pub fn parse_error(e: &clap::Error, args: &[String]) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(2);
    }
    let failure = Failure::Usage(usage_line(&e.to_string(), args));
    eprintln!("lease: error: {failure}");
    failure.exit_code()
}

/// The first paragraph of clap's message ("the following required arguments were not
/// provided:" and the arguments on the lines under it) on one line, without `error: `, with
/// the password of every URL in it redacted.
fn usage_line(text: &str, args: &[String]) -> String {
    let first = text.split("\n\n").next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let line = redact_args(first, args);
    line.split_whitespace()
        .map(redact_word)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with each argument (or the value of an `--option=value` argument) that holds a
/// password replaced by its redacted form: exact, even for a password with spaces or quotes.
fn redact_args(text: &str, args: &[String]) -> String {
    let mut secrets: Vec<&str> = args
        .iter()
        .flat_map(|arg| {
            let value = arg
                .strip_prefix('-')
                .and_then(|option| option.split_once('='))
                .map(|(_, value)| value);
            std::iter::once(arg.as_str()).chain(value)
        })
        .filter(|arg| lease::redact_url(arg) != *arg)
        .collect();
    // Longest first: an argument is never half-replaced through a shorter one inside it.
    secrets.sort_by_key(|arg| std::cmp::Reverse(arg.len()));
    secrets.iter().fold(text.to_owned(), |text, secret| {
        text.replace(secret, &lease::redact_url(secret))
    })
}

/// A word of the message, redacted when it is (or quotes) a URL: the net under
/// [`redact_args`] for a value clap shows differently from how it was typed.
fn redact_word(word: &str) -> String {
    let inner = word.trim_matches(['\'', '"', '`']);
    match inner.contains("://") {
        true => word.replace(inner, &lease::redact_url(inner)),
        false => word.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_url_in_place_of_a_subcommand_is_redacted() {
        let text = "error: unrecognized subcommand 'postgres://u:hunter2@h/db'\n\nUsage: lease";
        let line = usage_line(text, &args(&["lease", "postgres://u:hunter2@h/db"]));
        assert_eq!(line, "unrecognized subcommand 'postgres://u:***@h/db'");
    }

    #[test]
    fn a_password_with_spaces_or_quotes_is_redacted_whole() {
        let url = "postgres://u:it's a secret@h/db";
        let text = format!("error: invalid value '{url}' for '--timeout <DURATION>'\n\nx");
        let line = usage_line(&text, &args(&["lease", &format!("--timeout={url}")]));
        assert!(!line.contains("secret"), "{line}");
        assert!(line.contains("postgres://u:***@h/db"), "{line}");
    }

    #[test]
    fn a_url_not_among_the_arguments_is_still_redacted() {
        let line = usage_line("error: unexpected argument 'redis://:pw@h:1' found", &[]);
        assert_eq!(line, "unexpected argument 'redis://:***@h:1' found");
    }

    #[test]
    fn other_messages_are_kept() {
        let text = "error: the following required arguments were not provided:\n  \
                    --older-than <DURATION>\n\nUsage: lease purge";
        assert_eq!(
            usage_line(text, &args(&["lease", "purge"])),
            "the following required arguments were not provided: --older-than <DURATION>"
        );
    }
}
