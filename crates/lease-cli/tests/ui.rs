//! `lease ui` over real sockets (no browser), on a SQLite file: the access token (drawn and
//! printed, or given and never shown) traded once for an expiring session cookie; refusals
//! of another site's requests, a foreign `Host`, forms without the server's token and
//! controls of a read-only console, which change nothing; one log line per control; TLS with
//! a certificate made at test time, and the plain-text refusal of a non-loopback address; the
//! header-read timeout and the caps on connections and event streams.

mod common;

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The longest a polled condition may take.
const DEADLINE: Duration = Duration::from_secs(30);

/// One answer: status, head (lower-cased) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    /// The head as sent (cookie names keep their case).
    raw_head: String,
    body: String,
}

impl Answer {
    /// The `name=value` of the cookie the answer sets.
    fn cookie(&self) -> String {
        let at = self.head.find("set-cookie: ").expect("a cookie") + 12;
        let line = self.raw_head[at..].lines().next().unwrap_or_default();
        line.split(';').next().unwrap_or_default().to_owned()
    }

    /// The value of header `name` (lower-cased).
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
    }
}

/// The request text.
fn request(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    request
}

fn authority(base: &str) -> &str {
    base.split("://").nth(1).unwrap_or(base)
}

/// Sends one request on `stream` and reads the whole answer.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, text: &str) -> Answer {
    stream.write_all(text.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(common::RUN_LIMIT, stream.read_to_end(&mut raw))
        .await
        .expect("an answer in time")
        .expect("read the answer");
    parse(&raw)
}

fn parse(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Answer {
        status,
        head: head.to_ascii_lowercase(),
        raw_head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Sends one plain HTTP/1.1 request to the console at `base` and reads the whole answer.
async fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let authority = authority(base);
    let stream = TcpStream::connect(authority).await.expect("connect");
    exchange(stream, &request(authority, method, path, headers, body)).await
}

/// The path and query of the address the console printed (with its drawn token).
fn token_path(console: &common::Console) -> String {
    console.url.trim_start_matches(&console.base).to_owned()
}

/// Trades the printed token for a session: the `Cookie` header value.
async fn session(console: &common::Console) -> String {
    let handed = http(&console.base, "GET", &token_path(console), &[], "").await;
    assert_eq!(handed.status, 303, "{handed:?}");
    handed.cookie()
}

/// The CSRF token in a page's forms.
fn csrf(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..at + 64].to_owned()
}

async fn store() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("leases.db").display());
    let backend = lease::open(&url).await.expect("open");
    common::fill(&backend).await;
    (dir, url)
}

async fn status_of(url: &str, id: &str) -> serde_json::Value {
    common::on(url, &["show", id, "--json"]).await.json()["record"]["status"].clone()
}

/// The console's next stderr line holding `want`, within the deadline.
async fn logged(console: &mut common::Console, want: &str) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let line = tokio::time::timeout_at(deadline, console.log.recv())
            .await
            .unwrap_or_else(|_| panic!("no log line with {want:?} in time"))
            .expect("the console's stderr is open");
        if line.contains(want) {
            return line;
        }
    }
}

