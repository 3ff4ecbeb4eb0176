//! What discovery hands back: a server that answers ([`Found`]), and the failover pairs
//! (a server with its failover script) named by two environment variables.

use std::path::PathBuf;

use crate::cleanup::Guard;
use lease_testserver::env_url;

/// A server that answers, and how it was found.
#[derive(Debug)]
pub struct Found {
    /// The URL handed to the tests.
    pub url: String,
    /// Which way it was found, for the log.
    pub how: String,
    /// The temp dir of a throwaway server started from local binaries.
    pub workdir: Option<PathBuf>,
    /// Stops a throwaway server when dropped; `None` for a server xtask did not start.
    pub _guard: Option<Guard>,
}

/// A server with a failover script named by both variables (`url_env`, `script_env`), or
/// `None` when either is unset.
pub(super) fn failover_pair_from_env(url_env: &str, script_env: &str) -> Option<Found> {
    let (url, _) = (env_url(url_env)?, env_url(script_env)?);
    Some(Found {
        url,
        how: format!("{url_env} and {script_env}"),
        workdir: None,
        _guard: None,
    })
}

/// The failover script of a server found with [`failover_pair_from_env`] (`script_env`), else
/// `failover` in the throwaway server's dir.
pub(super) fn failover_script_of(found: &Found, script_env: &str) -> Option<String> {
    env_url(script_env).or_else(|| {
        found
            .workdir
            .as_ref()
            .map(|d| d.join("failover").to_string_lossy().into_owned())
    })
}
