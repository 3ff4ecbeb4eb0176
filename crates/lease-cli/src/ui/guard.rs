//! Who may use the console (docs/decisions/0043-console.md, "Access and transport"), checked in
//! front of every route: no request of another site (`Sec-Fetch-Site`, else `Origin`); on a
//! loopback address, a `Host` naming this server (a page that rebinds its own name to
//! 127.0.0.1 is refused); then the access token, as a bearer header, or exchanged once from
//! `?access_token=` for a session cookie ([`super::session`]). A form also carries the
//! per-server random CSRF token, checked where the form is read ([`Guard::form_ok`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::session::{AccessToken, CookieShape, Sessions, random_hex, same};

/// The query parameter that hands the access token to a browser once.
const QUERY: &str = "access_token=";

/// How the console is reached: the scheme browsers see and whether a proxy is in front.
#[derive(Debug, Clone, Copy)]
pub struct Reach {
    /// TLS served here or by a proxy in front: `https`, `Secure` cookies.
    pub secure: bool,
    /// A TLS proxy is in front: the `Host` is the proxy's name, and the client address the
    /// proxy reports is logged beside the connection's.
    pub proxied: bool,
}

/// The server's secrets, its sessions and the hosts it answers to.
#[derive(Debug)]
pub struct Guard {
    token: String,
    csrf: String,
    sessions: Sessions,
    ttl: Duration,
    cookie: CookieShape,
    reach: Reach,
    /// On a loopback address (no proxy): the `Host` values naming this server.
    hosts: Option<Vec<String>>,
}

/// The client of a request, as the control log shows it: the connection's address, and
/// behind a proxy the address the proxy reports.
#[derive(Debug, Clone)]
pub struct Client(pub String);

/// When the request's session ends (`None`: a bearer request, no session).
#[derive(Debug, Clone, Copy)]
pub struct SessionEnd(pub Option<Instant>);

/// The connection's peer address, set by the accept loop.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Guard {
    /// For a server on `addr`, reached as `reach`, opening sessions of `ttl`.
    pub fn new(addr: SocketAddr, token: &AccessToken, reach: Reach, ttl: Duration) -> Self {
        let hosts = (addr.ip().is_loopback() && !reach.proxied)
            .then(|| vec![addr.to_string(), format!("localhost:{}", addr.port())]);
        Guard {
            token: token.value.clone(),
            csrf: random_hex(),
            sessions: Sessions::new(ttl),
            ttl,
            cookie: CookieShape::new(addr.port(), reach.secure),
            reach,
            hosts,
        }
    }

    /// The CSRF token every form of this server carries.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether a submitted form's CSRF token is this server's.
    pub fn form_ok(&self, submitted: &str) -> bool {
        same(submitted, &self.csrf)
    }

    /// The session the request carries, by bearer token (no end) or session cookie.
    fn authorized(&self, headers: &HeaderMap) -> Option<SessionEnd> {
        let bearer = header_str(headers, header::AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|v| same(v, &self.token));
        if bearer {
            return Some(SessionEnd(None));
        }
        let id = cookie(headers, &self.cookie.name)?;
        self.sessions.end_of(id).map(|end| SessionEnd(Some(end)))
    }

    /// Whether the `Host` header names this server, where that is checked.
    fn host_ok(&self, headers: &HeaderMap) -> bool {
        self.hosts.as_ref().is_none_or(|hosts| {
            header_str(headers, header::HOST).is_some_and(|h| hosts.iter().any(|o| o == h))
        })
    }

    /// Whether the request comes from a page of another origin. `Sec-Fetch-Site` when the
    /// browser sends it: `same-origin`, or `none` (an address typed or pasted, a bookmark)
    /// for a read; else an `Origin`, when sent, must be this server as its `Host` names it.
    /// A client that sends neither (curl, a script with the bearer token) is no browser
    /// page.
    fn cross_site(&self, method: &Method, headers: &HeaderMap) -> bool {
        if let Some(site) = header_str(headers, "sec-fetch-site") {
            let read = method == Method::GET || method == Method::HEAD;
            return !(site == "same-origin" || (site == "none" && read));
        }
        if headers.get(header::ORIGIN).is_none() {
            return false;
        }
        let scheme = if self.reach.secure { "https" } else { "http" };
        let origin = header_str(headers, header::ORIGIN);
        let host = header_str(headers, header::HOST);
        !matches!((origin, host), (Some(o), Some(h)) if o == format!("{scheme}://{h}"))
    }

    /// The client as the log shows it.
    fn client(&self, request: &Request) -> Client {
        let peer = request
            .extensions()
            .get::<Peer>()
            .map_or_else(|| "-".to_owned(), |p| p.0.to_string());
        let forwarded = self
            .reach
            .proxied
            .then(|| header_str(request.headers(), "x-forwarded-for"))
            .flatten();
        Client(match forwarded {
            Some(f) => format!("{peer} forwarded-for={f:?}"),
            None => peer,
        })
    }
}

fn header_str<K: header::AsHeaderName>(headers: &HeaderMap, name: K) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The value of cookie `name`.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('='))
}