/// Admits `id` with an attempt limit of 1 for the namespace and fails its one delivery.
async fn make_dead(url: &str, id: &str) {
    use lease::{
        Admission, AttemptLimit, AttemptScope, ClaimRequest, ErrorNote, ExecutionClientExt,
        ExecutionId, Release,
    };
    let b = lease::open(url).await.expect("open");
    let limit = AttemptLimit::new(1).expect("limit");
    b.set_attempt_limit(&AttemptScope::Default, Some(limit))
        .await
        .expect("set limit");
    let id = ExecutionId::new(id).expect("id");
    b.admit(&Admission::new(id.clone())).await.expect("admit");
    let request = ClaimRequest {
        now: lease::Timestamp::MAX,
        limit: 100,
        duration: std::time::Duration::from_secs(300),
    };
    let leases = b.claim_due(request).await.expect("claim");
    let lease = leases
        .iter()
        .find(|l| l.execution_id == id)
        .expect("claimed");
    let how = Release::Failed(ErrorNote::new("error", "x"));
    assert!(
        !b.release_with(lease, &how)
            .await
            .expect("release")
            .is_lost()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_console_shows_pages_and_has_no_controls() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &[], &[]).await;
    assert!(console.line.contains("(read-only)"), "{}", console.line);
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let home = http(&console.base, "GET", "/", &with, "").await;
    assert_eq!(home.status, 200, "{home:?}");
    assert!(
        home.head
            .contains("content-security-policy: default-src 'none'"),
        "{home:?}"
    );
    assert!(home.body.contains("read-only"), "{home:?}");
    assert!(!home.body.contains("name=\"csrf\""), "no forms: {home:?}");
    let page = http(&console.base, "GET", "/execution?id=done-1", &with, "").await;
    assert!(page.body.contains("data-status=\"completed\""), "{page:?}");
    for list in ["/executions", "/dead"] {
        let listed = http(&console.base, "GET", list, &with, "").await;
        assert!(
            !listed.body.contains("type=\"checkbox\""),
            "{list}: {listed:?}"
        );
        assert!(!listed.body.contains("name=\"csrf\""), "{list}: {listed:?}");
    }
    let missing = http(&console.base, "GET", "/execution?id=nope", &with, "").await;
    assert_eq!(missing.status, 404, "{missing:?}");
    let body = "id=busy&reason=x&csrf=x";
    let cancel = http(&console.base, "POST", "/cancel", &with, body).await;
    assert_eq!(cancel.status, 404, "no control routes: {cancel:?}");
    let act = "action=cancel&id=busy&csrf=x";
    let act = http(&console.base, "POST", "/act", &with, act).await;
    assert_eq!(act.status, 404, "no selection route: {act:?}");
    let rebound = [("Host", "evil.example:8425"), ("Cookie", cookie.as_str())];
    let rebound = http(&console.base, "GET", "/", &rebound, "").await;
    assert_eq!(rebound.status, 403, "a rebound name: {rebound:?}");
    assert_eq!(status_of(&url, "busy").await, "running");
}

