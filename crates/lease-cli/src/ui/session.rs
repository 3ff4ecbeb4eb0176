//! The console's secrets (docs/decisions/0043-console.md, "Access and transport"): the access
//! token, given or drawn at start, is exchanged once for a random session id that the browser
//! keeps in a cookie; sessions expire. The token itself never sits in a cookie.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::failure::Failure;

/// The shortest access token accepted.
const MIN_TOKEN: usize = 16;
/// Sessions kept at once: past it the one nearest its end is dropped (a token holder
/// opening sessions in a loop cannot grow the server's memory).
const MAX_SESSIONS: usize = 1024;

/// The access token: given (checked), or drawn when none was.
#[derive(Debug, Clone)]
pub struct AccessToken {
    pub value: String,
    /// Drawn by this process: printed in the console's URL (a given one never is).
    pub drawn: bool,
}

impl AccessToken {
    /// `given`, when it is 16 or more visible ASCII characters that need no escaping in a
    /// URL's query; else a fresh 32-byte random one.
    pub fn new(given: Option<&str>) -> Result<Self, Failure> {
        match given {
            Some(token) => {
                check_token(token)?;
                Ok(AccessToken {
                    value: token.to_owned(),
                    drawn: false,
                })
            }
            None => Ok(AccessToken {
                value: random_hex(),
                drawn: true,
            }),
        }
    }
}

/// The access token's rules: long enough not to be guessed, and nothing a URL's query value
/// would have to encode.
fn check_token(token: &str) -> Result<(), Failure> {
    let fits = token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    if token.len() < MIN_TOKEN || !fits {
        return Err(Failure::Usage(format!(
            "--access-token must be at least {MIN_TOKEN} characters among letters, digits \
             and - . _ ~"
        )));
    }
    Ok(())
}

/// 32 random bytes as hex (the thread's CSPRNG, seeded from the OS).
pub fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Equality that takes as long for every string of one length.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The open sessions: id to the instant it ends.
#[derive(Debug)]
pub struct Sessions {
    ttl: Duration,
    open: Mutex<HashMap<String, Instant>>,
}

impl Sessions {
    pub fn new(ttl: Duration) -> Self {
        Sessions {
            ttl,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A new session: its random id, valid for the configured time from now.
    pub fn open(&self) -> String {
        let id = random_hex();
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, end| *end > now);
        if open.len() >= MAX_SESSIONS
            && let Some(first) = open
                .iter()
                .min_by_key(|(_, end)| **end)
                .map(|(k, _)| k.clone())
        {
            open.remove(&first);
        }
        open.insert(id.clone(), now + self.ttl);
        id
    }

    /// When session `id` ends, if it is open (an ended one is forgotten).
    pub fn end_of(&self, id: &str) -> Option<Instant> {
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        match open.get(id) {
            Some(end) if *end > now => Some(*end),
            Some(_) => {
                open.remove(id);
                None
            }
            None => None,
        }
    }
}

/// How the session cookie is named and marked. Named after the port, since cookies are not
/// scoped to a port and two consoles on one host would otherwise replace each other's; under
/// TLS (or behind a TLS proxy) `Secure` with the `__Host-` prefix, which the browser accepts
/// only from a secure origin, for this host alone, on path `/`.
#[derive(Debug, Clone)]
pub struct CookieShape {
    pub name: String,
    pub secure: bool,
}

impl CookieShape {
    pub fn new(port: u16, secure: bool) -> Self {
        let prefix = if secure { "__Host-" } else { "" };
        CookieShape {
            name: format!("{prefix}lease_ui_session_{port}"),
            secure,
        }
    }

    /// The `Set-Cookie` value carrying session `id`.
    pub fn set(&self, id: &str, ttl: Duration) -> String {
        let secure = if self.secure { "; Secure" } else { "" };
        format!(
            "{}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
            self.name,
            ttl.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_or_unsafe_tokens_are_refused_and_none_draws_one() {
        for bad in [
            "short",
            "0123456789abcdef;",
            "0123456789 abcdef",
            "0123456789abcdef&",
        ] {
            assert!(AccessToken::new(Some(bad)).is_err(), "{bad}");
        }
        let given = AccessToken::new(Some("0123456789abcdef")).expect("a good token");
        assert!(!given.drawn);
        let drawn = AccessToken::new(None).expect("drawn");
        assert!(drawn.drawn && drawn.value.len() == 64);
        assert_ne!(drawn.value, AccessToken::new(None).expect("drawn").value);
    }

    #[test]
    fn sessions_are_random_and_end() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let a = sessions.open();
        assert_ne!(a, sessions.open());
        assert!(sessions.end_of(&a).is_some());
        assert!(sessions.end_of("nope").is_none());
        let ended = Sessions::new(Duration::ZERO);
        let b = ended.open();
        assert!(ended.end_of(&b).is_none());
    }

    #[test]
    fn the_cookie_is_host_only_and_secure_under_tls() {
        let plain = CookieShape::new(8425, false).set("x", Duration::from_secs(5));
        assert_eq!(
            plain,
            "lease_ui_session_8425=x; HttpOnly; SameSite=Strict; Path=/; Max-Age=5"
        );
        let tls = CookieShape::new(1, true).set("x", Duration::from_secs(5));
        assert!(tls.starts_with("__Host-lease_ui_session_1=x;") && tls.ends_with("; Secure"));
    }

    #[test]
    fn tokens_are_compared_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "ab"));
        assert!(!same("abc", "abd"));
    }
}
