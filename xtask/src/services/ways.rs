//! The ways of finding a server after its environment variable, tried in order: the first
//! that works wins, else one error names every way and why it failed.

use super::found::Found;

/// Names ways (`local`, `binaries`, `containers`) to leave out, comma-separated; for trying
/// the later ways on a machine where an earlier one works.
pub const SKIP_VAR: &str = "XTASK_SKIP_WAYS";

/// One way of finding a server after its environment variable.
pub(super) struct Way {
    /// Short name for [`SKIP_VAR`]: `local`, `binaries` or `containers`.
    pub(super) key: &'static str,
    /// What it is, for messages.
    pub(super) what: &'static str,
    /// Tries it.
    pub(super) start: fn() -> Result<Found, String>,
}

/// Tries `ways` in order after the environment variable `env` (not set); the first that
/// works wins, else the error names every way and why it failed.
pub(super) fn first_that_works(service: &str, env: &str, ways: &[Way]) -> Result<Found, String> {
    let skip = std::env::var(SKIP_VAR).unwrap_or_default();
    let mut tried = vec![(env.to_owned(), "not set".to_owned())];
    for way in ways {
        if skip.split(',').any(|k| k.trim() == way.key) {
            tried.push((way.what.to_owned(), format!("left out by {SKIP_VAR}")));
            continue;
        }
        match (way.start)() {
            Ok(found) => return Ok(found),
            Err(why) => tried.push((way.what.to_owned(), why)),
        }
    }
    Err(not_found(service, &tried))
}

/// Formats the "nothing found" error: one line per way tried, with its reason.
fn not_found(service: &str, tried: &[(String, String)]) -> String {
    let mut msg = format!("no {service} server found. Tried, in order:");
    for (i, (way, why)) in tried.iter().enumerate() {
        msg.push_str(&format!("\n  {}. {way}: {why}", i + 1));
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_every_way() {
        let msg = not_found(
            "PostgreSQL",
            &[
                ("LEASE_POSTGRES_URL".into(), "not set".into()),
                ("127.0.0.1:5432".into(), "refused".into()),
            ],
        );
        assert_eq!(
            msg,
            "no PostgreSQL server found. Tried, in order:\n  1. LEASE_POSTGRES_URL: not set\n  2. 127.0.0.1:5432: refused"
        );
    }
}