#[tokio::test(flavor = "multi_thread")]
async fn forms_need_the_token_and_this_origin_and_each_control_is_logged() {
    let (_dir, url) = store().await;
    let mut console = common::console(&url, &["--allow-writes"], &[]).await;
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let home = http(&console.base, "GET", "/", &with, "").await;
    let token = csrf(&home.body);
    let forged = "id=busy&reason=x&csrf=0";
    let forged = http(&console.base, "POST", "/cancel", &with, forged).await;
    assert_eq!(forged.status, 403, "{forged:?}");
    let line = logged(&mut console, "action=cancel").await;
    assert!(line.contains("id=\"busy\" status=403"), "{line}");
    let body = format!("id=busy&reason=x&csrf={token}");
    for foreign in [
        [
            ("Origin", "http://evil.example"),
            ("Cookie", cookie.as_str()),
        ],
        [
            ("Sec-Fetch-Site", "cross-site"),
            ("Cookie", cookie.as_str()),
        ],
        [("Sec-Fetch-Site", "same-site"), ("Cookie", cookie.as_str())],
    ] {
        let cross = http(&console.base, "POST", "/cancel", &foreign, &body).await;
        assert_eq!(cross.status, 403, "{foreign:?}: {cross:?}");
        let read = http(&console.base, "GET", "/", &foreign, "").await;
        assert_eq!(read.status, 403, "reads too: {foreign:?}: {read:?}");
    }
    assert_eq!(
        status_of(&url, "busy").await,
        "running",
        "nothing cancelled"
    );
    let base = console.base.clone();
    let own = [
        ("Origin", base.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
        ("Cookie", cookie.as_str()),
    ];
    let done = http(&console.base, "POST", "/cancel", &own, &body).await;
    assert_eq!(done.status, 200, "{done:?}");
    assert!(done.body.contains("cancelled busy"), "{done:?}");
    assert_eq!(status_of(&url, "busy").await, "cancelled");
    let line = logged(&mut console, "action=cancel").await;
    assert!(
        line.contains(" lease ui: control client=127.0.0.1:"),
        "{line}"
    );
    assert!(
        line.ends_with("action=cancel id=\"busy\" status=200"),
        "{line}"
    );
    let again = body.replace("busy", "done-1");
    let again = http(&console.base, "POST", "/cancel", &own, &again).await;
    assert_eq!(again.status, 409, "a completed execution: {again:?}");
    let retry = format!("id=flaky&input=&csrf={token}");
    let refused = http(&console.base, "POST", "/retry", &own, &retry).await;
    assert_eq!(refused.status, 502, "flaky is not dead: {refused:?}");
    assert!(refused.body.contains("not dead"), "{refused:?}");
    assert_eq!(
        status_of(&url, "flaky").await,
        "admitted",
        "nothing changed"
    );
    make_dead(&url, "doomed").await;
    let retry = format!("id=doomed&input=%7B%22x%22%3A1%7D&csrf={token}");
    let retried = http(&console.base, "POST", "/retry", &own, &retry).await;
    assert_eq!(retried.status, 200, "{retried:?}");
    assert!(retried.body.contains("re-admitted doomed"), "{retried:?}");
    let shown = common::on(&url, &["show", "doomed", "--json"]).await.json();
    assert_eq!(shown["record"]["status"], "admitted");
    assert_eq!(shown["record"]["input"]["x"], 1);
    let dry = format!("older_than=30d&csrf={token}");
    let purge = http(&console.base, "POST", "/purge-dry-run", &own, &dry).await;
    assert!(purge.body.contains("dry run: nothing purged"), "{purge:?}");
    let line = logged(&mut console, "action=purge-dry-run").await;
    assert!(line.ends_with("older_than=\"30d\" status=200"), "{line}");
    let pause = format!("workflow=&csrf={token}");
    let pause = http(&console.base, "POST", "/pause", &own, &pause).await;
    assert_eq!(pause.status, 200, "{pause:?}");
    let line = logged(&mut console, "action=pause").await;
    assert!(line.ends_with("scope=\"namespace\" status=200"), "{line}");
    let home = http(&console.base, "GET", "/", &with, "").await;
    assert!(home.body.contains("<td>namespace</td>"), "paused: {home:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_printed_token_opens_a_session_and_never_sits_in_a_cookie() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &[], &[]).await;
    let token = console
        .url
        .split("?access_token=")
        .nth(1)
        .expect("a drawn token");
    assert_eq!(token.len(), 64, "{}", console.url);
    let bare = http(&console.base, "GET", "/", &[], "").await;
    assert_eq!(bare.status, 401, "even on loopback: {bare:?}");
    let wrong = http(&console.base, "GET", "/?access_token=nope", &[], "").await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let path = format!("/execution?id=done-1&access_token={token}");
    let handed = http(&console.base, "GET", &path, &[], "").await;
    assert_eq!(handed.status, 303, "{handed:?}");
    assert_eq!(handed.header("location"), Some("/execution?id=done-1"));
    let port = console.base.rsplit(':').next().expect("a port");
    let set = handed.header("set-cookie").expect("a cookie");
    let (pair, attributes) = set.split_once(';').expect("attributes");
    let (name, id) = pair.split_once('=').expect("name=value");
    assert_eq!(name, format!("lease_ui_session_{port}"));
    assert!(id.len() == 64 && id != token, "a random session id: {set}");
    assert!(
        attributes.starts_with(" httponly; samesite=strict; path=/; max-age=43200")
            && !attributes.contains("secure"),
        "{set}"
    );
    let cookie = handed.cookie();
    let later = http(&console.base, "GET", "/", &[("Cookie", &cookie)], "").await;
    assert_eq!(later.status, 200, "{later:?}");
    let raw = format!("{name}={token}");
    let raw = http(&console.base, "GET", "/", &[("Cookie", &raw)], "").await;
    assert_eq!(raw.status, 401, "the token is no session: {raw:?}");
    let bearer = format!("Bearer {token}");
    let with = http(&console.base, "GET", "/", &[("Authorization", &bearer)], "").await;
    assert_eq!(with.status, 200, "{with:?}");
    let secret = "a-secret-of-24-characters";
    let given = common::console(&url, &[], &[("LEASE_UI_TOKEN", secret)]).await;
    assert!(!given.line.contains(secret), "{}", given.line);
    assert!(!given.url.contains("access_token"), "{}", given.url);
    let path = format!("/?access_token={secret}");
    let handed = http(&given.base, "GET", &path, &[], "").await;
    assert_eq!(handed.status, 303, "{handed:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_ends_and_its_event_stream_with_it() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &["--session-ttl", "2s"], &[]).await;
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let opened = Instant::now();
    let stream = http(&console.base, "GET", "/events/namespace", &with, "").await;
    assert_eq!(stream.status, 200, "the stream ran, then ended: {stream:?}");
    assert!(stream.body.contains("data:"), "{stream:?}");
    assert!(opened.elapsed() < common::RUN_LIMIT);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let home = http(&console.base, "GET", "/", &with, "").await;
        if home.status == 401 {
            break;
        }
        assert_eq!(home.status, 200, "{home:?}");
        assert!(Instant::now() < deadline, "the session never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_address_needs_tls_or_a_tls_proxy() {
    let (_dir, url) = store().await;
    let refused = common::on(&url, &["ui", "--listen", "0.0.0.0:0"]).await;
    refused.assert_error(2, "--tls-cert");
    let short = common::on(&url, &["ui", "--session-ttl", "500ms"]).await;
    short.assert_error(2, "--session-ttl");
    let args = [
        "--listen",
        "0.0.0.0:0",
        "--behind-tls-proxy",
        "--allow-writes",
    ];
    let mut console = common::console(&url, &args, &[]).await;
    let path = token_path(&console);
    let proxied = [("Host", "ops.example"), ("X-Forwarded-For", "192.0.2.7")];
    let handed = http(&console.base, "GET", &path, &proxied, "").await;
    assert_eq!(handed.status, 303, "any Host behind a proxy: {handed:?}");
    let set = handed.header("set-cookie").expect("a cookie");
    assert!(set.starts_with("__host-lease_ui_session_"), "{set}");
    assert!(set.ends_with("; secure"), "{set}");
    let cookie = handed.cookie();
    let mut with = proxied.to_vec();
    with.push(("Cookie", &cookie));
    let home = http(&console.base, "GET", "/", &with, "").await;
    assert_eq!(home.status, 200, "{home:?}");
    let mut plain = with.clone();
    plain.push(("Origin", "http://ops.example"));
    let body = format!("id=busy&reason=x&csrf={}", csrf(&home.body));
    let cross = http(&console.base, "POST", "/cancel", &plain, &body).await;
    assert_eq!(cross.status, 403, "the origin is https: {cross:?}");
    let mut own = with.clone();
    own.push(("Origin", "https://ops.example"));
    let done = http(&console.base, "POST", "/cancel", &own, &body).await;
    assert_eq!(done.status, 200, "{done:?}");
    let line = logged(&mut console, "status=200").await;
    assert!(
        line.contains("forwarded-for=\"192.0.2.7\" action=cancel"),
        "{line}"
    );
}

/// A self-signed certificate for 127.0.0.1 and localhost, as PEM files in `dir`.
fn test_certificate(
    dir: &std::path::Path,
) -> (String, String, rustls::pki_types::CertificateDer<'static>) {
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let made = rcgen::generate_simple_self_signed(names).expect("a certificate");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, made.cert.pem()).expect("write cert");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("write key");
    let show = |p: std::path::PathBuf| p.display().to_string();
    (show(cert), show(key), made.cert.der().clone())
}

/// A TLS client trusting `root` only.
fn tls_client(root: rustls::pki_types::CertificateDer<'static>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).expect("a root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// One request over TLS to 127.0.0.1.
async fn https(
    tls: &tokio_rustls::TlsConnector,
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let authority = authority(base);
    let tcp = TcpStream::connect(authority).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    let stream = tls.connect(name, tcp).await.expect("a TLS handshake");
    exchange(stream, &request(authority, "GET", path, headers, "")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_serves_https_with_a_host_only_secure_cookie() {
    let (dir, url) = store().await;
    let (cert, key, der) = test_certificate(dir.path());
    let bad = common::on(&url, &["ui", "--tls-cert", &key, "--tls-key", &key]).await;
    bad.assert_error(2, "--tls-cert");
    let args = ["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    let console = common::console(&url, &args, &[]).await;
    assert!(
        console.url.starts_with("https://127.0.0.1:"),
        "{}",
        console.url
    );
    let tls = tls_client(der);
    let handed = https(&tls, &console.base, &token_path(&console), &[]).await;
    assert_eq!(handed.status, 303, "{handed:?}");
    let set = handed.header("set-cookie").expect("a cookie");
    assert!(set.starts_with("__host-lease_ui_session_"), "{set}");
    assert!(
        set.contains("; path=/;") && set.ends_with("; secure"),
        "{set}"
    );
    let cookie = handed.cookie();
    let home = https(&tls, &console.base, "/", &[("Cookie", &cookie)]).await;
    assert_eq!(home.status, 200, "{home:?}");
    let authority = authority(&console.base);
    let mut plain = TcpStream::connect(authority).await.expect("connect");
    let text = request(authority, "GET", "/", &[], "");
    plain.write_all(text.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(common::RUN_LIMIT, plain.read_to_end(&mut raw))
        .await
        .expect("closed in time");
    assert!(!raw.starts_with(b"HTTP/"), "no plain HTTP: {raw:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_slow_with_its_headers_is_cut_off() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &["--header-timeout", "300ms"], &[]).await;
    // Taken before connecting: the console's timer starts when it accepts the connection,
    // which can be before `connect` returns here.
    let started = Instant::now();
    let mut slow = TcpStream::connect(authority(&console.base))
        .await
        .expect("connect");
    slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("send");
    let mut raw = Vec::new();
    // hyper's own header timeout is 30 s: a close well before that is this flag's doing.
    let cut_off = Duration::from_secs(10);
    let read = tokio::time::timeout(cut_off, slow.read_to_end(&mut raw)).await;
    assert!(read.is_ok(), "not closed within {cut_off:?}");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300), "closed after {took:?}");
    let idle = TcpStream::connect(authority(&console.base))
        .await
        .expect("connect");
    let mut idle = idle;
    let read = tokio::time::timeout(cut_off, idle.read_to_end(&mut raw)).await;
    assert!(
        read.is_ok(),
        "an idle connection is not closed within {cut_off:?}"
    );
}

/// Opens `path` and reads the answer's head, keeping the connection open.
async fn open(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, TcpStream) {
    let authority = authority(base);
    let mut stream = TcpStream::connect(authority).await.expect("connect");
    let text = request(authority, "GET", path, headers, "");
    stream.write_all(text.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut byte))
            .await
            .expect("a head in time")
            .expect("read");
        assert!(n == 1, "closed before the head ended: {raw:?}");
        raw.push(byte[0]);
    }
    (parse(&raw).status, stream)
}

/// Polls `path` until it answers `want`.
async fn answers(base: &str, path: &str, headers: &[(&str, &str)], want: u16) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let answer = http(base, "GET", path, headers, "").await;
        if answer.status == want {
            return;
        }
        assert!(Instant::now() < deadline, "never {want}: {answer:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_past_the_cap_are_refused() {
    let (_dir, url) = store().await;
    let args = ["--max-connections", "2", "--header-timeout", "60s"];
    let console = common::console(&url, &args, &[]).await;
    let first = TcpStream::connect(authority(&console.base))
        .await
        .expect("connect");
    let second = TcpStream::connect(authority(&console.base))
        .await
        .expect("connect");
    let third = http(&console.base, "GET", "/", &[], "").await;
    assert_eq!(third.status, 503, "{third:?}");
    assert!(third.body.contains("--max-connections"), "{third:?}");
    drop((first, second));
    answers(&console.base, "/", &[], 401).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn event_streams_past_the_cap_are_refused() {
    let (_dir, url) = store().await;
    let console = common::console(&url, &["--max-event-streams", "1"], &[]).await;
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let (status, first) = open(&console.base, "/events/namespace", &with).await;
    assert_eq!(status, 200);
    let second = http(&console.base, "GET", "/events/execution?id=busy", &with, "").await;
    assert_eq!(second.status, 503, "{second:?}");
    assert!(second.body.contains("--max-event-streams"), "{second:?}");
    drop(first);
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (status, _stream) = open(&console.base, "/events/namespace", &with).await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the slot was never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A client that pipelines requests and never reads the answers: once the socket's buffers
/// are full the console's write waits, and `--write-timeout` closes the connection, so its
/// slot (the only one) serves the next client.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_never_reads_is_cut_off() {
    let (_dir, url) = store().await;
    let args = [
        "--max-connections",
        "1",
        "--header-timeout",
        "60s",
        "--write-timeout",
        "300ms",
    ];
    let console = common::console(&url, &args, &[]).await;
    let authority = authority(&console.base).to_owned();
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    let address = authority.parse().expect("an address");
    let mut greedy = socket.connect(address).await.expect("connect");
    let one = request(&authority, "GET", "/", &[], "").replace("Connection: close\r\n", "");
    let burst = one.repeat(64);
    // Writes until the console stops reading (its writes wait on this client), then waits;
    // never reads. It ends when the console closes the connection.
    let writer =
        tokio::spawn(async move { while greedy.write_all(burst.as_bytes()).await.is_ok() {} });
    answers(&console.base, "/", &[], 401).await;
    drop(writer);
}

/// The executions and dead-letter pages read (their links and filters escaped); a selection
/// of several asks for confirmation first, then acts, logged with every id; a single one
/// acts at once; a forged selection changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_selection_is_confirmed_then_acted_on_and_logged() {
    let (_dir, url) = store().await;
    make_dead(&url, "doomed-1").await;
    make_dead(&url, "doomed-2").await;
    let mut console = common::console(&url, &["--allow-writes"], &[]).await;
    let cookie = session(&console).await;
    let with = [("Cookie", cookie.as_str())];
    let dead = http(&console.base, "GET", "/dead", &with, "").await;
    assert_eq!(dead.status, 200, "{dead:?}");
    for id in ["doomed-1", "doomed-2"] {
        assert!(
            dead.body.contains(&format!("name=\"id\" value=\"{id}\"")),
            "{dead:?}"
        );
    }
    assert!(dead.body.contains("id=\"retry-selected\""), "{dead:?}");
    let token = csrf(&dead.body);
    let base = console.base.clone();
    let own = [
        ("Origin", base.as_str()),
        ("Sec-Fetch-Site", "same-origin"),
        ("Cookie", cookie.as_str()),
    ];
    let forged = "action=retry&id=doomed-1&csrf=0&back=%2Fdead";
    let forged = http(&console.base, "POST", "/act", &own, forged).await;
    assert_eq!(forged.status, 403, "{forged:?}");
    let line = logged(&mut console, "action=retry").await;
    assert!(line.ends_with("ids=[\"doomed-1\"] status=403"), "{line}");
    let two = format!("action=retry&id=doomed-1&id=doomed-2&csrf={token}&back=%2Fdead");
    let asked = http(&console.base, "POST", "/act", &own, &two).await;
    assert_eq!(asked.status, 200, "{asked:?}");
    assert!(
        asked.body.contains("retry these 2 executions?"),
        "{asked:?}"
    );
    assert!(
        asked.body.contains("name=\"confirmed\" value=\"yes\""),
        "{asked:?}"
    );
    assert_eq!(
        status_of(&url, "doomed-1").await,
        "dead",
        "not before the confirmation"
    );
    let confirmed = format!("{two}&confirmed=yes");
    let done = http(&console.base, "POST", "/act", &own, &confirmed).await;
    assert_eq!(done.status, 200, "{done:?}");
    assert!(done.body.contains("re-admitted doomed-2"), "{done:?}");
    let line = logged(&mut console, "action=retry").await;
    assert!(
        line.ends_with("ids=[\"doomed-1\", \"doomed-2\"] status=200"),
        "{line}"
    );
    for id in ["doomed-1", "doomed-2"] {
        assert_eq!(status_of(&url, id).await, "admitted");
    }
    let one = format!("action=cancel&id=queued&reason=&csrf={token}");
    let cancelled = http(&console.base, "POST", "/act", &own, &one).await;
    assert_eq!(cancelled.status, 200, "one acts at once: {cancelled:?}");
    assert_eq!(status_of(&url, "queued").await, "cancelled");
    let line = logged(&mut console, "action=cancel").await;
    assert!(line.ends_with("ids=[\"queued\"] status=200"), "{line}");
    let ended = format!("action=cancel&id=done-1&id=busy&confirmed=yes&csrf={token}");
    let mixed = http(&console.base, "POST", "/act", &own, &ended).await;
    assert_eq!(mixed.status, 409, "done-1 had completed: {mixed:?}");
    assert!(mixed.body.contains("cancelled busy"), "{mixed:?}");
    let none = format!("action=cancel&csrf={token}");
    let none = http(&console.base, "POST", "/act", &own, &none).await;
    assert_eq!(none.status, 400, "{none:?}");
    let page = http(&console.base, "GET", "/execution?id=done-1", &with, "").await;
    assert!(
        !page.body.contains("id=\"cancel\""),
        "no cancel once ended: {page:?}"
    );
}