/// The middleware in front of every route.
pub async fn check(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let guard = &*guard;
    let headers = request.headers();
    if guard.cross_site(request.method(), headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "refused: a request from another site (open the console's address directly)",
        );
    }
    if !guard.host_ok(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "refused: this server answers to its own address only",
        );
    }
    if let Some(response) = exchange_token(guard, &request) {
        return response;
    }
    let Some(end) = guard.authorized(headers) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "this console needs its access token: open the address `lease ui` printed, with \
             ?access_token=TOKEN, once",
        );
    };
    let client = guard.client(&request);
    request.extensions_mut().insert(end);
    request.extensions_mut().insert(client);
    let mut response = next.run(request).await;
    protect(response.headers_mut());
    response
}

/// A GET of `?access_token=TOKEN`: with the right token a new session's cookie, and a
/// redirect to the same address without the token (so it leaves the address bar and the
/// history); with a wrong one, 401.
fn exchange_token(guard: &Guard, request: &Request) -> Option<Response> {
    if request.method() != Method::GET {
        return None;
    }
    let query = request.uri().query()?;
    let given = query.split('&').find_map(|pair| pair.strip_prefix(QUERY))?;
    if !same(given, &guard.token) {
        return Some(refuse(StatusCode::UNAUTHORIZED, "wrong access token"));
    }
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.starts_with(QUERY))
        .collect();
    // A path starting with `//` would read as another host in `Location`: send it home.
    let path = request.uri().path();
    let mut location = if path.starts_with("//") { "/" } else { path }.to_owned();
    if !rest.is_empty() {
        location.push('?');
        location.push_str(&rest.join("&"));
    }
    let cookie = guard.cookie.set(&guard.sessions.open(), guard.ttl);
    let location =
        HeaderValue::from_str(&location).unwrap_or_else(|_| HeaderValue::from_static("/"));
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    protect(response.headers_mut());
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

    const PLAIN: Reach = Reach {
        secure: false,
        proxied: false,
    };

    fn guard(addr: &str, reach: Reach) -> Guard {
        let token = AccessToken::new(Some("0123456789abcdef")).expect("token");
        let addr = addr.parse().expect("address");
        Guard::new(addr, &token, reach, Duration::from_secs(60))
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn loopback_checks_the_host_and_elsewhere_not() {
        let g = guard("127.0.0.1:8425", PLAIN);
        assert!(g.host_ok(&headers(&[("host", "127.0.0.1:8425")])));
        assert!(g.host_ok(&headers(&[("host", "localhost:8425")])));
        assert!(!g.host_ok(&headers(&[("host", "evil.example:8425")])));
        assert!(!g.host_ok(&headers(&[])));
        let v6 = guard("[::1]:9", PLAIN);
        assert!(v6.host_ok(&headers(&[("host", "[::1]:9")])));
        let proxied = Reach {
            secure: true,
            proxied: true,
        };
        assert!(guard("127.0.0.1:1", proxied).host_ok(&headers(&[("host", "ops.example")])));
    }

    #[test]
    fn another_site_is_refused_by_fetch_metadata_then_origin() {
        let g = guard("127.0.0.1:8425", PLAIN);
        let get = Method::GET;
        let post = Method::POST;
        assert!(!g.cross_site(&get, &headers(&[("sec-fetch-site", "same-origin")])));
        assert!(!g.cross_site(&get, &headers(&[("sec-fetch-site", "none")])));
        assert!(g.cross_site(&post, &headers(&[("sec-fetch-site", "none")])));
        assert!(g.cross_site(&get, &headers(&[("sec-fetch-site", "cross-site")])));
        assert!(g.cross_site(&get, &headers(&[("sec-fetch-site", "same-site")])));
        let own = [
            ("host", "127.0.0.1:8425"),
            ("origin", "http://127.0.0.1:8425"),
        ];
        assert!(!g.cross_site(&post, &headers(&own)));
        let foreign = [
            ("host", "127.0.0.1:8425"),
            ("origin", "http://evil.example"),
        ];
        assert!(g.cross_site(&get, &headers(&foreign)));
        assert!(g.cross_site(&post, &headers(&[("origin", "null")])));
        assert!(!g.cross_site(&post, &headers(&[])), "no browser");
        let tls = guard(
            "127.0.0.1:8425",
            Reach {
                secure: true,
                proxied: false,
            },
        );
        assert!(tls.cross_site(&post, &headers(&own)), "http is not https");
    }

    #[test]
    fn the_session_cookie_opens_and_a_token_cookie_does_not() {
        let g = guard("127.0.0.1:8425", PLAIN);
        let id = g.sessions.open();
        let mut h = HeaderMap::new();
        let value = format!("a=b; lease_ui_session_8425={id}");
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&value).expect("value"),
        );
        assert!(g.authorized(&h).is_some_and(|e| e.0.is_some()));
        let raw = headers(&[("cookie", "lease_ui_session_8425=0123456789abcdef")]);
        assert!(g.authorized(&raw).is_none());
        let bearer = headers(&[("authorization", "Bearer 0123456789abcdef")]);
        assert!(g.authorized(&bearer).is_some_and(|e| e.0.is_none()));
        assert_eq!(g.csrf().len(), 64);
        assert!(g.form_ok(&g.csrf.clone()) && !g.form_ok(&g.csrf[..63]));
    }
}
