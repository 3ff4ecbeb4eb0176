//! Who may use the console (DESIGN "Console (`lease ui`)"): on 127.0.0.1 without a token the
//! `Host` header must name this server (a page of another site that rebinds its name to
//! 127.0.0.1 is refused); elsewhere every request carries the access token (bearer header,
//! or the same-site cookie the first `?access_token=` visit sets). A POST must come from
//! this server's own pages: its `Origin`, when sent, is this server, and its form carries
//! the per-server random CSRF token (checked where the form is read, [`Guard::form_ok`]).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::failure::Failure;

/// The cookie that carries the access token.
const COOKIE: &str = "lease_ui_token";
/// The query parameter that hands the access token to a browser once.
const QUERY: &str = "access_token=";
/// The shortest access token accepted.
const MIN_TOKEN: usize = 16;

/// The server's secrets and the hosts it answers to.
#[derive(Debug)]
pub struct Guard {
    access_token: Option<String>,
    csrf: String,
    hosts: Vec<String>,
}

impl Guard {
    /// For a server on `addr`; `access_token` is required unless `addr` is 127.0.0.1 and
    /// must be 16 or more visible ASCII characters a cookie can carry.
    pub fn new(addr: SocketAddr, access_token: Option<&str>) -> Result<Self, Failure> {
        let default_address = addr.ip() == std::net::Ipv4Addr::LOCALHOST;
        if let Some(token) = access_token {
            check_token(token)?;
        } else if !default_address {
            return Err(Failure::Usage(format!(
                "listening on {addr} needs --access-token (or LEASE_UI_TOKEN): only 127.0.0.1 \
                 is served without one"
            )));
        }
        Ok(Guard {
            access_token: access_token.map(str::to_owned),
            csrf: random_hex(),
            hosts: vec![
                format!("127.0.0.1:{}", addr.port()),
                format!("localhost:{}", addr.port()),
            ],
        })
    }

    /// The CSRF token every form of this server carries.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether a submitted form's CSRF token is this server's.
    pub fn form_ok(&self, submitted: &str) -> bool {
        same(submitted, &self.csrf)
    }

    /// Whether `headers` carry the access token (always, without one).
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let Some(token) = &self.access_token else {
            return true;
        };
        let bearer = header_str(headers, header::AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|v| same(v, token));
        bearer || cookie(headers).is_some_and(|v| same(v, token))
    }

    /// Whether the `Host` header names this server: checked without an access token, where
    /// it is all that tells this server's pages from a rebound name's.
    fn host_ok(&self, headers: &HeaderMap) -> bool {
        self.access_token.is_some()
            || header_str(headers, header::HOST).is_some_and(|h| self.hosts.iter().any(|o| o == h))
    }
}

/// The access token's rules: long enough to guess, and nothing a cookie cannot hold.
fn check_token(token: &str) -> Result<(), Failure> {
    let fits = token
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b";,\"\\".contains(&b));
    if token.len() < MIN_TOKEN || !fits {
        return Err(Failure::Usage(format!(
            "--access-token must be at least {MIN_TOKEN} visible ASCII characters without \
             ; , \" or \\"
        )));
    }
    Ok(())
}

/// 32 random bytes as hex (the thread's CSPRNG, seeded from the OS).
fn random_hex() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Equality that takes as long for every string of one length.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The access-token cookie's value.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// A POST's `Origin`, when the browser sent one, is this server as the `Host` names it.
fn origin_ok(headers: &HeaderMap) -> bool {
    let Some(origin) = header_str(headers, header::ORIGIN) else {
        return headers.get(header::ORIGIN).is_none();
    };
    header_str(headers, header::HOST).is_some_and(|host| origin == format!("http://{host}"))
}

/// The middleware in front of every route.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let guard = &*guard;
    let headers = request.headers();
    if !guard.host_ok(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this server answers to 127.0.0.1 only",
        );
    }
    if let Some(response) = hand_over_token(guard, &request) {
        return response;
    }
    if !guard.authorized(headers) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this console needs its access token: open /?access_token=TOKEN once",
        );
    }
    if request.method() == Method::POST && !origin_ok(headers) {
        return refuse(StatusCode::FORBIDDEN, "a form of another site was refused");
    }
    let mut response = next.run(request).await;
    protect(response.headers_mut());
    response
}

/// `?access_token=TOKEN` with the right token: the cookie, and the same path without the
/// query.
fn hand_over_token(guard: &Guard, request: &Request) -> Option<Response> {
    let token = guard.access_token.as_deref()?;
    let given = request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix(QUERY))?;
    if !same(given, token) {
        return Some(refuse(StatusCode::UNAUTHORIZED, "wrong access token"));
    }
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    let path = HeaderValue::from_str(request.uri().path())
        .unwrap_or_else(|_| HeaderValue::from_static("/"));
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, path)]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Some(response)
}

fn refuse(status: StatusCode, message: &'static str) -> Response {
    let mut response = (status, message).into_response();
    protect(response.headers_mut());
    response
}

/// Headers on every answer: scripts only from this server (the page's one script, no
/// inline code), no framing, no caching, no referrer to other sites (`no-referrer` would make
/// the browser send `Origin: null` with the forms).
fn protect(headers: &mut HeaderMap) {
    let fixed: [(header::HeaderName, &'static str); 5] = [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src \
             'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
             base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("address")
    }

    #[test]
    fn only_the_default_address_goes_without_a_token() {
        assert!(Guard::new(addr("127.0.0.1:0"), None).is_ok());
        let e = Guard::new(addr("0.0.0.0:8425"), None).expect_err("no token");
        assert!(e.to_string().contains("--access-token"), "{e}");
        assert!(Guard::new(addr("127.0.0.2:1"), None).is_err());
        assert!(Guard::new(addr("0.0.0.0:1"), Some("0123456789abcdef")).is_ok());
    }

    #[test]
    fn weak_or_uncookable_tokens_are_refused() {
        for bad in ["short", "0123456789abcdef;", "0123456789 abcdef"] {
            assert!(check_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_are_compared_whole() {
        let g = Guard::new(addr("127.0.0.1:1"), None).expect("guard");
        assert_eq!(g.csrf().len(), 64);
        assert!(g.form_ok(&g.csrf.clone()));
        assert!(!g.form_ok(&g.csrf[..63]));
        assert!(!g.form_ok(""));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=b; lease_ui_token=x"),
        );
        assert_eq!(cookie(&h), Some("x"));
    }

    #[test]
    fn a_foreign_origin_or_host_is_refused() {
        let g = Guard::new(addr("127.0.0.1:8425"), None).expect("guard");
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8425"));
        assert!(g.host_ok(&h) && origin_ok(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8425"),
        );
        assert!(origin_ok(&h));
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!origin_ok(&h));
        h.insert(header::HOST, HeaderValue::from_static("evil.example:8425"));
        assert!(!g.host_ok(&h));
    }
}
